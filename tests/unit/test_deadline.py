"""Answers within a deadline (issue 31): each API request has a time budget from the Lambda
context's remaining time; the SDK's retries and ours stop when the next backoff would not
fit, and the runner is answered 503 with Retry-After instead of waiting towards 30 s."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from racecap import clients, deadline
from racecap.aws import retry
from racecap.http import make_resolver

import blueprint
from local import faults
from local.runtime import LambdaContext


class _Remaining:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def get_remaining_time_in_millis(self) -> int:
        return self.ms


@pytest.fixture(autouse=True)
def _fresh_record() -> Iterator[None]:
    deadline.reset()
    yield
    deadline.reset()


@pytest.mark.parametrize(
    ("remaining_ms", "expected_s"),
    [
        (30_000, deadline.HANDLER_BUDGET_S),  # a long timeout: the budget, well under API Gateway's 30 s
        (4_000, 4.0 - deadline.MARGIN_S),  # little time left: what is left, less the margin
        (500, 0.0),  # less than the margin: nothing to spend
        (None, deadline.HANDLER_BUDGET_S),  # no context (a test, a tool): the budget
    ],
)
def test_the_budget_is_the_handler_budget_cut_to_the_remaining_time_less_a_margin(
    remaining_ms: int | None, expected_s: float
) -> None:
    assert deadline.budget_for(remaining_ms) == pytest.approx(expected_s)


def test_an_invocation_starts_its_budget_from_the_lambda_context_and_counts_from_zero() -> None:
    deadline.current().sdk_sleep_s = 3.0  # left over from the environment's previous request

    inv = deadline.start(LambdaContext("RegistrationApi", 512, timeout_s=10))

    assert inv is deadline.current()
    assert inv.sdk_sleep_s == 0.0
    assert deadline.HANDLER_BUDGET_S - 0.1 < inv.remaining() <= deadline.HANDLER_BUDGET_S


def _dynamodb(attempts: int, answer: Any) -> Any:
    client = botocore.session.get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: ``answer`` answers every call
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
    )
    deadline.instrument(client, max_attempts=attempts, adaptive=False)
    client.meta.events.register("before-send.dynamodb", answer)
    return client


def test_sdk_retries_stop_when_the_next_backoff_would_not_fit_in_the_budget() -> None:
    calls: list[float] = []

    def always_throttled(**_: Any) -> Any:
        calls.append(time.monotonic())
        return faults.throttling()

    client = _dynamodb(attempts=8, answer=always_throttled)
    deadline.start(_Remaining(2_500))  # 1.5 s to spend: room for the first backoff (<= 1 s), not the second (<= 2 s)

    t0 = time.monotonic()
    with pytest.raises(deadline.BudgetSpent):
        client.get_item(TableName="t", Key={"pk": {"S": "a"}})

    assert time.monotonic() - t0 < 1.5
    assert len(calls) == 2  # not the 8 attempts the client allows


def test_an_error_the_sdk_does_not_retry_is_the_callers_to_handle_even_with_no_time_left() -> None:
    client = _dynamodb(attempts=3, answer=lambda **_: faults._answer("ConditionalCheckFailedException", "no"))
    deadline.start(_Remaining(0))

    with pytest.raises(ClientError) as caught:
        client.get_item(TableName="t", Key={"pk": {"S": "a"}})

    assert caught.value.response["Error"]["Code"] == "ConditionalCheckFailedException"


def test_our_transaction_retries_stop_at_the_budget_instead_of_sleeping_past_it() -> None:
    attempts: list[int] = []

    def conflicted() -> None:
        attempts.append(1)
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException"},
                "CancellationReasons": [{"Code": "TransactionConflict"}],
            },
            "TransactWriteItems",
        )

    deadline.start(_Remaining(1_000 + 20))  # 20 ms to spend

    t0 = time.monotonic()
    with pytest.raises(deadline.BudgetSpent):
        retry.retry_contention(conflicted, attempts=50, base_s=0.01, cap_s=0.5)

    assert time.monotonic() - t0 < 0.1
    assert 1 <= len(attempts) < 50
    assert deadline.current().own_sleep_s < 0.02


def test_a_spent_budget_is_answered_503_with_retry_after_saying_the_place_is_kept(
    placeholder_env: dict[str, str],
) -> None:
    app = make_resolver()

    @app.get("/slow")
    def slow() -> dict:
        raise deadline.BudgetSpent("TransactWriteItems failed after 2 attempt(s), no time for another")

    event = {
        "version": "2.0", "routeKey": "GET /slow", "rawPath": "/slow", "rawQueryString": "",
        "headers": {blueprint.ORIGIN_VERIFY_HEADER: placeholder_env["ORIGIN_VERIFY_SECRET"]},
        "requestContext": {"http": {"method": "GET", "path": "/slow", "sourceIp": "127.0.0.1"}, "stage": "$default"},
        "isBase64Encoded": False,
    }  # fmt: skip

    got = app.resolve(event, _Remaining(10_000))  # type: ignore[arg-type]

    assert got["statusCode"] == 503
    assert got["headers"]["Retry-After"] == str(deadline.RETRY_AFTER_S)
    body = json.loads(got["body"])
    assert body["error"] == "SERVICE_UNAVAILABLE" and "place you hold is kept" in body["message"]


def test_dynamodb_and_sqs_clients_retry_in_standard_mode_without_the_adaptive_rate_limiter(
    placeholder_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    clients.aws.cache_clear()
    try:
        for service, attempts in (("dynamodb", 3), ("sqs", 4)):
            client = clients.aws(service)
            assert client.meta.config.retries["mode"] == "standard"
            assert client.meta.config.retries["total_max_attempts"] == attempts
            # No rate limiter registered on before-send: nothing holds a call back client-side.
            found = client.meta.events._emitter._handlers.prefix_search(f"before-send.{service}.AnyCall")
            owners = {type(getattr(h, "__self__", h)).__name__ for h in found}
            assert not owners & {"ClientRateLimiter", "_TimedLimiter"}, owners
    finally:
        clients.aws.cache_clear()
