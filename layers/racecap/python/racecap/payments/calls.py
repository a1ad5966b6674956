"""One call to the payment provider, its failures in the runner's terms."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, TypeVar

from racecap.errors import Busy, PaymentDeclined
from racecap.observability import logger, metrics
from racecap.payments.port import (
    IntentStatus,
    PaymentIntent,
    PaymentProvider,
    PaymentRateLimited,
    PaymentRejected,
    PaymentUnavailable,
)
from racecap.pulse import NO_EVENT, NO_RACE, PROVIDER_BUSY, pulse

T = TypeVar("T")


def provider_call(call: Callable[[], T], hold_id: str, race_id: str = NO_RACE, event_id: str = NO_EVENT) -> T:
    """One call to the provider, its failures in the runner's terms: the place stays held.
    ``race_id`` and ``event_id``: whose opening a rate limit counts against (``racecap.pulse``)."""
    try:
        return call()
    except PaymentRateLimited as exc:
        logger.warning("payment provider rate limited", extra={"holdId": hold_id})
        metrics.add_metric(name="PaymentRateLimited", unit="Count", value=1)
        pulse.count(race_id, PROVIDER_BUSY, event_id)
        raise Busy(
            "The payment service is busy; your place is kept. Please retry in a moment.",
            retry_after=max(1, math.ceil(exc.retry_after)),
        ) from exc
    except PaymentUnavailable as exc:
        # Unknown outcome: never assume declined. The retry, the webhook or the sweeper
        # will find out from the provider.
        logger.warning("payment provider unavailable", extra={"holdId": hold_id, "error": str(exc)})
        metrics.add_metric(name="PaymentUnavailable", unit="Count", value=1)
        raise Busy("The payment service is not answering; please retry in a moment.", retry_after=5) from exc


# What a payment beyond the entry (a transfer's fee, a switch's upgrade) tells the page while its
# intent has not succeeded: pay in the browser, finish 3-D Secure there, or wait for the bank.
Waiting = Literal["PAYMENT_REQUIRED", "REQUIRES_ACTION", "PROCESSING"]


def waiting(intent: PaymentIntent) -> Waiting:
    if intent.status == IntentStatus.REQUIRES_ACTION:
        return "REQUIRES_ACTION"
    return "PROCESSING" if intent.status == IntentStatus.PROCESSING else "PAYMENT_REQUIRED"


def confirm_on_server(
    payments: PaymentProvider, intent: PaymentIntent, payment_method: str, hold_id: str, declined: str
) -> PaymentIntent:
    """A card sent with the request, confirmed here (one key per intent and card: a retry
    replays it); a refused card is ``PaymentDeclined`` saying ``declined``."""
    try:
        return provider_call(
            lambda: payments.confirm_intent(
                intent.id, payment_method=payment_method, idempotency_key=f"confirm-{intent.id}-{payment_method}"
            ),
            hold_id,
        )
    except PaymentRejected as exc:
        raise PaymentDeclined(declined) from exc
