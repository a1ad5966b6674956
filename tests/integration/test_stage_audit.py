"""``tools.audit --stage`` against the local stack: the very code that audits a deployed
stage (names from a function's configuration, the provider's records through its SDK, the
email sender's delivery log), clean after real registrations and failing on each planted
violation."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
import requests
import stripe
from racecap.aws.items import to_item
from racecap.emails.store import DynamoDeliveryLog

import blueprint
from local.stack import LocalStack
from tools.audit import AuditReport, audit_stage
from tools.stage import discover

from .flows import hold_and_register, runner, wait_confirmed

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def stage(stack: LocalStack) -> Iterator[boto3.session.Session]:
    """A plain session with the standard endpoint variables, as an operator's shell has
    credentials: nothing in the audit is told it is local."""
    from aws_lambda_powertools.utilities import parameters

    # The secret is read through Powertools' process-wide provider, which keeps the client (and
    # endpoint) of whichever stack used it first in this process: one that may have stopped.
    parameters.clear_caches()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in stack.aws_env().items():
            mp.setenv(key, value)
        yield boto3.session.Session()
    parameters.clear_caches()


def _audit(session: Any, race_id: str) -> AuditReport:
    (report,) = audit_stage(session, blueprint.AUDIT_FUNCTION, [race_id])
    return report


def _audit_until_clean(session: Any, race_id: str, timeout: float = 90) -> AuditReport:
    deadline = time.monotonic() + timeout  # the last confirmation email may still be on its way
    while not (report := _audit(session, race_id)).ok and time.monotonic() < deadline:
        time.sleep(1)
    return report


def test_the_stage_is_found_from_a_functions_configuration(stack: LocalStack, stage: Any) -> None:
    found = discover(stage.client("lambda"), stage.client("sqs"), blueprint.AUDIT_FUNCTION)
    assert found.tables["Registrations"] == stack.resolve(blueprint.TableName("Registrations"))
    assert found.queue_urls == stack.queue_urls
    assert found.payments_api_base == stack.stripe_url
    assert found.secrets["PaymentProvider"] == stack.resolve(blueprint.SecretId("PaymentProvider"))


def test_the_stage_audit_is_clean_after_real_registrations_and_fails_on_each_planted_violation(
    stack: LocalStack, backend: Any, stage: Any, api: requests.Session
) -> None:
    race_id = backend.create_race([5])
    _, events = backend.store().get_race(race_id)
    rids = [hold_and_register(api, race_id, events[0].eventId, runner())[1] for _ in range(2)]
    wait_confirmed(api, rids)
    report = _audit_until_clean(stage, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.emails_sent) == (2, 2)

    table = backend.table("Registrations")
    log = DynamoDeliveryLog(backend.dynamodb, table)
    (sent,) = log.sent(rids[0], "confirmation")

    # A second confirmation email for one registration (what a lost dedup record would cause).
    log.record(rids[0], "confirmation", sent["dedupKey"], f"planted-{uuid.uuid4().hex}", datetime.now(UTC))
    report = _audit(stage, race_id)
    assert "1 registrations got more than one confirmation email" in report.violations, report.summary()
    for item in log.sent(rids[0], "confirmation"):
        if item["sk"] != sent["sk"]:
            backend.dynamodb.delete_item(TableName=table, Key=to_item({"pk": item["pk"], "sk": item["sk"]}))
    assert _audit(stage, race_id).ok

    # A confirmed registration whose email never went out.
    (other,) = log.sent(rids[1], "confirmation")
    backend.dynamodb.delete_item(TableName=table, Key=to_item({"pk": other["pk"], "sk": other["sk"]}))
    report = _audit(stage, race_id)
    assert "1 confirmed registrations have no confirmation email" in report.violations, report.summary()
    backend.dynamodb.put_item(TableName=table, Item=to_item(other))
    assert _audit(stage, race_id).ok

    # The provider took money for a registration that does not exist; refunded, it is fine.
    keys = stripe_keys(stage)
    client = stripe.StripeClient(keys, base_addresses={"api": stack.stripe_url})
    nobody = f"reg_nobody{uuid.uuid4().hex[:8]}"
    planted_key = uuid.uuid4().hex
    intent = _waiting_out_429s(
        lambda: client.v1.payment_intents.create(
            params={
                "amount": 2500,
                "currency": "usd",
                "payment_method_types": ["card"],
                "payment_method": "pm_card_visa",
                "confirm": True,
                "metadata": {"raceId": race_id, "registrationId": nobody},
            },
            options={"idempotency_key": planted_key},
        )
    )
    assert intent.status == "succeeded"
    report = _audit(stage, race_id)
    assert f"registration {nobody} was charged but is not confirmed" in report.violations, report.summary()
    refund_key = uuid.uuid4().hex
    _waiting_out_429s(
        lambda: client.v1.refunds.create(params={"payment_intent": intent.id}, options={"idempotency_key": refund_key})
    )
    report = _audit(stage, race_id)
    assert report.ok and report.refunds == 1, report.summary()


def stripe_keys(session: Any) -> str:
    from racecap.payments.stripe_provider import keys_from_secret

    stage = discover(session.client("lambda"), session.client("sqs"), blueprint.AUDIT_FUNCTION)
    return keys_from_secret(stage.secrets["PaymentProvider"])().secret_key


def _waiting_out_429s(call: Any) -> Any:
    """The account's 25 requests/s are shared with the stack's own calls (paced at 24/s), and
    stripe-python does not retry a plain rate-limit 429: back off as Stripe's docs advise (a
    refused request was not applied, so the same idempotency key is safe to send again)."""
    for attempt in range(12):
        try:
            return call()
        except stripe.RateLimitError:
            time.sleep(min(2.0, 0.2 * 2**attempt))
    return call()
