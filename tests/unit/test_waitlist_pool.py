"""Every path that frees a place feeds the waitlist's line first (issue 40, slice 2), on in-memory
stores: a released, expired or abandoned hold (a team's several places), a cancellation, a raised
cap. With runners waiting the place goes to the line's pool and stays taken on its shard (the
event stays sold out); with nobody waiting, or no waitlist, it goes back to the public as before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.holds.models import HoldPhase
from racecap.places.returns import pool_attr
from racecap.races.catalog import sold_out_flag
from racecap.races.models import WaitlistSettings
from racecap.setup.models import EventPatch

from tests.fakes.catalog import open_race
from tests.unit.admin_world import DANA, AdminWorld, take
from tests.unit.core_world import DIRECTOR, World, request

LATER = datetime.now(UTC) + timedelta(minutes=30)
EV = ("race-1", "ev0")


@pytest.fixture
def world() -> World:
    return World()


def _race(world: World, cap: int = 2, *, waitlist: bool = True, team: bool = False) -> None:
    race, events = open_race("race-1", caps=(cap,))
    update: dict[str, object] = {"waitlist": WaitlistSettings(enabled=waitlist)}
    if team:
        update |= {"teamMinSize": 2, "teamMaxSize": 4}
    world.catalog.add(race, [events[0].model_copy(update=update)])


def _waiting(world: World, n: int, pool: int = 0) -> None:
    """``n`` confirmed runners in line (what ``waitlist.store.confirm`` counts)."""
    world.tables.lines[EV].update(waiting=n, pool=pool)


def _sold_out(world: World) -> list[str]:
    holds = [world.hold_service.hold(*EV).holdId for _ in range(2)]
    world.flags.flag(sold_out_flag(*EV), 60)
    return holds


def _confirmed(world: World) -> str:
    accepted = world.registration.register(world.hold_service.hold(*EV).holdId, request())
    world.write_queued()
    return accepted.registrationId


def test_without_a_waitlist_a_released_place_goes_back_as_before_and_the_line_is_never_read(world):
    _race(world, waitlist=False)
    first, _ = _sold_out(world)
    transactions = world.tables.transactions
    world.hold_service.release(first)
    assert world.tables.taken(*EV) == 1
    assert sold_out_flag(*EV) not in world.flags.flags
    assert world.tables.transactions == transactions + 1
    assert EV not in world.tables.lines  # no read of the line, no write to it


def test_a_released_place_goes_to_the_pool_while_runners_wait_and_the_event_stays_sold_out(world):
    _race(world)
    first, _ = _sold_out(world)
    _waiting(world, 2)
    world.hold_service.release(first)
    assert world.holds.get(first).status == HoldPhase.RELEASED
    assert world.tables.taken(*EV) == 2  # still taken on its shard: no public hold can have it
    assert world.tables.lines[EV]["pool"] == 1 and world.tables.lines[EV][pool_attr("SHARD#000")] == 1
    assert sold_out_flag(*EV) in world.flags.flags


def test_with_every_waiting_runner_covered_the_place_goes_to_the_public(world):
    _race(world)
    first, _ = _sold_out(world)
    _waiting(world, 1, pool=1)
    world.hold_service.release(first)
    assert world.tables.taken(*EV) == 1 and world.tables.lines[EV]["pool"] == 1
    assert sold_out_flag(*EV) not in world.flags.flags


def test_a_closed_line_takes_no_place(world):
    _race(world)
    first, _ = _sold_out(world)
    _waiting(world, 3)
    world.tables.lines[EV]["closed"] = 1
    world.hold_service.release(first)
    assert world.tables.taken(*EV) == 1 and world.tables.lines[EV]["pool"] == 0


def test_an_expired_hold_and_an_abandoned_free_entry_feed_the_line_too(world):
    _race(world)
    first, _ = _sold_out(world)
    _waiting(world, 5)
    assert world.sweeper.sweep(LATER)["released"] == 2
    assert world.tables.taken(*EV) == 2 and world.tables.lines[EV]["pool"] == 2
    assert sold_out_flag(*EV) in world.flags.flags
    assert world.holds.get(first).status == HoldPhase.EXPIRED


def test_a_runner_confirming_between_the_read_and_the_write_gets_the_place(world, monkeypatch):
    _race(world)
    first, _ = _sold_out(world)
    _waiting(world, 0)
    real = world.tables.give_back

    def someone_confirms_after_the_read(*args, **kwargs):
        built = real(*args, **kwargs)
        if world.tables.lines[EV]["waiting"] == 0:
            world.tables.lines[EV]["waiting"] = 1
        return built

    monkeypatch.setattr(world.tables, "give_back", someone_confirms_after_the_read)
    world.hold_service.release(first)
    assert world.tables.lines[EV]["pool"] == 1 and world.tables.taken(*EV) == 2


def test_a_teams_hold_frees_all_its_places_to_the_pool_in_one_write(world):
    _race(world, cap=4, team=True)
    team = world.hold_service.hold_team(*EV, 3).holdId
    _waiting(world, 1)
    world.hold_service.release(team)
    # All three join the pool (one LINE write); the offer batch gives back what nobody waits for.
    assert world.tables.lines[EV]["pool"] == 3 and world.tables.taken(*EV) == 3


def test_a_cancellation_feeds_the_line_and_leaves_the_race_page_sold_out(world):
    _race(world, cap=1)
    rid = _confirmed(world)
    _waiting(world, 1)
    race = world.catalog.definition("race-1")[0]
    assert world.cancellations.cancel(DIRECTOR, race, rid).status == "CANCELLED"
    assert world.tables.taken(*EV) == 1 and world.tables.lines[EV]["pool"] == 1
    assert world.catalog.came_back == []  # the availability and the flag stay sold out


def test_a_cancellation_with_nobody_waiting_gives_the_place_to_the_public(world):
    _race(world, cap=1)
    rid = _confirmed(world)
    race = world.catalog.definition("race-1")[0]
    world.cancellations.cancel(DIRECTOR, race, rid)
    assert world.tables.taken(*EV) == 0 and world.catalog.came_back == [EV]


# -- a raised cap ------------------------------------------------------------------------------------
@pytest.fixture
def w() -> AdminWorld:
    return AdminWorld()


def _waitlisted_full(w: AdminWorld, cap: int) -> tuple[str, str]:
    race = w.create(cap, open_now=True)
    event_id = w.admin.get(DANA, race.raceId).events[0].eventId
    w.admin.update_event(DANA, race.raceId, event_id, EventPatch.model_validate({"waitlist": {"enabled": True}}))
    take(w, race.raceId, event_id, cap)
    w.cache.flag(sold_out_flag(race.raceId, event_id), 60)
    return race.raceId, event_id


def test_a_raise_with_a_line_turns_as_many_places_as_wait_into_pool_places(w):
    race_id, event_id = _waitlisted_full(w, 20)
    w.tables.lines[(race_id, event_id)].update(waiting=2)
    (event,) = w.admin.update_event(DANA, race_id, event_id, EventPatch(cap=23)).events
    assert w.tables.lines[(race_id, event_id)]["pool"] == 2
    assert (event.cap, event.taken, event.placesLeft) == (23, 22, 1)  # one place to the public
    assert all(s.taken <= s.cap for s in w.inventory.usage(race_id, event_id).shards)
    assert not w.cache.has_flag(sold_out_flag(race_id, event_id))


def test_a_raise_no_larger_than_the_line_stays_sold_out(w):
    race_id, event_id = _waitlisted_full(w, 20)
    w.tables.lines[(race_id, event_id)].update(waiting=5)
    (event,) = w.admin.update_event(DANA, race_id, event_id, EventPatch(cap=22)).events
    assert w.tables.lines[(race_id, event_id)]["pool"] == 2
    assert (event.cap, event.taken, event.placesLeft) == (22, 22, 0)
    assert w.cache.has_flag(sold_out_flag(race_id, event_id))
