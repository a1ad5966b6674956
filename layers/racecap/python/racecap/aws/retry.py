"""Retries for what the SDK does not retry itself.

botocore already backs off on throttling. A transaction cancelled with
``TransactionConflict`` (two transactions touching one item at the same moment) is not
retried by the SDK, and DynamoDB Local never produces one — tests inject them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

from racecap import deadline
from racecap.aws.items import error_code
from racecap.errors import Busy
from racecap.observability import metrics

T = TypeVar("T")


THROTTLING = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "LimitExceededException",
    }
)


def cancellation_codes(exc: Exception) -> list[str]:
    reasons = getattr(exc, "response", {}).get("CancellationReasons") or []
    return [r.get("Code", "None") for r in reasons]


def is_transaction_conflict(exc: Exception) -> bool:
    code = error_code(exc)
    if code == "TransactionConflictException":
        return True
    return code == "TransactionCanceledException" and "TransactionConflict" in cancellation_codes(exc)


def is_throttled(exc: Exception) -> bool:
    code = error_code(exc)
    if code in THROTTLING:
        return True
    return code == "TransactionCanceledException" and any(
        c in ("ThrottlingError", "ProvisionedThroughputExceeded") for c in cancellation_codes(exc)
    )


def retry_contention(fn: Callable[[], T], *, attempts: int = 10, base_s: float = 0.01, cap_s: float = 0.5) -> T:
    """Run ``fn``, retrying transaction conflicts and throttling with full-jitter backoff.

    Exhausted retries become ``Busy`` (HTTP 429 + Retry-After): the runner's
    page backs off instead of hammering a table that is already saturated. A backoff that
    does not fit in the invocation's time budget is not slept: ``deadline.BudgetSpent``
    (503 + Retry-After) ends the request instead.
    """
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            conflict, throttled = is_transaction_conflict(exc), is_throttled(exc)
            if not (conflict or throttled):
                raise
            metrics.add_metric(name="TransactionConflict" if conflict else "Throttled", unit="Count", value=1)
            if attempt == attempts - 1:
                # Still contended after ~2 s of backoff: tell the client to come back,
                # rather than fail with a 500. Nothing was written.
                raise Busy("We're very busy right now; please retry in a moment.", retry_after=2) from exc
            deadline.sleep_ours(random.uniform(0, min(cap_s, base_s * 2**attempt)), "contended transaction")
    raise AssertionError("unreachable")
