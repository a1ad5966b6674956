"""HoldService on fakes: every branch of hold and release, in milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.errors import (
    Conflict,
    EventNotFound,
    HoldExpired,
    HoldNotFound,
    PaymentNotStarted,
    RegistrationClosed,
    SoldOut,
)
from racecap.holds.models import HoldPhase
from racecap.races.catalog import sold_out_flag

from tests.unit.core_world import World, request


@pytest.fixture
def world() -> World:
    return World()


def test_given_room_when_holding_then_a_place_is_held_until_the_hold_time(world):
    world.race(caps=(2,))
    now = datetime.now(UTC)
    created = world.hold_service.hold("race-1", "ev0", now)
    assert created.expiresAt == now + timedelta(minutes=10)
    hold = world.holds.get(created.holdId)
    assert hold is not None and hold.status == HoldPhase.HELD
    assert hold.registrationId == "reg_" + created.holdId.removeprefix("hold_")
    assert world.tables.taken("race-1", "ev0") == 1


def test_given_a_full_event_then_sold_out_and_the_flag_answers_the_rest(world):
    world.race(caps=(1,))
    world.hold_service.hold("race-1", "ev0")
    with pytest.raises(SoldOut):
        world.hold_service.hold("race-1", "ev0")
    assert sold_out_flag("race-1", "ev0") in world.flags.flags
    transactions = world.tables.transactions
    with pytest.raises(SoldOut):
        world.hold_service.hold("race-1", "ev0")
    assert world.tables.transactions == transactions  # answered from the flag: no write tried


def test_the_moment_an_event_first_sells_out_is_kept_once_whatever_sells_out_again(world):
    # The director's "sold out at" (issue 42): the first refusal with every place taken writes
    # it; a refusal after places were freed and taken again (the flag lapsed) keeps the first.
    world.race(caps=(1,))
    first = world.hold_service.hold("race-1", "ev0")
    at = datetime.now(UTC).replace(microsecond=0)
    with pytest.raises(SoldOut):
        world.hold_service.hold("race-1", "ev0", now=at)
    assert world.tables.stats[("race-1", "ev0")]["soldOutAt"] == int(at.timestamp() * 1000)
    world.holds.release(world.holds.get(first.holdId), HoldPhase.RELEASED)
    world.flags.flags.clear()
    world.hold_service.hold("race-1", "ev0")
    with pytest.raises(SoldOut):
        world.hold_service.hold("race-1", "ev0", now=at + timedelta(minutes=5))
    assert world.tables.stats[("race-1", "ev0")]["soldOutAt"] == int(at.timestamp() * 1000)


def test_a_lost_sold_out_moment_never_fails_the_runners_answer(world, monkeypatch):
    world.race(caps=(1,))
    world.hold_service.hold("race-1", "ev0")

    def down(*_: object) -> bool:
        raise RuntimeError("the table is not answering")

    monkeypatch.setattr(world.holds, "mark_sold_out", down)
    with pytest.raises(SoldOut):
        world.hold_service.hold("race-1", "ev0")
    assert sold_out_flag("race-1", "ev0") in world.flags.flags


def test_an_unknown_event_is_not_found(world):
    world.race()
    with pytest.raises(EventNotFound):
        world.hold_service.hold("race-1", "nope")


@pytest.mark.parametrize(
    ("state", "opens_in", "closes_in", "words"),
    [
        ("SCHEDULED", timedelta(hours=1), timedelta(days=1), "has not opened yet"),
        ("CLOSED", -timedelta(hours=2), timedelta(days=1), "is closed"),
        ("OPEN", -timedelta(hours=2), -timedelta(hours=1), "is closed"),
    ],
)
def test_registration_outside_its_window_is_closed(world, state, opens_in, closes_in, words):
    now = datetime.now(UTC)
    world.race(registrationState=state, registrationOpensAt=now + opens_in, registrationClosesAt=now + closes_in)
    with pytest.raises(RegistrationClosed, match=words):
        world.hold_service.hold("race-1", "ev0")
    assert world.tables.taken("race-1", "ev0") == 0


def test_a_full_shard_is_tried_last_by_the_next_hold(world):
    world.tables.add_event("race-1", "ev0", [1])
    world.race(caps=(1,))
    world.tables.shards[("race-1", "ev0")] = {"SHARD#000": [0, 0], "SHARD#001": [3, 0]}
    race, events = world.catalog.definition("race-1")
    world.catalog.races["race-1"] = (race, [events[0].model_copy(update={"shards": 2})])
    first = world.hold_service.hold("race-1", "ev0")
    second = world.hold_service.hold("race-1", "ev0")
    assert {world.holds.get(h.holdId).shard for h in (first, second)} == {"SHARD#001"}


def test_releasing_gives_the_place_back_and_clears_sold_out(world):
    world.race(caps=(1,))
    created = world.hold_service.hold("race-1", "ev0")
    world.flags.flag(sold_out_flag("race-1", "ev0"), 5)
    world.hold_service.release(created.holdId)
    assert world.holds.get(created.holdId).status == HoldPhase.RELEASED
    assert world.tables.taken("race-1", "ev0") == 0
    assert not world.flags.flags
    world.flags.flag(sold_out_flag("race-1", "ev0"), 5)
    world.hold_service.release(created.holdId)  # a repeat changes nothing
    assert world.flags.flags


def test_releasing_an_unknown_hold_is_not_found(world):
    with pytest.raises(HoldNotFound):
        world.hold_service.release("hold_nope")


def test_a_paid_place_cannot_be_released(world):
    world.race()
    created = world.hold_service.hold("race-1", "ev0")
    world.registration.register(created.holdId, request())
    with pytest.raises(Conflict):
        world.hold_service.release(created.holdId)
    assert world.tables.taken("race-1", "ev0") == 1


def test_a_holds_link_shows_its_event_price_and_progress_on_any_device_and_no_personal_data():
    world = World()
    world.race()
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    fresh = world.hold_service.view(hold_id)
    assert (fresh.status, fresh.detailsSent, fresh.eventName, fresh.priceCents, fresh.registrationId) == (
        "HELD", False, "10K", 2500, None,
    )  # fmt: skip
    assert fresh.ageRule == "ages 5 and over on race day"
    accepted = world.registration.register(hold_id, request(card=None))
    assert accepted.status == "PAYMENT_REQUIRED"
    paying = world.hold_service.view(hold_id)
    assert (paying.status, paying.detailsSent) == ("PAYING", True)
    assert not {"email", "firstName", "lastName", "dateOfBirth"} & set(paying.model_dump())
    # The card step on another device: the same intent, without the runner's details.
    step = world.registration.payment_step(hold_id)
    assert (step.status, step.clientSecret) == ("PAYMENT_REQUIRED", accepted.clientSecret)
    assert len(world.payments.intents) == 1


def test_a_holds_link_after_paying_leads_to_the_registration_and_an_expired_one_says_so():
    world = World()
    world.race()
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    with pytest.raises(PaymentNotStarted):
        world.registration.payment_step(hold_id)
    world.registration.register(hold_id, request())
    paid = world.hold_service.view(hold_id)
    assert (paid.status, paid.registrationId) == ("QUEUED", world.holds.get(hold_id).registrationId)
    assert world.registration.payment_step(hold_id).status == "QUEUED"
    other = world.hold_service.hold("race-1", "ev0").holdId
    later = world.holds.get(other).expiresAt + timedelta(seconds=1)
    assert world.hold_service.view(other, now=later).status == "EXPIRED"
    with pytest.raises(HoldExpired):
        world.registration.payment_step(other, now=later)
