"""The opening second by second (issue 42): what the handlers count (racecap.pulse) is what a
director checks afterwards — Σ confirmed per event is the stats' confirmed, Σ holds is the holds
the API granted, Σ sold-out is its refusals, Σ declines is the stand-in's failed charges — and
the durable copy, the CSV and the gaps say the same, never a zero for a lost second."""

from __future__ import annotations

import csv
import io
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from local.stack import LocalStack
from tools.burst.pulse_check import failed_charges

from .admin import DirectorSession, wait_until
from .conftest import api_session
from .flows import concurrently, hold, register, runner, wait_confirmed

pytestmark = pytest.mark.integration


def _sums(view: dict[str, Any]) -> Counter[tuple[str, str]]:
    sums: Counter[tuple[str, str]] = Counter()
    for c in view["counts"]:
        sums[(c["eventId"], c["name"])] += c["n"]
    return sums


@pytest.fixture(scope="module")
def opening(stack: LocalStack) -> Iterator[dict[str, Any]]:
    """A race of two events (40 and 20 places) opened to 30 + 26 runners at once: 30 and 20
    register (two of the first event's cards declined first, then paid with a good one), 6 find
    the second sold out."""
    kim, api = DirectorSession(stack, "kim-pulse"), api_session(stack)
    race = kim.create_race((40, 20))
    rid = race["raceId"]
    big, small = (e["eventId"] for e in race["events"])
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    start = int(time.time()) - 1

    def one(args: tuple[str, int]) -> tuple[str, int, str | None]:
        event_id, i = args
        h = hold(api, rid, event_id)
        if h.status_code != 201:
            return event_id, h.status_code, None
        hold_id = h.json()["holdId"]
        body = runner()
        if event_id == big and i < 2:  # a declined card first: the place stays held
            bad = register(api, hold_id, body | {"paymentMethod": "pm_card_chargeDeclined"})
            assert bad.status_code == 402, bad.text
        r = register(api, hold_id, body)
        assert r.status_code == 202, r.text
        return event_id, 201, r.json()["registrationId"]

    jobs = [(big, i) for i in range(30)] + [(small, i) for i in range(26)]
    results = concurrently(one, jobs, workers=10)  # the session pool's size
    regs = [reg for _, _, reg in results if reg]
    wait_confirmed(api, regs, timeout=120)
    held = Counter(e for e, status, _ in results if status == 201)
    refused = Counter(e for e, status, _ in results if status == 409)
    yield {
        "kim": kim,
        "raceId": rid,
        "events": (big, small),
        "start": start,
        "held": held,
        "refused": refused,
        "declined": failed_charges(stack, rid),
    }
    kim.close()
    api.close()


def _pulse(kim: Any, rid: str, start: int, path: str = "pulse", **params: Any) -> requests.Response:
    resp = kim.get(f"/api/admin/races/{rid}/{path}", params={"start": start, **params})
    assert resp.status_code == 200, resp.text
    return resp


def test_given_an_opening_when_the_director_reads_its_seconds_then_each_sum_is_what_the_director_checks(
    opening: dict[str, Any],
) -> None:
    kim, rid, start = opening["kim"], opening["raceId"], opening["start"]
    big, small = opening["events"]
    stats = kim.get(f"/api/admin/races/{rid}/stats").json()
    confirmed = {e["eventId"]: e["confirmed"] for e in stats["events"]}
    assert confirmed == {big: 30, small: 20}

    def settled() -> dict[str, Any] | None:
        view = _pulse(kim, rid, start).json()
        return view if _sums(view)[(small, "confirmed")] + _sums(view)[(big, "confirmed")] == 50 else None

    view = wait_until(settled, timeout=10)  # within 10 s of the writer's last commit
    sums = _sums(view)
    for event_id in (big, small):
        assert sums[(event_id, "confirmed")] == confirmed[event_id]
        assert sums[(event_id, "holds")] == opening["held"][event_id]
        assert sums[(event_id, "queued")] == confirmed[event_id]  # every one paid
        assert sums[(event_id, "soldOut")] == opening["refused"][event_id]
    assert opening["refused"][small] == 6 and sums[(big, "soldOut")] == 0
    assert sum(n for (_, name), n in sums.items() if name == "declined") == opening["declined"] == 2
    assert view["gaps"] == []
    assert view["timeZone"] and [e["cap"] for e in view["events"]] == [40, 20]
    seconds = [c["t"] for c in view["counts"]]
    assert seconds == sorted(seconds) and all(start <= t < view["end"] for t in seconds)


def test_given_the_csv_when_summed_then_it_equals_the_series(opening: dict[str, Any]) -> None:
    kim, rid, start = opening["kim"], opening["raceId"], opening["start"]
    view = _pulse(kim, rid, start).json()
    resp = _pulse(kim, rid, start, "pulse/csv", end=view["end"])
    assert resp.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(resp.text)))
    from_csv: Counter[tuple[str, str]] = Counter()
    for row in rows:
        from_csv[(row["eventId"], row["count"])] += int(row["n"])
    assert from_csv == _sums(view)
    # Each second in the race's zone, with its UTC instant beside it.
    assert all(row["time"] and row["utc"].endswith("+00:00") for row in rows)


def test_given_bad_spans_when_asked_then_400_and_no_span_the_last_ten_minutes(opening: dict[str, Any]) -> None:
    kim, rid = opening["kim"], opening["raceId"]
    recent = kim.get(f"/api/admin/races/{rid}/pulse").json()
    assert recent["end"] - recent["start"] == 600
    for params in ({"start": -1}, {"start": "soon"}, {"start": 10, "end": -5}):
        resp = kim.get(f"/api/admin/races/{rid}/pulse", params=params)
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"] == "VALIDATION_ERROR"


def test_given_the_minutes_copied_when_redis_loses_them_then_the_copy_replays_them_and_lost_ones_are_gaps(
    opening: dict[str, Any], backend: Any, in_process_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from racecap.stats.wiring import pulse_series

    kim, rid, start = opening["kim"], opening["raceId"], opening["start"]
    before = _pulse(kim, rid, start).json()
    series = pulse_series()
    # The sweeper's copy, run as if three minutes had passed (a minute is copied at two minutes old).
    later = time.time() + 180
    monkeypatch.setattr(series, "_now", lambda: later)
    assert series.copy()["copied"] >= 1
    # Redis restarts empty: this race's minutes, the set of minutes to copy and its start are gone.
    for key in backend.redis.scan_iter(f"pulse:{rid}:*"):
        backend.redis.delete(key)
    backend.redis.delete("pulse:since")
    replay = _pulse(kim, rid, start, end=before["end"]).json()
    assert _sums(replay) == _sums(before) and replay["gaps"] == []

    # Counts flushed after the copy and lost with Redis before the next: that minute is a gap.
    lost_minute = int(later) // 60 - 1
    backend.redis.hincrby(f"pulse:{rid}:{lost_minute}", f"{lost_minute * 60}|-|throttled", 3)
    backend.redis.delete(f"pulse:{rid}:{lost_minute}")
    backend.redis.set("pulse:since", lost_minute + 2)
    monkeypatch.setattr(series, "_now", lambda: later + 180)
    series.copy()
    monkeypatch.setattr(series, "_now", lambda: later + 181)
    gaps = series.view(_race(backend, rid), [], lost_minute * 60, (lost_minute + 1) * 60).gaps
    assert [(g.start, g.end) for g in gaps] == [(lost_minute * 60, (lost_minute + 1) * 60)]


def _race(backend: Any, race_id: str) -> Any:
    race, _ = backend.store().get_race(race_id)
    return race
