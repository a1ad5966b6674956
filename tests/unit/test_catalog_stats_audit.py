"""What runners and directors read, on the fakes: the race pages (status, places left,
the cache's version stamps), a race's live figures, and the audit trail's pages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.audit.models import AuditEntry
from racecap.audit.service import decode_cursor, encode_cursor
from racecap.errors import RaceNotFound, ValidationFailed
from racecap.holds.models import Attempt, BeginOutcome
from racecap.models import Actor, Director
from racecap.races import catalog as races_module
from racecap.races.catalog import event_status, race_status
from racecap.races.models import Race, WaitlistSettings
from racecap.stats.service import RaceStats
from racecap.waitlist.models import Line

from tests.unit.admin_world import DANA, AdminWorld, register, take


@pytest.fixture
def w() -> AdminWorld:
    return AdminWorld()


NOW = datetime.now(UTC)


def _race(state: str, opens: timedelta, closes: timedelta) -> Race:
    return Race(
        raceId="r",
        ownerId="o",
        name="n",
        raceDate="2027-01-01",
        registrationOpensAt=NOW + opens,
        registrationClosesAt=NOW + closes,
        registrationState=state,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("state", "closes", "status"),
    [
        ("OPEN", timedelta(days=1), "OPEN"),
        ("OPEN", timedelta(days=-1), "CLOSED"),  # past its closing time, whatever the state says
        ("CLOSED", timedelta(days=1), "CLOSED"),
        ("SCHEDULED", timedelta(days=1), "NOT_YET_OPEN"),
        ("SCHEDULED", timedelta(seconds=-1), "CLOSED"),
    ],
)
def test_a_races_public_status(state, closes, status):
    assert race_status(_race(state, timedelta(days=-2), closes), NOW) == status


def test_an_open_event_with_no_place_left_is_sold_out():
    assert [event_status("OPEN", 0), event_status("OPEN", 1), event_status("CLOSED", 0)] == [
        "SOLD_OUT",
        "OPEN",
        "CLOSED",
    ]


# -- the race pages ---------------------------------------------------------------------------------
def test_the_race_page_shows_places_left_per_event(w):
    race = w.create(3, 5, open_now=True)
    events = w.catalog.definition(race.raceId)[1]
    take(w, race.raceId, events[0].eventId, 3)
    page = w.catalog.get_race(race.raceId)
    assert [(e.spotsLeft, e.status) for e in page.events] == [(0, "SOLD_OUT"), (5, "OPEN")]
    assert page.status == "OPEN" and page.currency == "USD" and page.holdMinutes == 10


def test_places_left_are_cached_briefly_and_cleared_when_places_come_back(w, monkeypatch):
    monkeypatch.setattr(races_module, "AVAILABILITY_LOCAL_TTL", 600.0)  # "briefly" must not end mid-test
    race = w.create(3, open_now=True)
    (event,) = w.catalog.definition(race.raceId)[1]
    assert w.catalog.get_race(race.raceId).events[0].spotsLeft == 3
    take(w, race.raceId, event.eventId, 2)
    assert w.catalog.get_race(race.raceId).events[0].spotsLeft == 3  # still the cached figure
    w.cache.flag(f"soldout:{race.raceId}:{event.eventId}", 60)
    w.catalog.places_came_back(race.raceId, event.eventId)
    assert w.catalog.get_race(race.raceId).events[0].spotsLeft == 1
    assert not w.cache.has_flag(f"soldout:{race.raceId}:{event.eventId}")


def test_an_unknown_race_is_not_found(w):
    with pytest.raises(RaceNotFound):
        w.catalog.get_race("race_none")


def test_a_race_deleted_after_its_stamp_was_read_is_not_found(w, monkeypatch):
    race = w.create(3)
    monkeypatch.setattr(w.races, "get_race", lambda race_id: None)
    with pytest.raises(RaceNotFound):
        w.catalog.definition(race.raceId)


def test_the_listing_shows_listed_races_only_and_a_draft_is_closed_to_runners(w):
    shown = w.create(3)
    by_link = w.create(3, listing="UNLISTED")
    draft = w.create(3, listing="DRAFT")
    assert [r.raceId for r in w.catalog.list_races().races] == [shown.raceId]
    assert w.catalog.get_race(by_link.raceId).raceId == by_link.raceId  # open by its link
    with pytest.raises(RaceNotFound):
        w.catalog.get_race(draft.raceId)


# -- live figures -------------------------------------------------------------------------------------
def test_live_figures_add_up_per_event_and_in_total(w):
    race = w.create(10, 4, open_now=True)
    ev, other = w.catalog.definition(race.raceId)[1]
    holds = take(w, race.raceId, ev.eventId, 6)
    for n, hold in enumerate(holds[:2]):
        register(w, hold, f"ann{n}@example.com")
    attempt = Attempt("k-q", "q@example.com", "Q", "R", "1990-01-01", 2500, "USD", w.clock.now.isoformat())
    assert w.attempts.begin_payment(holds[2], attempt, w.clock.now) == BeginOutcome.STARTED
    w.attempts.mark_queued(
        holds[2], attempt, "pi_q", w.clock.now, w.clock.now + timedelta(minutes=5)
    )  # paid, on the queue
    # Held: every place taken and not confirmed (the queued one too), with no read of the holds;
    # queued: what the per-second counts say was queued and not written yet.
    unwritten = {ev.eventId: 1, other.eventId: 5}  # 5 in `other`, which holds none: never above held
    stats = RaceStats(w.inventory, w.regs, lambda r: unwritten, w.cache, clock=w.clock)
    view = stats.stats(w.race(race.raceId), [ev, other], minutes=3)
    first = view.events[0]
    assert (first.cap, first.held, first.queued, first.confirmed, first.placesLeft) == (10, 4, 1, 2, 4)
    assert (view.events[1].held, view.events[1].queued) == (0, 0)
    assert (first.revenueCents, first.cancelled, first.refundedCents) == (5000, 0, 0)
    assert [m.confirmed for m in first.perMinute] == [0, 0, 2]
    assert first.perMinute[-1].minute == w.clock.now.strftime("%Y-%m-%dT%H:%M")
    assert view.totals == {
        "cap": 14,
        "held": 4,
        "queued": 1,
        "confirmed": 2,
        "cancelled": 0,
        "placesLeft": 8,
        **dict.fromkeys(("cancelledByRunners", "cancelledByOrganiser", "cancelledByProvider", "cancelledBySystem"), 0),
        "revenueCents": 5000,
        "refundedCents": 0,
        "grossCents": 5000,
        "netCents": 5000,
        "outsideRefunds": 0,
        "transfers": 0,
        "switchedIn": 0,
        "switchedOut": 0,
        "deferred": 0,
        "otherPaymentsCents": 0,
        **dict.fromkeys(("waitlistLength", "waitlistPooled", "offersOut", "offersAccepted", "offersExpired"), 0),
    }
    assert (view.status, view.minutes, view.asOf) == ("OPEN", 3, w.clock.now)


def test_each_events_waitlist_figures_come_from_its_line_and_add_up_in_the_totals(w):
    race = w.create(10, 4, open_now=True)
    ev, other = (
        e.model_copy(update={"waitlist": WaitlistSettings(enabled=True)}) for e in w.catalog.definition(race.raceId)[1]
    )
    lines = {
        ev.eventId: Line(waiting=7, pool=1, offered=2, claimed=3, expired=4),
        other.eventId: Line(waiting=5, pool=0, offered=1, claimed=1, expired=0),
    }
    stats = RaceStats(w.inventory, w.regs, None, w.cache, clock=w.clock, waitlist=lambda r, e: lines[e])
    view = stats.stats(w.race(race.raceId), [ev, other], minutes=1)
    first = view.events[0]
    assert (first.waitlistLength, first.waitlistPooled, first.offersOut, first.offersAccepted, first.offersExpired) == (
        7,
        1,
        2,
        3,
        4,
    )
    waitlist = ("waitlistLength", "waitlistPooled", "offersOut", "offersAccepted", "offersExpired")
    assert {k: view.totals[k] for k in waitlist} == dict(zip(waitlist, (12, 1, 3, 4, 4), strict=True))
    off = w.create(5, open_now=True)  # an event whose waitlist is off: its line is not read
    (plain,) = w.catalog.definition(off.raceId)[1]
    assert stats.stats(w.race(off.raceId), [plain], minutes=1).events[0].waitlistLength == 0


def test_the_money_is_gross_refunded_and_net_with_the_outside_refunds_flagged(w):
    race = w.create(10, open_now=True)
    (ev,) = w.catalog.definition(race.raceId)[1]
    holds = take(w, race.raceId, ev.eventId, 3)
    for n, hold in enumerate(holds):
        register(w, hold, f"ann{n}@example.com")
    # One cancelled keeping 15.00 (a 10.00 refund), one refunded 3.00 in the provider's dashboard.
    cancelled = holds[0].registrationId
    w.tables.transact([w.cancel_store.begin_cancel_item(cancelled, "2027-01-01T00:00:00", "dir-1", choice="AMOUNT")])
    reg = w.regs.get(cancelled)
    assert reg is not None
    w.tables.transact(w.cancel_store.finish_cancel_items(reg, holds[0], "re_1", "2027-01-01T00:00:01", 1000))
    w.tables.transact([w.cancel_store.refunds_counted_item(race.raceId, ev.eventId, 300, outside=True)])
    (event,) = w.stats.stats(w.race(race.raceId), [ev]).events
    assert (event.grossCents, event.refundedCents, event.netCents) == (7500, 1300, 6200)
    assert (event.revenueCents, event.outsideRefunds, event.currency) == (5000, 1, "USD")


def test_figures_read_at_different_instants_never_show_a_negative_queue(w, monkeypatch):
    race = w.create(5, open_now=True)
    (ev,) = w.catalog.definition(race.raceId)[1]
    take(w, race.raceId, ev.eventId, 1)
    monkeypatch.setattr(
        w.regs, "stats", lambda r, e: {"confirmed": 3, "revenueCents": 0, "cancelled": 0, "refundedCents": 0}
    )
    (event,) = w.stats.stats(w.race(race.raceId), [ev]).events
    assert (event.held, event.queued, len(event.perMinute)) == (0, 0, 60)


# -- the audit trail -----------------------------------------------------------------------------------
def test_the_audit_trail_pages_newest_first_with_a_cursor(w):
    race = w.create(5)
    for n in range(3):
        w.admin.update_race(DANA, race.raceId, _patch(f"Name {n}"))
    first = w.audit.page(race.raceId, 2, None)
    assert [e.details["changes"]["name"]["to"] for e in first.entries] == ["Name 2", "Name 1"]
    assert first.nextCursor is not None
    rest = w.audit.page(race.raceId, 2, first.nextCursor)
    assert [e.action for e in rest.entries] == ["race.update", "race.create"]
    assert rest.entries[0].actor == Actor(kind="director", id=DANA.sub, name=DANA.username)  # no address
    assert rest.entries[1].details == {"name": "Harbour Run", "events": 1}


def _patch(name: str):
    from racecap.setup.models import RacePatch

    return RacePatch(name=name)


def test_audit_details_are_stored_as_json_values(w):
    race = w.create(5)
    at = datetime(2027, 1, 1, tzinfo=UTC)
    w.tables.transact([w.audit.item(DANA, race.raceId, "test", "t", when=at, pair=(1, 2), nested={3: [at]})])
    entry = w.audit.page(race.raceId, 1, None).entries[0]
    assert entry.details == {"when": at.isoformat(), "pair": [1, 2], "nested": {"3": [at.isoformat()]}}


def test_an_audit_cursor_round_trips_and_garbage_is_refused():
    assert decode_cursor(encode_cursor("2027-01-01T00:00:00+00:00#abc")) == "2027-01-01T00:00:00+00:00#abc"
    for bad in ("", "a", "%%%%", "abc="):
        with pytest.raises(ValidationFailed):
            decode_cursor(bad)


def test_the_trail_types_its_actor_and_keeps_no_name_or_address(w):
    race = w.create(5)
    provider = Director(sub="payment-provider", username="payment provider", email="ops@example.com")
    item = w.audit.item(
        provider, race.raceId, "registration.cancel", "reg_1",
        email="ann@example.com", firstName="Ann", bib=7, reason="asked by ann@example.com by phone",
    )  # fmt: skip
    w.tables.transact([item, w.audit.item(Actor.runner("reg_1"), race.raceId, "registration.edit", "reg_1")])
    edit, cancel = w.audit.page(race.raceId, 2, None).entries
    assert (cancel.actor.kind, cancel.actor.id) == ("provider", "payment-provider")
    assert cancel.details == {"bib": 7, "reason": "asked by [address removed] by phone"}
    assert (edit.actor.kind, edit.actor.name) == ("runner", "Runner of registration reg_1")
    # An entry written before the actor was typed reads as the kind it was, without the address.
    legacy = AuditEntry.model_validate(
        {"raceId": "r", "entryId": "e", "at": "2026-01-01T00:00:00+00:00", "action": "a", "target": "t",
         "actor": {"sub": "racecap:retention", "username": "Racecap retention job", "email": "x@example.com"}}
    )  # fmt: skip
    assert legacy.actor == Actor(kind="system", id="racecap:retention", name="Racecap retention job")


def test_an_events_sold_out_moment_is_in_its_stats_and_absent_until_then(w):
    race = w.create(1, 1, open_now=True)
    ev, other = w.catalog.definition(race.raceId)[1]
    at = datetime(2027, 3, 1, 9, 0, 7, tzinfo=UTC)
    w.holds.mark_sold_out(race.raceId, ev.eventId, at)
    view = w.stats.stats(w.race(race.raceId), [ev, other], minutes=1)
    assert [e.soldOutAt for e in view.events] == [at, None]
    assert "soldOutAt" not in view.totals


def test_every_window_asked_shares_one_computation_per_race(w, monkeypatch):
    # Issue 42: the cache key named ``minutes``, so each window asked cost a computation of its own.
    race = w.create(10, open_now=True)
    (ev,) = w.catalog.definition(race.raceId)[1]
    for n, hold in enumerate(take(w, race.raceId, ev.eventId, 2)):
        register(w, hold, f"win{n}@example.com")
    reads: list[str] = []
    per_minute = w.regs.per_minute
    monkeypatch.setattr(w.regs, "per_minute", lambda r, e, since: reads.append(since) or per_minute(r, e, since))
    series = {m: w.stats.stats(w.race(race.raceId), [ev], minutes=m).events[0].perMinute for m in (1, 3, 60, 1440)}
    assert len(reads) == 1  # one computation, the whole day's
    assert {m: len(s) for m, s in series.items()} == {1: 1, 3: 3, 60: 60, 1440: 1440}
    assert {m: sum(c.confirmed for c in s) for m, s in series.items()} == {1: 2, 3: 2, 60: 2, 1440: 2}
    assert series[3][-1].minute == w.clock.now.strftime("%Y-%m-%dT%H:%M")
