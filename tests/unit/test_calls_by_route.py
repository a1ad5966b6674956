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
