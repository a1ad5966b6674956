"""The opening's per-second counts (racecap.pulse, racecap.stats.pulse) on stand-ins for Redis
and the copy's table: a count lands in its second whenever it is flushed, nothing is lost while
Redis is down (within a bound), and a minute nobody can vouch for is a gap, never a zero."""

from __future__ import annotations

from typing import Any

import pytest
from racecap import pulse as kernel
from racecap.races.models import Race
from racecap.stats.pulse import PulseSeries, PulseView, as_csv


class FakeRedis:
    """The few commands the counts use, on dicts; ``down`` makes every command fail."""

    def __init__(self) -> None:
        self.hashes: dict[str, dict[str, int]] = {}
        self.sets: dict[str, set[str]] = {}
        self.strings: dict[str, str] = {}
        self.down = False
        self.round_trips = 0
        self.last_commands: list[str] = []

    def pipeline(self, transaction: bool = False) -> Pipe:
        return Pipe(self)

    def _up(self) -> None:
        if self.down:
            raise ConnectionError("redis down")

    def hincrby(self, key: str, field: str, n: int) -> None:
        self._up()
        h = self.hashes.setdefault(key, {})
        h[field] = h.get(field, 0) + n

    def hgetall(self, key: str) -> dict[str, int]:
        self._up()
        return dict(self.hashes.get(key, {}))

    def expire(self, key: str, seconds: int) -> None:
        self._up()

    def sadd(self, key: str, *members: str) -> None:
        self._up()
        self.sets.setdefault(key, set()).update(members)

    def smembers(self, key: str) -> set[str]:
        self._up()
        return set(self.sets.get(key, set()))

    def srem(self, key: str, member: str) -> None:
        self._up()
        self.sets.get(key, set()).discard(member)

    def get(self, key: str) -> str | None:
        self._up()
        return self.strings.get(key)

    def set(self, key: str, value: Any, nx: bool = False) -> None:
        self._up()
        if not (nx and key in self.strings):
            self.strings[key] = str(value)


class Pipe:
    """A pipeline: commands queued, run in one round trip at ``execute``."""

    def __init__(self, redis: FakeRedis) -> None:
        self._redis = redis
        self._ops: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: self._ops.append((name, a, kw))

    def execute(self) -> list[Any]:
        self._redis._up()
        self._redis.round_trips += 1
        self._redis.last_commands = [name for name, _, _ in self._ops]
        return [getattr(self._redis, name)(*a, **kw) for name, a, kw in self._ops]


class FakeCopies:
    def __init__(self) -> None:
        self.items: dict[tuple[str, int], dict[str, int]] = {}
        self.through = 0
        self.gaps: list[tuple[int, int]] = []

    def put_minute(self, race_id: str, minute: int, counts: dict[str, int]) -> None:
        self.items[(race_id, minute)] = dict(counts)

    def minutes(self, race_id: str, first: int, last: int) -> dict[int, dict[str, int]]:
        return {m: c for (r, m), c in self.items.items() if r == race_id and first <= m <= last}

    def state(self) -> tuple[int, list[tuple[int, int]]]:
        return self.through, list(self.gaps)

    def set_state(self, through: int, gaps: list[tuple[int, int]]) -> None:
        self.through, self.gaps = through, list(gaps)


T0 = 1_800_000_000 - 1_800_000_000 % 60  # a minute's first second


def _race() -> Race:
    return Race.model_validate(
        {
            "raceId": "r1",
            "ownerId": "kim",
            "name": "Harbour 10K",
            "raceDate": "2027-05-01",
            "location": "Harbour",
            "timeZone": "Asia/Tokyo",
        }
        | {"registrationOpensAt": "2027-01-01T00:00:00Z", "registrationClosesAt": "2027-02-01T00:00:00Z"}
    )


def _series(redis: FakeRedis, copies: FakeCopies, now: list[float]) -> PulseSeries:
    from racecap.stats.pulse import RedisPulse

    return PulseSeries(RedisPulse(lambda: redis), copies, clock=lambda: now[0])  # type: ignore[arg-type]


def test_given_counts_in_two_seconds_when_flushed_then_one_round_trip_lands_each_in_its_second() -> None:
    redis, now = FakeRedis(), [T0 + 5.2]
    p = kernel.Pulse(lambda: redis, clock=lambda: now[0])  # type: ignore[arg-type, return-value]
    p.count("r1", kernel.HOLDS, "e1")
    p.count("r1", kernel.HOLDS, "e1", n=4)  # a team of four
    now[0] = T0 + 6.9
    p.count("r1", kernel.CONFIRMED, "e1", n=2)
    p.count("", kernel.THROTTLED)  # a 429 on a route naming no race

    assert p.flush() and redis.round_trips == 1
    assert redis.hashes[kernel.minute_key("r1", T0 // 60)] == {f"{T0 + 5}|e1|holds": 5, f"{T0 + 6}|e1|confirmed": 2}
    assert redis.hashes[kernel.minute_key("-", T0 // 60)] == {f"{T0 + 6}|-|throttled": 1}
    assert redis.sets[kernel.MINUTES_SET] == {f"r1:{T0 // 60}", f"-:{T0 // 60}"}
    assert p.flush() and redis.round_trips == 1  # nothing counted since: no round trip
    # Later flushes into a minute this environment announced: one HINCRBY each, nothing else.
    p.count("r1", kernel.CONFIRMED, "e1")
    assert p.flush() and redis.last_commands == ["hincrby"]


def test_given_redis_down_when_flushing_then_counts_wait_within_a_bound_and_land_later_in_their_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redis, now = FakeRedis(), [float(T0)]
    p = kernel.Pulse(lambda: redis, clock=lambda: now[0])  # type: ignore[arg-type, return-value]
    redis.down = True
    p.count("r1", kernel.CONFIRMED, "e1")
    assert not p.flush()
    now[0] = T0 + 1
    p.count("r1", kernel.CONFIRMED, "e1")
    assert not p.flush()  # within the cooldown: Redis is not even tried
    assert sum(p.pending.values()) == 2
    # Past the bound, the oldest seconds go first.
    monkeypatch.setattr(kernel, "MAX_PENDING", 1)
    monkeypatch.setattr(kernel, "COOLDOWN_S", 0.0)
    p._skip_until = 0.0
    assert not p.flush()
    assert list(p.pending) == [(T0 + 1, "r1", "e1", "confirmed")]
    redis.down = False
    assert p.flush()
    assert redis.hashes[kernel.minute_key("r1", T0 // 60)] == {f"{T0 + 1}|e1|confirmed": 1}


def test_given_minutes_in_redis_when_copied_and_redis_loses_them_then_the_copy_answers_and_lost_minutes_are_gaps() -> (
    None
):
    redis, copies, now = FakeRedis(), FakeCopies(), [float(T0 + 10)]
    p = kernel.Pulse(lambda: redis, clock=lambda: now[0])  # type: ignore[arg-type, return-value]
    p.count("r1", kernel.HOLDS, "e1", n=3)
    p.flush()
    series = _series(redis, copies, now)
    live = series.view(_race(), [], T0)
    assert [(c.t, c.name, c.n) for c in live.counts] == [(T0 + 10, "holds", 3)]
    assert live.gaps == [] and live.end == T0 + 11

    now[0] = T0 + 60  # one minute on: still filling (a late flush may add to it)
    assert series.copy()["copied"] == 0
    now[0] = T0 + 120
    assert series.copy()["copied"] == 1 and copies.items[("r1", T0 // 60)] == {f"{T0 + 10}|e1|holds": 3}
    assert redis.sets[kernel.MINUTES_SET] == set()

    redis.hashes.clear()  # Redis restarts empty, at T0 + 5 minutes
    redis.strings.clear()
    now[0] = T0 + 300
    redis.strings["pulse:since"] = str(T0 // 60 + 5)
    series.copy()  # minutes 1 to 4 were in the restarted Redis only: lost
    replay = series.view(_race(), [], T0, T0 + 300)
    assert [(c.t, c.n) for c in replay.counts] == [(T0 + 10, 3)]
    assert [(g.start, g.end) for g in replay.gaps] == [(T0 + 60, T0 + 300)]


def test_given_a_minute_the_copy_cannot_write_when_copying_then_the_others_are_copied_and_it_is_tried_again() -> None:
    redis, copies, now = FakeRedis(), FakeCopies(), [float(T0 + 10)]
    p = kernel.Pulse(lambda: redis, clock=lambda: now[0])  # type: ignore[arg-type, return-value]
    for race_id in ("r1", "r2"):
        p.count(race_id, kernel.HOLDS, "e1")
    p.flush()
    put = copies.put_minute

    def refuse_r1(race_id: str, minute: int, counts: dict[str, int]) -> None:
        if race_id == "r1":
            raise RuntimeError("item too large")
        put(race_id, minute, counts)

    copies.put_minute = refuse_r1  # type: ignore[method-assign]
    now[0] = T0 + 120
    assert _series(redis, copies, now).copy() == {"copied": 1, "failed": 1, "redisDown": 0}
    assert redis.sets[kernel.MINUTES_SET] == {f"r1:{T0 // 60}"}  # still listed for the next run
    copies.put_minute = put  # type: ignore[method-assign]
    assert _series(redis, copies, now).copy()["copied"] == 1 and ("r1", T0 // 60) in copies.items


def test_given_redis_unreadable_when_viewing_then_uncopied_minutes_are_gaps_not_zeros() -> None:
    redis, copies, now = FakeRedis(), FakeCopies(), [float(T0 + 150)]
    copies.through = T0 // 60  # the copy has read the first minute (it had nothing)
    redis.down = True
    view = _series(redis, copies, now).view(_race(), [], T0)
    assert view.counts == [] and [(g.start, g.end) for g in view.gaps] == [(T0 + 60, T0 + 151)]


def test_given_a_view_when_written_as_csv_then_each_second_is_in_the_race_zone_and_utc() -> None:
    view = PulseView.model_validate(
        {"raceId": "r1", "timeZone": "Asia/Tokyo", "start": T0, "end": T0 + 60, "asOf": T0 + 60, "names": []}
        | {"events": [{"eventId": "e1", "name": "10K", "cap": 10}], "gaps": [{"start": T0 + 30, "end": T0 + 40}]}
        | {"counts": [{"t": T0, "eventId": "e1", "name": "holds", "n": 2}]}
    )
    lines = as_csv(view).splitlines()
    assert lines[0] == "time,utc,eventId,event,count,n"
    assert lines[1].endswith(",e1,10K,holds,2") and "+09:00" in lines[1].split(",")[0]
    assert lines[2].endswith(",,,gap,10")
