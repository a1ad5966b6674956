"""Price tiers by date: the price in force when a place is held is the price charged, on the
hold and on its PaymentIntent, whenever the runner pays; a director's tiers are in order,
chargeable, and entered in the race's time zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.errors import ValidationFailed
from racecap.races.models import PriceTier
from racecap.setup.models import EventPatch, PriceTierDraft

from tests.fakes.catalog import open_race
from tests.unit.admin_world import DANA, AdminWorld
from tests.unit.core_world import World, request


def _tiered_world(boundary: datetime) -> World:
    world = World()
    race, (event,) = open_race()
    tiered = event.model_copy(
        update={"priceCents": 3500, "priceTiers": [PriceTier(startsAt=boundary, priceCents=4500)]}
    )
    world.catalog.add(race, [tiered])
    return world


def test_a_tier_boundary_crossed_during_a_hold_keeps_the_held_price_on_the_payment_intent_too():
    boundary = datetime.now(UTC) + timedelta(minutes=1)
    world = _tiered_world(boundary)
    held = world.hold_service.hold("race-1", "ev0", now=boundary - timedelta(seconds=30))
    assert (held.priceCents, world.holds.get(held.holdId).amountCents) == (3500, 3500)
    # The runner pays after the standard price started.
    accepted = world.registration.register(held.holdId, request(), now=boundary + timedelta(seconds=30))
    assert accepted.status == "QUEUED"
    (intent,) = world.payments.intents
    assert intent.amount_cents == 3500
    assert world.hold_service.view(held.holdId, now=boundary + timedelta(seconds=31)).priceCents == 3500
    # A place held after the boundary costs the new price.
    later = world.hold_service.hold("race-1", "ev0", now=boundary + timedelta(seconds=40))
    assert later.priceCents == 4500


def test_the_race_page_shows_the_price_now_and_the_prices_to_come():
    w = AdminWorld()
    race = w.create(10, open_now=True)
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    soon, later = datetime.now(UTC) + timedelta(days=3), datetime.now(UTC) + timedelta(days=9)
    tiers = [PriceTierDraft(startsAt=soon, priceCents=3000), PriceTierDraft(startsAt=later, priceCents=4000)]
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceTiers=tiers)).events
    assert (event.priceCents, event.priceNow, [t.priceCents for t in event.priceTiers]) == (2500, 2500, [3000, 4000])
    (shown,) = w.catalog.get_race(race.raceId).events
    assert shown.priceCents == 2500 and [t.priceCents for t in shown.priceChanges] == [3000, 4000]
    assert w.audit_store.actions(race.raceId)[-1] == "event.update"
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceTiers=[])).events
    assert event.priceTiers == []


def test_tiers_are_in_order_chargeable_and_entered_in_the_races_time_zone():
    w = AdminWorld()
    race = w.create(10, timeZone="America/New_York")
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    out_of_order = [
        PriceTierDraft(startsAt=datetime(2031, 5, 1, 9), priceCents=3000),
        PriceTierDraft(startsAt=datetime(2031, 4, 1, 9), priceCents=4000),
    ]
    with pytest.raises(ValidationFailed) as refused:
        w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceTiers=out_of_order))
    assert set(refused.value.fields or {}) == {"priceTiers.1.startsAt"}
    with pytest.raises(ValidationFailed) as cheap:
        w.admin.update_event(
            DANA,
            race.raceId,
            event_id,
            EventPatch(priceTiers=[PriceTierDraft(startsAt=datetime(2031, 5, 1), priceCents=49)]),
        )
    assert set(cheap.value.fields or {}) == {"priceTiers.0.priceCents"}
    local = [PriceTierDraft(startsAt=datetime(2031, 5, 1, 9), priceCents=3000)]  # 09:00 in New York, EDT
    (event,) = w.admin.update_event(DANA, race.raceId, event_id, EventPatch(priceTiers=local)).events
    assert event.priceTiers[0].startsAt == datetime(2031, 5, 1, 13, tzinfo=UTC)


def test_a_copied_race_moves_its_price_tiers_with_its_dates():
    from racecap.setup.models import CopyRequest

    w = AdminWorld()
    race = w.create(10)
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    starts = datetime.now(UTC).replace(microsecond=0) + timedelta(days=5)
    w.admin.update_event(
        DANA, race.raceId, event_id, EventPatch(priceTiers=[PriceTierDraft(startsAt=starts, priceCents=3000)])
    )
    copy = w.admin.copy_race(DANA, race.raceId, CopyRequest())
    (event,) = w.admin.get(DANA, copy.raceId).events
    shift = copy.registrationOpensAt - race.registrationOpensAt
    assert [(t.startsAt, t.priceCents) for t in event.priceTiers] == [(starts + shift, 3000)]
