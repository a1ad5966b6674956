"""The pre-warm's rules: how many warm environments a race's burst needs, that the floor
goes up before the opening with a scheduled return to zero, comes down after it, and is
never moved by a replaced execution or under another opening that is still on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from racecap.races.models import Event, Race
from racecap.window.models import WindowRecord
from racecap.window.prewarm import COOL_DOWN_PREFIX, WarmStarts, environments_for
from racecap.window.service import RaceGone

from tests.fakes.catalog import open_race

NOW = datetime(2026, 11, 23, 18, 0, tzinfo=UTC)
MAX = 200


class FakeScaler:
    """Application Auto Scaling's one target, in memory: its floor and one-time actions."""

    def __init__(self, floor: int = 0) -> None:
        self.floor_now = floor
        self.actions: dict[str, tuple[datetime, int]] = {}
        self.floor_moves: list[int] = []

    def floor(self) -> int:
        return self.floor_now

    def set_floor(self, environments: int) -> None:
        self.floor_now = environments
        self.floor_moves.append(environments)

    def schedule_floor(self, name: str, at: datetime, environments: int) -> None:
        self.actions[name] = (at, environments)

    def scheduled(self, prefix: str) -> dict[str, datetime]:
        return {n: at for n, (at, _) in self.actions.items() if n.startswith(prefix)}

    def cancel(self, name: str) -> None:
        self.actions.pop(name, None)


class Races:
    def __init__(self, *races: tuple[Race, list[Event]]) -> None:
        self.races = {r.raceId: (r, e) for r, e in races}

    def get_race(self, race_id: str) -> tuple[Race, list[Event]] | None:
        return self.races.get(race_id)


class Windows:
    def __init__(self, **current: str) -> None:
        self.current = current

    def get(self, race_id: str) -> WindowRecord | None:
        if race_id not in self.current:
            return None
        return WindowRecord(raceId=race_id, startedAt=NOW.isoformat(), startedBy="d", execution=self.current[race_id])


def _warm(scaler: FakeScaler, *races: tuple[Race, list[Event]], **current: str) -> WarmStarts:
    return WarmStarts(Races(*races), Windows(**current), scaler, MAX, now=lambda: NOW)


def test_the_estimate_follows_the_burst_within_one_and_the_maximum() -> None:
    # 5,000 runners in a minute: 83/s x 4 calls x 0.25 s x 1.5 headroom = 125 busy at once.
    assert environments_for(5_000, MAX) == 125
    assert environments_for(50_000, MAX) == MAX
    assert environments_for(10, MAX) == 1
    assert environments_for(0, MAX) == 1


def test_the_floor_rises_for_the_race_and_its_return_to_zero_is_scheduled() -> None:
    scaler = FakeScaler()
    race = open_race("r1", caps=(3_000, 2_000))
    cool = NOW + timedelta(minutes=40)
    out = _warm(scaler, race, r1="r1-w1").run("prewarm", "r1", "r1-w1", cool.isoformat())
    assert out["floor"] == scaler.floor_now == 125
    assert scaler.actions == {f"{COOL_DOWN_PREFIX}r1": (cool, 0)}


def test_the_floor_never_drops_below_what_another_opening_raised() -> None:
    scaler = FakeScaler(floor=180)
    race = open_race("r1", caps=(100,))
    _warm(scaler, race, r1="r1-w1").run("prewarm", "r1", "r1-w1", (NOW + timedelta(minutes=30)).isoformat())
    assert scaler.floor_now == 180 and scaler.floor_moves == []


def test_the_cool_down_lowers_the_floor_and_cancels_its_backstop_and_repeats_harmlessly() -> None:
    scaler = FakeScaler()
    race = open_race("r1", caps=(5_000,))
    warm = _warm(scaler, race, r1="r1-w1")
    warm.run("prewarm", "r1", "r1-w1", (NOW + timedelta(minutes=30)).isoformat())
    assert warm.run("cooldown", "r1", "r1-w1", None)["floor"] == 0
    assert scaler.floor_now == 0 and scaler.actions == {}
    warm.run("cooldown", "r1", "r1-w1", None)
    assert scaler.floor_moves == [125, 0]


def test_the_cool_down_keeps_the_floor_while_another_opening_is_still_on() -> None:
    scaler = FakeScaler()
    one, two = open_race("r1", caps=(5_000,)), open_race("r2", caps=(2_000,))
    warm = _warm(scaler, one, two, r1="r1-w1", r2="r2-w1")
    warm.run("prewarm", "r1", "r1-w1", (NOW + timedelta(minutes=30)).isoformat())
    warm.run("prewarm", "r2", "r2-w1", (NOW + timedelta(minutes=50)).isoformat())
    out = warm.run("cooldown", "r1", "r1-w1", None)
    assert out["keptFor"] == [f"{COOL_DOWN_PREFIX}r2"] and scaler.floor_now == 125
    assert warm.run("cooldown", "r2", "r2-w1", None)["floor"] == 0


def test_a_past_backstop_of_another_race_does_not_keep_the_floor() -> None:
    scaler = FakeScaler(floor=50)
    scaler.actions[f"{COOL_DOWN_PREFIX}old"] = (NOW - timedelta(days=3), 0)  # already ran
    race = open_race("r1", caps=(1_000,))
    assert _warm(scaler, race, r1="r1-w1").run("cooldown", "r1", "r1-w1", None)["floor"] == 0


def test_a_replaced_execution_moves_nothing() -> None:
    scaler = FakeScaler(floor=90)
    race = open_race("r1", caps=(5_000,))
    warm = _warm(scaler, race, r1="r1-w2")
    assert warm.run("cooldown", "r1", "r1-w1", None)["skipped"] == "replaced execution"
    assert warm.run("prewarm", "r1", "r1-w1", NOW.isoformat())["skipped"] == "replaced execution"
    assert scaler.floor_now == 90 and scaler.actions == {}


def test_a_missing_race_is_an_error_the_workflow_catches_and_a_stage_without_target_skips() -> None:
    with pytest.raises(RaceGone):
        _warm(FakeScaler()).run("prewarm", "gone", None, NOW.isoformat())
    none = WarmStarts(Races(), Windows(), None, MAX)
    assert none.run("prewarm", "r1", None, NOW.isoformat())["skipped"] == "no warm-start target"
