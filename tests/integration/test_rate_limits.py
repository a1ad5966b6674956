"""Per-address rate limits on the runner API: a retryable 429, and failing open without Redis."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import blueprint

from .runners import Runner

BURST = int(blueprint.param("RunnerRateLimitBurst").default)
RATE = float(blueprint.param("RunnerRateLimitPerSecond").default)


def _hammer(runner: Runner, url: str, n: int, workers: int = 8) -> list[Any]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda _: runner.call("GET", url), range(n)))


def test_given_one_address_over_its_bucket_then_429_with_retry_after_and_others_unaffected(
    api: Any, backend: Any
) -> None:
    race_id = backend.create_race([10])
    bot = Runner(api, device=False)
    started = time.monotonic()
    answers = _hammer(bot, f"/api/races/{race_id}", BURST * 3)
    elapsed = time.monotonic() - started
    limited = [r for r in answers if r.status_code == 429]
    assert limited, "no request was limited"
    assert all(r.status_code in (200, 429) for r in answers)
    for r in limited[:5]:
        assert int(r.headers["Retry-After"]) >= 1
        body = r.json()
        assert body["error"] == "TOO_MANY_REQUESTS" and "retry" in body["message"]
    # At most the bucket, plus what it refilled while the requests were being answered.
    assert sum(r.status_code == 200 for r in answers) <= BURST + RATE * elapsed + 1

    honest = Runner(api, device=False)
    assert honest.call("GET", f"/api/races/{race_id}").status_code == 200


def test_given_one_ipv6_64_over_its_bucket_from_a_new_address_each_time_then_429_and_the_next_64_unaffected(
    api: Any, backend: Any
) -> None:
    race_id = backend.create_race([10])
    network = f"2001:db8:{secrets.randbelow(0xFFFF):x}:{secrets.randbelow(0xFFFE):x}"
    bots = [Runner(api, f"{network}:{secrets.randbelow(0xFFFF):x}::{i + 1:x}", device=False) for i in range(BURST * 3)]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda b: b.call("GET", f"/api/races/{race_id}"), bots))
    elapsed = time.monotonic() - started
    assert all(r.status_code in (200, 429) for r in answers)
    assert sum(r.status_code == 200 for r in answers) <= BURST + RATE * elapsed + 1
    assert any(r.json()["error"] == "TOO_MANY_REQUESTS" for r in answers if r.status_code == 429)

    head, last = network.rsplit(":", 1)
    neighbour = Runner(api, f"{head}:{int(last, 16) + 1:x}::1", device=False)
    assert neighbour.call("GET", f"/api/races/{race_id}").status_code == 200


def test_given_redis_is_down_then_the_api_fails_open(api: Any, backend: Any, stack: Any) -> None:
    race_id = backend.create_race([10])
    bot = Runner(api, device=False)
    log = stack.log_dir / "gateway.log"
    seen = log.read_text().count("RateLimitFailOpen")
    stack.stop_redis()
    try:
        answers = _hammer(bot, f"/api/races/{race_id}", BURST + 10, workers=4)
    finally:
        stack.restart_redis()
    assert [r.status_code for r in answers] == [200] * len(answers)  # more than the bucket, none refused
    assert log.read_text().count("RateLimitFailOpen") > seen  # and the metric says the limiter failed open
