"""A hold is refused only on a fresh look at the race: an environment's view of it is up to a
second old (its version stamp), and a window that opened, or a race published, in that second
must not turn away the runner the opening queue has just admitted."""

from __future__ import annotations

from typing import Any

import pytest
from racecap.errors import RegistrationClosed

from tests.fakes.catalog import open_race
from tests.unit.core_world import World


def _seen_a_second_ago(world: World, stale: Any) -> list[bool]:
    """The catalog answers ``stale`` unless asked for a fresh look; the looks it was asked for."""
    looks: list[bool] = []
    current = world.catalog.for_runners

    def for_runners(race_id: str, *, fresh: bool = False) -> Any:
        looks.append(fresh)
        return current(race_id) if fresh else stale

    world.catalog.for_runners = for_runners  # type: ignore[method-assign]
    return looks


def test_a_window_that_opened_within_the_second_takes_the_hold():
    world = World()
    world.race()
    scheduled, _ = open_race(registrationState="SCHEDULED")
    looks = _seen_a_second_ago(world, (scheduled, world.catalog.for_runners("race-1")[1]))

    held = world.hold_service.hold("race-1", "ev0")

    assert held.holdId and looks == [False, True]


def test_a_race_still_closed_on_the_fresh_look_is_refused():
    world = World()
    world.race(registrationState="CLOSED")
    race, events = world.catalog.for_runners("race-1")
    looks = _seen_a_second_ago(world, (race, events))

    with pytest.raises(RegistrationClosed):
        world.hold_service.hold("race-1", "ev0")
    assert looks == [False, True]
