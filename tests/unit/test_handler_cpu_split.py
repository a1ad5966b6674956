"""The bench's split of the handlers' CPU (issue 30, tools/awscalls.py and tools/bench/costs.py):
each environment's first invocation apart from the warm ones, the CPU by route, and the CPU
spent inside the SDKs' calls apart from the rest of the handler."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tools.awscalls import Counter, subtract
from tools.bench.costs import handler_cpu_by_route, per_registration, sdk_cpu
from tools.bench.flow import handlers_cpu

ROUTE = "POST /api/holds/{holdId}/registration"


def _invoke(counter: Counter, function: str, route: str, cpu_s: float, sdk: dict[str, float]) -> None:
    counter.current.function, counter.current.route = function, route
    for kind, seconds in sdk.items():
        counter.record_sdk(kind, seconds)
    counter.current.function = counter.current.route = None
    counter.record_invocation(function, "http", cpu_s * 2, cpu_s, True, route)


def test_given_two_invocations_of_a_function_in_one_environment_then_only_the_first_is_counted_as_its_first(
    tmp_path: Path,
) -> None:
    counter = Counter(tmp_path)
    before = counter.snapshot()
    _invoke(counter, "RegistrationApi", ROUTE, 0.030, {})  # the first: builds its clients
    _invoke(counter, "RegistrationApi", ROUTE, 0.004, {})
    _invoke(counter, "RegistrationApi", ROUTE, 0.006, {})

    row = subtract(counter.snapshot(), {**before, "redis": {}})["invocations"]["RegistrationApi:http"]

    assert row["count"] == 3
    assert row["first_count"] == 1
    assert abs(row["first_cpu_seconds"] - 0.030) < 1e-9


def test_given_sdk_calls_inside_two_routes_then_their_cpu_is_split_by_kind_and_route(tmp_path: Path) -> None:
    counter = Counter(tmp_path)
    before = counter.snapshot()
    _invoke(counter, "RegistrationApi", ROUTE, 0.010, {"aws": 0.003, "provider": 0.002, "redis": 0.0005})
    _invoke(counter, "RegistrationApi", "GET /api/registrations/{registrationId}", 0.002, {"aws": 0.001})
    counter.record_sdk("aws", 1.0)  # a poller's receive, outside any function: not a handler's
    delta = subtract(counter.snapshot(), {**before, "redis": {}})

    inside = sdk_cpu(delta, registrations=1)
    by_route = handler_cpu_by_route(delta, registrations=1)

    assert inside["total"]["aws"] == {
        "calls_per_registration": 2.0,
        "cpu_ms_per_registration": 4.0,
        "mean_cpu_ms_per_call": 2.0,
    }
    assert inside["by_function"]["RegistrationApi"]["provider"]["cpu_ms_per_registration"] == 2.0
    assert inside["total_cpu_ms_per_registration"] == 6.5
    assert by_route[ROUTE] == {
        "invocations_per_registration": 1.0,
        "cpu_ms_per_registration": 10.0,
        "mean_cpu_ms": 10.0,
    }
    assert list(by_route) == [ROUTE, "GET /api/registrations/{registrationId}"]  # the most CPU first


def test_given_the_floors_then_the_handlers_cpu_is_set_against_the_floor_at_the_same_rates(tmp_path: Path) -> None:
    counter = Counter(tmp_path)
    before = counter.snapshot()
    counter.current.function, counter.current.route = "RegistrationApi", ROUTE
    for _ in range(4):  # four GetItems inside the invocation
        counter.record_call("dynamodb", "GetItem", {"requests": 1})
    counter.current.function = counter.current.route = None
    counter.record_invocation("RegistrationApi", "http", 0.02, 0.010, True, ROUTE)
    delta = subtract(counter.snapshot(), {**before, "redis": {}})
    bench = SimpleNamespace(
        results={"floors": {"framework_cpu_ms_per_invocation": 0.1, "aws_call_cpu_ms": 1.0, "load": {"quiet": True}}}
    )

    out = handlers_cpu(bench, delta, per_registration(delta, 1), 1)  # type: ignore[arg-type]

    assert out["floor"]["total_ms"] == 4.1  # 4 calls x 1.0 ms + 1 invocation x 0.1 ms
    assert out["handlers_cpu_ms_per_registration"]["total"] == 10.0
    assert out["handlers_over_floor"] == 2.44
