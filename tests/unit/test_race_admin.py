"""RaceAdmin on the fakes: what a director creates and edits, what the runners then see,
and what is refused (another director's race, stale copies, caps below the places taken)."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from racecap.errors import CapBelowTaken, Conflict, EventNotFound, RaceNotFound, TooManyEvents, ValidationFailed
from racecap.models import Director
from racecap.places.rules import shards_for
from racecap.setup import models as setup_models
from racecap.setup import service as setup_service
from racecap.setup.models import EventDraft, EventPatch, PriceTierDraft, RacePatch
from racecap.setup.service import RaceAdmin

from tests.unit.admin_world import DANA, OTTO, AdminWorld, draft, take


@pytest.fixture
def w() -> AdminWorld:
    return AdminWorld()


# -- creating ---------------------------------------------------------------------------------------
def test_a_created_race_is_listed_for_runners_and_audited(w):
    w.catalog.list_races()  # the empty listing is cached first: the creation must orphan it
    race = w.create(10, 300)
    assert race.registrationState == "SCHEDULED"
    assert [r.raceId for r in w.catalog.list_races().races] == [race.raceId]
    view = w.admin.get(DANA, race.raceId)
    assert [(e.cap, e.shards, e.taken, e.placesLeft) for e in view.events] == [(10, 1, 0, 10), (300, 8, 0, 300)]
    assert sum(s.cap for s in w.inventory.usage(race.raceId, view.events[1].eventId).shards) == 300
    assert w.audit_store.actions(race.raceId) == ["race.create"]


def test_a_race_opened_at_creation_takes_holds_at_once(w):
    race = w.create(5, open_now=True)
    assert w.catalog.get_race(race.raceId).events[0].status == "OPEN"
    assert w.race(race.raceId).registrationState == "OPEN"


def test_a_race_created_without_a_director_or_catalog_is_not_audited():
    """How the demo seed and the burst tools create races (``RaceAdmin(store, inventory)``)."""
    w = AdminWorld()
    plain = RaceAdmin(w.races, w.inventory, audit=w.audit)
    race = plain.create_race("seed", draft(3))
    assert w.race(race.raceId).ownerId == "seed"
    assert w.audit_store.actions(race.raceId) == []
    seed = Director(sub="seed", username="seed")
    with pytest.raises(RuntimeError):  # no transaction runner: it cannot change a race
        plain.add_event(seed, race.raceId, EventDraft(name="x", cap=1, priceCents=500))


def test_shards_follow_the_cap() -> None:
    assert [shards_for(c) for c in (1, 25, 26, 200, 201, 1_000_000)] == [1, 1, 2, 8, 8, 8]


# -- reading ----------------------------------------------------------------------------------------
def test_another_directors_race_does_not_exist_for_them(w):
    race = w.create(5)
    with pytest.raises(RaceNotFound):
        w.admin.get(OTTO, race.raceId)
    with pytest.raises(RaceNotFound):
        w.admin.get(DANA, "race_none")
    assert w.admin.list_races(OTTO).races == []
    assert [r.raceId for r in w.admin.list_races(DANA).races] == [race.raceId]


def test_the_view_counts_places_taken(w):
    race = w.create(5)
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    take(w, race.raceId, event_id, 2)
    (event,) = w.admin.get(DANA, race.raceId).events
    assert (event.taken, event.placesLeft) == (2, 3)


# -- adding events ----------------------------------------------------------------------------------
def test_an_added_event_comes_last_with_its_own_shards(w):
    race = w.create(5)
    view = w.admin.add_event(DANA, race.raceId, EventDraft(name="Kids", cap=60, priceCents=500))
    assert [e.name for e in view.events] == ["5K", "Kids"]
    assert view.events[1].shards == 3 and view.events[1].placesLeft == 60
    assert view.version == 2
    assert w.audit_store.actions(race.raceId) == ["race.create", "event.create"]
    assert [e.name for e in w.catalog.get_race(race.raceId).events] == ["5K", "Kids"]


def test_a_race_has_at_most_fifty_events(w, monkeypatch):
    monkeypatch.setattr(setup_service, "MAX_EVENTS", 2)
    race = w.create(5, 5)
    with pytest.raises(TooManyEvents):
        w.admin.add_event(DANA, race.raceId, EventDraft(name="Third", cap=1, priceCents=500))
    assert len(w.races.get_race(race.raceId)[1]) == 2


def test_an_event_added_to_a_race_changed_meanwhile_is_a_conflict(w, monkeypatch):
    race = w.create(5)
    stale = w.races.get_race(race.raceId)
    w.races.apply_update(w.race(race.raceId), {"name": "Renamed"})
    monkeypatch.setattr(w.admin, "owned", lambda director, race_id: stale)
    with pytest.raises(Conflict):
        w.admin.add_event(DANA, race.raceId, EventDraft(name="Late", cap=1, priceCents=500))
    assert [e.name for e in w.races.get_race(race.raceId)[1]] == ["5K"]


# -- editing a race ---------------------------------------------------------------------------------
def test_an_edit_changes_the_race_everywhere_and_records_from_and_to(w):
    race = w.create(5)
    w.catalog.get_race(race.raceId)  # cached before the edit
    view = w.admin.update_race(DANA, race.raceId, RacePatch(name="New name", expectedVersion=1))
    assert (view.name, view.version) == ("New name", 2)
    assert w.catalog.get_race(race.raceId).name == "New name"
    assert w.catalog.list_races().races[0].name == "New name"
    entry = w.audit.page(race.raceId, 1, None).entries[0]
    assert entry.action == "race.update"
    assert entry.details["changes"] == {"name": {"from": "Harbour Run", "to": "New name"}}


def test_an_edit_of_an_old_version_is_a_conflict(w):
    race = w.create(5)
    w.admin.update_race(DANA, race.raceId, RacePatch(name="First"))
    with pytest.raises(Conflict):
        w.admin.update_race(DANA, race.raceId, RacePatch(name="Second", expectedVersion=1))
    assert w.race(race.raceId).name == "First"


def test_null_is_not_a_value(w):
    race = w.create(5)
    with pytest.raises(ValidationFailed) as info:
        w.admin.update_race(DANA, race.raceId, RacePatch.model_validate({"name": None}))
    assert info.value.fields == {"name": "May not be null."}
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    with pytest.raises(ValidationFailed):
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch.model_validate({"cap": None}))


def test_an_edit_is_checked_against_the_whole_race(w):
    race = w.create(5)
    closes_before_opening = race.registrationOpensAt - timedelta(hours=1)
    with pytest.raises(ValidationFailed) as info:
        w.admin.update_race(DANA, race.raceId, RacePatch(registrationClosesAt=closes_before_opening))
    assert "registrationClosesAt" in info.value.fields
    assert w.race(race.raceId).version == 1


def test_an_edit_that_changes_nothing_writes_nothing(w):
    race = w.create(5)
    view = w.admin.update_race(DANA, race.raceId, RacePatch(name="Harbour Run"))
    assert view.version == 1 and w.audit_store.actions(race.raceId) == ["race.create"]


def test_the_currency_changes_with_its_events_until_a_place_is_taken(w):
    race = w.create(5, 5)
    view = w.admin.update_race(DANA, race.raceId, RacePatch(currency="EUR"))
    assert view.currency == "EUR" and {e.currency for e in w.races.get_race(race.raceId)[1]} == {"EUR"}
    take(w, race.raceId, view.events[1].eventId)
    with pytest.raises(Conflict):
        w.admin.update_race(DANA, race.raceId, RacePatch(currency="GBP"))
    assert w.race(race.raceId).currency == "EUR"


def test_new_times_restart_a_running_window(w):
    race = w.create(5)
    w.window.schedule(DANA, race)
    later = race.registrationClosesAt + timedelta(days=1)
    w.admin.update_race(DANA, race.raceId, RacePatch(registrationClosesAt=later))
    window = w.windows.get(race.raceId)
    assert window is not None and window.execution == f"{race.raceId}-w2"
    assert w.workflow.executions[f"{race.raceId}-w2"]["input"]["closesAt"].startswith(later.date().isoformat())
    assert w.workflow.status(f"{race.raceId}-w1") == "ABORTED"


# -- editing an event -------------------------------------------------------------------------------
def _event_id(w: AdminWorld, race_id: str, n: int = 0) -> str:
    return w.admin.get(DANA, race_id).events[n].eventId


def test_raising_a_cap_adds_shards_and_offers_the_places_again(w):
    race = w.create(20)
    event_id = _event_id(w, race.raceId)
    take(w, race.raceId, event_id, 20)
    w.cache.flag(f"soldout:{race.raceId}:{event_id}", 60)
    view = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(cap=100, expectedVersion=1))
    (event,) = view.events
    assert (event.cap, event.shards, event.taken, event.placesLeft) == (100, 4, 20, 80)
    assert not w.cache.has_flag(f"soldout:{race.raceId}:{event_id}")
    assert w.audit_store.actions(race.raceId)[-1] == "event.update"
    assert view.version == 2


def test_a_cap_goes_down_to_the_places_taken_and_no_further(w):
    race = w.create(30)
    event_id = _event_id(w, race.raceId)
    take(w, race.raceId, event_id, 7)
    with pytest.raises(CapBelowTaken) as info:
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(cap=6))
    assert info.value.fields == {"cap": "At least 7."}
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(cap=7)).events
    assert (event.cap, event.placesLeft) == (7, 0)


def test_an_event_edit_that_changes_nothing_writes_nothing(w):
    race = w.create(5)
    event_id = _event_id(w, race.raceId)
    assert w.admin.update_event(DANA, race.raceId, event_id, EventPatch(cap=5, priceCents=2500)).version == 1
    assert w.admin.update_event(DANA, race.raceId, event_id, EventPatch(name="Fun run")).events[0].name == "Fun run"


def test_an_unknown_event_is_not_found(w):
    race = w.create(5)
    with pytest.raises(EventNotFound):
        w.admin.update_event(DANA, race.raceId, "evt_none", EventPatch(cap=3))
    with pytest.raises(Conflict):
        w.admin.update_event(DANA, race.raceId, _event_id(w, race.raceId), EventPatch(cap=3, expectedVersion=9))


def test_a_cap_change_replans_when_a_hold_lands_meanwhile(w):
    race = w.create(60)  # three shards of 20
    event_id = _event_id(w, race.raceId)
    real = w.inventory.cap_change_items
    tries: list[int] = []

    def hold_lands_first(race_id, ev, plan):
        tries.append(1)
        if len(tries) == 1:  # 12 runners' holds land on the first shard between read and write
            take(w, race.raceId, event_id, 12)
        return real(race_id, ev, plan)

    w.inventory.cap_change_items = hold_lands_first  # type: ignore[method-assign]
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(cap=30)).events
    assert (event.cap, event.taken, event.placesLeft) == (30, 12, 18)
    assert len(tries) == 2
    assert all(s.taken <= s.cap for s in w.inventory.usage(race.raceId, event_id).shards)


def test_an_event_that_keeps_changing_gives_up_with_a_conflict(w):
    race = w.create(10)
    event_id = _event_id(w, race.raceId)
    real = w.inventory.cap_change_items

    def another_edit_lands(race_id, ev, plan):
        w.races.apply_update(w.race(race.raceId), {"description": f"edit {w.race(race.raceId).version}"})
        return real(race_id, ev, plan)

    w.inventory.cap_change_items = another_edit_lands  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(cap=9))
    assert w.inventory.usage(race.raceId, event_id).cap == 10
    assert w.race(race.raceId).version == 1 + setup_service.CAP_CHANGE_TRIES


def test_patch_documents_show_no_null():
    for model in (RacePatch, EventPatch):
        props = model.model_json_schema()["properties"]
        assert all(
            "anyOf" not in p or all(s.get("type") != "null" for s in p["anyOf"])
            for n, p in props.items()
            if n != "expectedVersion"
        )
    assert RacePatch.model_json_schema()["properties"]["registrationOpensAt"]["format"] == "date-time"


# -- an event's age rule ------------------------------------------------------------------------
def test_an_events_age_rule_is_set_shown_and_edited_and_never_upside_down(w):
    race = w.create(20)
    event_id = _event_id(w, race.raceId)
    (event,) = w.admin.get(DANA, race.raceId).events
    assert (event.minAge, event.maxAge) == (5, None)  # the default: 5 and over on race day
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(minAge=4, maxAge=12)).events
    assert (event.minAge, event.maxAge) == (4, 12)
    assert w.catalog.get_race(race.raceId).events[0].ageRule == "ages 4 to 12 on race day"
    with pytest.raises(ValidationFailed) as upside_down:
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(minAge=13))
    assert upside_down.value.fields == {"minAge": "minAge must not be above maxAge."}
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(noMaxAge=True, minAge=18)).events
    assert (event.minAge, event.maxAge) == (18, None)
    with pytest.raises(ValidationFailed):
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(noMaxAge=True, maxAge=30))
    with pytest.raises(ValueError, match="minAge must not be above maxAge"):
        EventDraft(name="Kids", cap=10, priceCents=500, minAge=12, maxAge=4)


# -- copying last year's race -------------------------------------------------------------------
def test_a_copied_race_is_a_new_draft_with_the_events_prices_and_rules_a_year_later_and_no_registrations(w):
    from racecap.setup.models import CopyRequest

    race = w.create(20, 5, open_now=True)
    kids = _event_id(w, race.raceId, 1)
    w.admin.update_event(DANA, race.raceId, kids, EventPatch(minAge=4, maxAge=12, priceCents=900))
    take(w, race.raceId, kids, 3)
    copy = w.admin.copy_race(DANA, race.raceId, CopyRequest())
    view = w.admin.get(DANA, copy.raceId)
    assert copy.raceId != race.raceId and (view.listing, view.registrationState) == ("DRAFT", "SCHEDULED")
    assert date.fromisoformat(view.raceDate) == date.fromisoformat(race.raceDate).replace(
        year=int(race.raceDate[:4]) + 1
    )
    assert view.registrationOpensAt - race.registrationOpensAt == view.registrationClosesAt - race.registrationClosesAt
    assert [(e.name, e.cap, e.priceCents, e.minAge, e.maxAge, e.taken) for e in view.events] == [
        ("5K", 20, 2500, 5, None, 0),
        ("10K", 5, 900, 4, 12, 0),
    ]
    assert w.audit_store.actions(copy.raceId) == ["race.create"]
    moved = w.admin.copy_race(DANA, race.raceId, CopyRequest(raceDate="2031-03-01", name="Harbour Run 2031"))
    assert (moved.name, moved.raceDate) == ("Harbour Run 2031", "2031-03-01")
    with pytest.raises(RaceNotFound):
        w.admin.copy_race(OTTO, race.raceId, CopyRequest())


# -- prices the payment provider can charge -----------------------------------------------------------
def test_a_price_under_the_providers_minimum_is_refused_naming_the_field_and_nothing_changes(w):
    race = w.create(5)
    event_id = _event_id(w, race.raceId)
    with pytest.raises(ValidationFailed) as edit:
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceCents=49))
    assert edit.value.fields is not None and "0.50 USD" in edit.value.fields["priceCents"]
    with pytest.raises(ValidationFailed) as added:
        w.admin.add_event(DANA, race.raceId, EventDraft(name="Kids", cap=5, priceCents=49))
    assert added.value.fields is not None and set(added.value.fields) == {"priceCents"}
    view = w.admin.get(DANA, race.raceId)
    assert [(e.name, e.priceCents) for e in view.events] == [("5K", 2500)] and view.version == 1
    assert w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceCents=50)).events[0].priceCents == 50


def test_a_free_entry_price_0_is_accepted_but_1_is_not(w):
    race = w.create(5)
    event_id = _event_id(w, race.raceId)
    assert w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceCents=0)).events[0].priceCents == 0
    with pytest.raises(ValidationFailed):
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceCents=1))
    added = w.admin.add_event(DANA, race.raceId, EventDraft(name="Kids 1K", cap=5, priceCents=0))
    assert sorted(e.priceCents for e in added.events) == [0, 0]


@pytest.mark.parametrize(
    ("currency", "refused", "accepted"),
    [("GBP", 29, 30), ("EUR", 49, 50), ("JPY", 49, 50), ("SEK", 299, 300), ("DKK", 249, 250)],
)
def test_the_minimum_is_the_races_currencys_in_its_own_unit(w, currency, refused, accepted):
    """JPY is zero-decimal: 50 is ¥50, the minimum, not ¥0.50."""
    with pytest.raises(ValidationFailed) as created:
        w.admin.create_race(
            DANA.sub,
            draft(5, currency=currency, events=[EventDraft(name="5K", cap=5, priceCents=refused)]),
            director=DANA,
        )
    assert created.value.fields is not None and set(created.value.fields) == {"events.0.priceCents"}
    assert w.admin.list_races(DANA).races == []
    race = w.create(5, currency=currency, events=[EventDraft(name="5K", cap=5, priceCents=accepted)])
    assert w.admin.get(DANA, race.raceId).events[0].priceCents == accepted


def test_a_currency_whose_minimum_the_prices_do_not_reach_is_refused(w):
    race = w.create(5, events=[EventDraft(name="5K", cap=5, priceCents=100)])  # 1.00 USD
    with pytest.raises(ValidationFailed) as exc:
        w.admin.update_race(DANA, race.raceId, RacePatch(currency="SEK"))  # SEK's minimum is 3.00
    assert exc.value.fields is not None and "3.00 SEK" in exc.value.fields["currency"]
    assert w.race(race.raceId).currency == "USD"
    assert w.admin.update_race(DANA, race.raceId, RacePatch(currency="GBP")).currency == "GBP"


def test_a_new_currency_is_checked_against_every_price_tier_too(w):
    # Given a race in USD whose 10K costs 5.00, then 1.00 from a tier on, beside a free kids' race
    soon = date.today() + timedelta(days=5)
    tiered = EventDraft(
        name="10K", cap=5, priceCents=500, priceTiers=[PriceTierDraft(startsAt=f"{soon}T09:00:00", priceCents=100)]
    )
    race = w.create(5, events=[EventDraft(name="Kids", cap=5, priceCents=0), tiered])
    # When its currency becomes SEK (smallest charge 3.00): the base prices pass, the tier does not
    with pytest.raises(ValidationFailed) as exc:
        w.admin.update_race(DANA, race.raceId, RacePatch(currency="SEK"))
    # Then a 400 naming the tier's field, and nothing changed
    assert exc.value.status == 400
    fields = exc.value.fields or {}
    assert set(fields) == {"currency", "events.1.priceTiers.0.priceCents"}
    assert "3.00 SEK" in fields["events.1.priceTiers.0.priceCents"] and "priceTiers" in exc.value.message
    assert w.race(race.raceId).currency == "USD" and w.audit_store.actions(race.raceId) == ["race.create"]
    # A currency whose smallest charge the tier reaches is accepted (GBP: 0.30)
    assert w.admin.update_race(DANA, race.raceId, RacePatch(currency="GBP")).currency == "GBP"


def test_every_currency_a_director_may_choose_has_the_providers_minimum():
    from racecap.money import MINIMUM_CHARGE

    assert MINIMUM_CHARGE.keys() >= setup_models.KNOWN_CURRENCIES


def test_a_copy_into_the_past_is_refused_naming_the_race_date(w):
    from racecap.setup.models import CopyRequest

    race = w.create(5)
    with pytest.raises(ValidationFailed) as refused:
        w.admin.copy_race(DANA, race.raceId, CopyRequest(raceDate="1999-09-01"))
    assert set(refused.value.fields or {}) == {"raceDate"}


def test_an_events_waitlist_is_set_whole_audited_refused_when_out_of_bounds_and_copied(w):
    from pydantic import ValidationError
    from racecap.setup.models import CopyRequest

    race = w.create(5)
    event_id = _event_id(w, race.raceId)
    assert w.admin.get(DANA, race.raceId).events[0].waitlist.model_dump() == {
        "enabled": False, "offerWindowHours": 48, "maxLength": None,
    }  # fmt: skip
    patch = EventPatch.model_validate({"waitlist": {"enabled": True, "maxLength": 10}})
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, patch).events
    assert event.waitlist.model_dump() == {"enabled": True, "offerWindowHours": 48, "maxLength": 10}
    assert w.audit_store.actions(race.raceId)[-1] == "event.update"
    again = w.admin.update_event(DANA, race.raceId, event_id, patch)  # the same setting: nothing written
    assert again.version == w.admin.get(DANA, race.raceId).version
    # Sent whole: a field left out takes its default again (here, no cap).
    (event,) = w.admin.update_event(
        DANA, race.raceId, event_id, EventPatch.model_validate({"waitlist": {"enabled": True}})
    ).events
    assert event.waitlist.maxLength is None
    for wrong in (
        {"enabled": 1},
        {"offerWindowHours": 0},
        {"offerWindowHours": 337},
        {"maxLength": True},
        {"other": 1},
    ):
        with pytest.raises(ValidationError):
            EventPatch.model_validate({"waitlist": wrong})
    w.admin.update_event(
        DANA, race.raceId, event_id, EventPatch.model_validate({"waitlist": {"enabled": True, "offerWindowHours": 24}})
    )
    copy = w.admin.copy_race(DANA, race.raceId, CopyRequest())
    (copied,) = w.admin.get(DANA, copy.raceId).events
    assert copied.waitlist.model_dump() == {"enabled": True, "offerWindowHours": 24, "maxLength": None}
