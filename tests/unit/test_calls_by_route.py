"""The bench's counted AWS calls, attributed to the API route (or function and event
source) that made them (tools/awscalls.py, tools/bench/costs.calls_by_route)."""

from __future__ import annotations

from pathlib import Path

from tools.awscalls import Counter, subtract
from tools.bench.costs import calls_by_route


def test_given_calls_made_inside_two_routes_and_a_queue_invocation_when_counted_then_each_is_charged_to_its_route(
    tmp_path: Path,
) -> None:
    counter = Counter(tmp_path)
    before = counter.snapshot()
    for route, calls in (
        ("POST /api/holds/{holdId}/registration", ["dynamodb:GetItem", "dynamodb:UpdateItem", "sqs:SendMessage"]),
        ("GET /api/registrations/{registrationId}", ["dynamodb:GetItem", "dynamodb:GetItem"]),
        ("RegistrationWriter:sqs", ["dynamodb:TransactWriteItems"]),
    ):
        counter.current.function, counter.current.route = route.split(":")[0], route
        for call in calls:
            service, op = call.split(":")
            counter.record_call(service, op, {"requests": 1})
    counter.current.route = None
    counter.current.function = None
    counter.record_call("sqs", "ReceiveMessage", {"requests": 1})  # a poller, outside any function
    delta = subtract(counter.snapshot(), {**before, "redis": {}})

    by_route = calls_by_route(delta, registrations=2)

    assert by_route == {
        "POST /api/holds/{holdId}/registration": {
            "dynamodb:GetItem": 0.5,
            "dynamodb:UpdateItem": 0.5,
            "sqs:SendMessage": 0.5,
        },
        "GET /api/registrations/{registrationId}": {"dynamodb:GetItem": 1.0},
        "RegistrationWriter:sqs": {"dynamodb:TransactWriteItems": 0.5},
        "(outside a function)": {"sqs:ReceiveMessage": 0.5},
    }
    assert next(iter(by_route)) == "POST /api/holds/{holdId}/registration"  # the most calls first


def test_given_counted_calls_when_split_by_function_then_each_has_its_calls_writes_units_and_redis() -> None:
    from tools.bench.costs import calls_by_function

    delta = {
        "by_function": {
            "RegistrationApi|dynamodb:TransactWriteItems": {"requests": 4, "wcu_table": 16, "wcu_index": 4},
            "RegistrationApi|dynamodb:GetItem": {"requests": 2, "rcu_table": 1},
            "RegistrationApi|redis:HINCRBY": {"requests": 6},
            "RegistrationApi|redis:PIPELINE": {"requests": 2},
            "AdminApi|dynamodb:Query": {"requests": 3},
        },
        "invocations": {"RegistrationApi:http": {"count": 4}, "AdminApi:http": {"count": 3}},
    }
    rows = calls_by_function(delta, 2)
    assert rows["RegistrationApi"] == {
        "aws_calls": 3.0,
        "dynamodb_write_requests": 2.0,
        "invocations": 2.0,
        "redis_commands": 4.0,
        "wcu": 10.0,
    }
    assert rows["AdminApi"] == {"aws_calls": 1.5, "invocations": 1.5}
