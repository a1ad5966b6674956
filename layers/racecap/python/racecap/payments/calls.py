"""One call to the payment provider, its failures in the runner's terms."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from racecap.errors import Busy
from racecap.observability import logger, metrics
from racecap.payments.port import (
    PaymentRateLimited,
    PaymentUnavailable,
)

T = TypeVar("T")


def provider_call(call: Callable[[], T], hold_id: str) -> T:
    """One call to the provider, its failures in the runner's terms: the place stays held."""
    try:
        return call()
    except PaymentRateLimited as exc:
        logger.warning("payment provider rate limited", extra={"holdId": hold_id})
        metrics.add_metric(name="PaymentRateLimited", unit="Count", value=1)
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
