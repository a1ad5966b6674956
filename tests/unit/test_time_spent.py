"""Where a request's time goes (issue 31): botocore's retry backoffs and the adaptive rate
limiter's waits are counted per invocation (racecap.deadline), the gateway reports them with
the handler's time (Server-Timing), and the chaos burst's report splits slow answers by part."""

from __future__ import annotations

import time
from typing import Any

import botocore.session
import pytest
from botocore.config import Config
from racecap import deadline

from local import faults
from local.runtime import Timing
from tools.burst.chaos import breakdown


def _client(attempts: int, *, adaptive: bool = False) -> Any:
    client = botocore.session.get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the hook below answers every call
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
    )
    return deadline.instrument(client, max_attempts=attempts, adaptive=adaptive)


class Answers:
    """DynamoDB's answers, in order: throttles first, then an empty GetItem result."""

    def __init__(self, throttles: int) -> None:
        self.throttles = throttles
        self.calls = 0

    def __call__(self, **_: Any) -> Any:
        self.calls += 1
        if self.calls <= self.throttles:
            return faults.throttling()
        return _ok()


def _ok() -> Any:
    from botocore.awsrequest import AWSResponse, HTTPHeaders

    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    return AWSResponse("http://stub", 200, headers, faults._Body(b"{}"))


def test_the_sdks_backoff_after_a_throttle_is_counted_as_time_asleep() -> None:
    client = _client(attempts=3)
    answers = Answers(throttles=1)
    client.meta.events.register("before-send.dynamodb", answers)
    record = deadline.reset()

    t0 = time.monotonic()
    client.get_item(TableName="t", Key={"pk": {"S": "a"}})
    elapsed = time.monotonic() - t0

    assert answers.calls == 2
    assert record.sdk_retries == 1
    assert 0 < record.sdk_sleep_s <= elapsed
    assert record.limiter_wait_s == 0.0


def test_a_call_without_a_retry_counts_no_sleep() -> None:
    client = _client(attempts=3)
    client.meta.events.register("before-send.dynamodb", Answers(throttles=0))
    record = deadline.reset()

    client.get_item(TableName="t", Key={"pk": {"S": "a"}})

    assert (record.sdk_retries, record.sdk_sleep_s, record.limiter_wait_s) == (0, 0.0, 0.0)


def test_the_adaptive_rate_limiter_still_limits_and_its_waits_are_counted() -> None:
    client = _client(attempts=8, adaptive=True)
    answers = Answers(throttles=1)
    # Registered after the limiter, as DynamoDB answers after the limiter let a call go.
    client.meta.events.register("before-send.dynamodb", answers)
    record = deadline.reset()

    client.get_item(TableName="t", Key={"pk": {"S": "a"}})
    client.get_item(TableName="t", Key={"pk": {"S": "a"}})

    # After a throttle the limiter is on: calls wait for its tokens, and the wait is counted.
    assert record.sdk_retries == 1
    assert record.limiter_wait_s > 0


def test_the_gateways_server_timing_names_each_part_in_ms() -> None:
    timing = Timing(
        wait_s=0.002,
        handler_s=1.5,
        sdk_sleep_s=1.2,
        limiter_s=0.1,
        own_sleep_s=0.05,
        sdk_retries=2,
        environment=42,
        gc_s=0.004,
    )

    header = timing.server_timing(gateway_s=1.51)

    assert header == (
        "gateway;dur=1510.0, env-wait;dur=2.0, handler;dur=1500.0, sdk-sleep;dur=1200.0, "
        "limiter;dur=100.0, own-sleep;dur=50.0, gc;dur=4.0, sdk-retries;desc=2, env;desc=42"
    )


def _req(ms: float, gateway: float, handler: float, sleep: float) -> dict[str, Any]:
    return {"ms": ms, "timing": {"gateway": gateway, "env-wait": 0.0, "handler": handler, "sdk-sleep": sleep}}


def test_the_report_says_which_part_made_the_slow_answers_slow() -> None:
    reqs = [
        _req(5000, gateway=1000, handler=990, sleep=800),  # 4 s queued before the gateway took it
        _req(3000, gateway=500, handler=490, sleep=400),
        _req(20, gateway=15, handler=10, sleep=0),  # fast: not among the slow
        {"ms": 30, "timing": None},  # no Server-Timing (another host): not counted
    ]

    out = breakdown(reqs, slow_ms=1000)

    assert out["requests"] == 3
    assert out["slow"]["requests"] == 2
    assert out["slow"]["queued_share"] == pytest.approx(6500 / 8000, abs=0.001)
    assert out["slow"]["asleep_share"] == pytest.approx(1200 / 8000, abs=0.001)
    assert out["handler"]["p50_ms"] == 490


def test_an_invocations_time_in_the_garbage_collector_is_its_own() -> None:
    """Server-Timing's gc: the collector's time during this invocation, not before it."""
    import gc

    from local.runtime import _GcClock

    clock = _GcClock.installed()
    assert _GcClock.installed() is clock  # one per process, however many hosts
    before = clock.total
    garbage = [[i] for i in range(200_000)]
    gc.collect()
    del garbage
    assert clock.total > before
