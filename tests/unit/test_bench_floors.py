"""The bench's floors (tools/bench/floors.py, floor_handler.py): the framework's share of
an invocation and the SDK's share of a call, multiplied by what the burst counted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tools.bench import floor_handler
from tools.bench.floors import floor_per_registration


def _post(body: dict[str, Any]) -> dict[str, Any]:
    return floor_handler.handler(floor_handler.sample_event(body), None)


def test_given_the_floor_handler_when_it_gets_a_valid_and_an_invalid_body_then_it_validates_like_racecaps() -> None:
    # The floor is only a floor if it pays for what Racecap's handlers pay for: validation.
    ok = _post({"email": "ada@example.com", "firstName": "Ada"})
    assert ok["statusCode"] == 200
    assert json.loads(ok["body"]) == {"holdId": "hold_1", "email": "ada@example.com"}
    bad = _post({"email": "a", "firstName": ""})
    assert bad["statusCode"] == 422


def test_given_floors_and_counted_rates_when_combined_then_each_share_is_rate_times_unit() -> None:
    floors = {"framework_cpu_ms_per_invocation": 0.25, "aws_call_cpu_ms": 2.0}
    floor = floor_per_registration(floors, invocations=5.2, aws_calls=12.5)
    assert floor is not None
    assert floor["framework_ms"] == pytest.approx(1.3)
    assert floor["aws_sdk_ms"] == pytest.approx(25.0)
    assert floor["total_ms"] == pytest.approx(26.3)


def test_given_no_floors_measured_when_combined_then_there_is_no_floor() -> None:
    assert floor_per_registration({}, invocations=5.0, aws_calls=12.0) is None
    assert floor_per_registration({"error": ["ImportError"]}, invocations=5.0, aws_calls=12.0) is None


def test_a_floor_measured_on_a_busy_machine_is_measured_again_then_marked_unreliable(monkeypatch) -> None:
    from tools.bench import load as load_module
    from tools.bench.floors import floor_per_registration

    loads = iter([3.5, 3.1, 1.2, 0.9])  # busy for the first sample, quiet for the second
    monkeypatch.setattr(load_module, "load_now", lambda: next(loads))
    said: list[str] = []
    calls: list[int] = []
    result, info = load_module.measured_quietly(lambda: calls.append(1) or len(calls), said.append, settle_s=0)
    assert (result, info["quiet"], info["attempts"]) == (2, True, 2) and said

    monkeypatch.setattr(load_module, "load_now", lambda: 4.0)  # never quiet
    _, busy = load_module.measured_quietly(lambda: None, said.append, attempts=2, settle_s=0)
    assert (busy["quiet"], busy["attempts"]) == (False, 2) and "not a floor" in busy["note"]
    floors = {"framework_cpu_ms_per_invocation": 0.1, "aws_call_cpu_ms": 1.0, "load": busy}
    assert floor_per_registration(floors, 6, 13)["reliable"] is False
