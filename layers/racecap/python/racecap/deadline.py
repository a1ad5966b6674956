"""Each API invocation's time budget, and where its time went (issue 31).

API Gateway gives up on an integration after 30 s and a runner's browser long before: a
request that spends 20 s asleep in retries is a runner who reloads, or leaves. So every API
invocation gets a budget, ``min(HANDLER_BUDGET_S, the Lambda context's remaining time -
MARGIN_S)``; the SDK's retries (``instrument``) and ours (``aws.retry``) stop when
the next backoff would not fit in what is left, and the runner is answered 503 with
``Retry-After`` (``racecap.http``) while the hold they have keeps their place.

The same per-invocation record counts the time spent asleep: in the SDK's retry backoffs,
in the adaptive mode's client-side rate limiter (when a client uses it) and in our own
retries. The local gateway reads it after each invocation and reports it with the handler's
time (``Server-Timing``), so the burst report shows where a slow answer's time went.

The record is per thread: one invocation runs on one thread at a time, in Lambda's
environments as in the local ones.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

# Well under API Gateway's 30 s, and under what a runner waits before reloading. The
# chaos burst's answers that took longer were retries asleep, not work (docs/faults.md): a
# 503 with Retry-After after 6 s is a better answer than 20 s.
HANDLER_BUDGET_S = 6.0
# Kept from the Lambda context's remaining time: the answer still has to be built,
# logged and flushed (metrics) after the last call.
MARGIN_S = 1.0
# What the runner is told to wait: the dependency that made us give up is throttled or
# restarting; seconds, not minutes.
RETRY_AFTER_S = 2
# botocore's standard and adaptive backoff: a random share of base * 2**(attempt - 1),
# at most 20 s (botocore.retries.standard.ExponentialBackoff).
_SDK_BACKOFF_BASE_S = 1.0  # after a throttle
_SDK_BACKOFF_OTHER_S = 0.05  # after any other retryable error
_SDK_BACKOFF_CAP_S = 20.0


class BudgetSpent(Exception):
    """The invocation's time budget cannot cover another attempt: answer 503 now."""

    def __init__(self, what: str, retry_after: int = RETRY_AFTER_S) -> None:
        super().__init__(f"time budget spent: {what}")
        self.retry_after = retry_after


@dataclass
class Invocation:
    deadline: float = math.inf  # time.monotonic(); inf outside a budgeted invocation
    sdk_sleep_s: float = 0.0  # botocore's retry backoffs
    limiter_wait_s: float = 0.0  # botocore adaptive mode's client-side rate limiter
    own_sleep_s: float = 0.0  # our retries (aws.retry)
    sdk_retries: int = 0

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def clear(self, deadline: float = math.inf) -> None:
        self.deadline = deadline
        self.sdk_sleep_s = self.limiter_wait_s = self.own_sleep_s = 0.0
        self.sdk_retries = 0


_local = threading.local()


def current() -> Invocation:
    inv = getattr(_local, "invocation", None)
    if inv is None:
        inv = _local.invocation = Invocation()
    return inv


def reset() -> Invocation:
    """A fresh record without a budget (a new invocation that is not an API call)."""
    _local.invocation = Invocation()
    return _local.invocation


def budget_for(remaining_ms: int | None, budget_s: float = HANDLER_BUDGET_S, margin_s: float = MARGIN_S) -> float:
    """Seconds this invocation may spend: the budget, cut to the remaining time less the margin."""
    if remaining_ms is None:
        return budget_s
    return max(0.0, min(budget_s, remaining_ms / 1000 - margin_s))


def start(context: Any, budget_s: float = HANDLER_BUDGET_S) -> Invocation:
    """Begin an API invocation: its budget from the Lambda context, its counts from zero.

    The record is cleared in place, not replaced: the local runtime holds it to read the
    counts after the handler returns."""
    getter = getattr(context, "get_remaining_time_in_millis", None)
    remaining_ms = int(getter()) if callable(getter) else None
    inv = current()
    inv.clear(deadline=time.monotonic() + budget_for(remaining_ms, budget_s))
    return inv


def ensure(need_s: float, what: str) -> None:
    """Raise ``BudgetSpent`` unless ``need_s`` more seconds fit in the budget."""
    if current().remaining() < need_s:
        raise BudgetSpent(what)


def sleep_ours(seconds: float, what: str) -> None:
    """Our own retry's backoff: only if it fits, counted."""
    ensure(seconds, what)
    time.sleep(seconds)
    current().own_sleep_s += seconds


def sdk_worst_backoff(attempts: int, *, throttled: bool = True) -> float:
    """The longest backoff botocore may pick after ``attempts`` attempts."""
    base = _SDK_BACKOFF_BASE_S if throttled else _SDK_BACKOFF_OTHER_S
    return min(_SDK_BACKOFF_CAP_S, base * 2 ** max(0, attempts - 1))


# -- botocore's hooks ----------------------------------------------------------------------------------
class _RetryGuard:
    """Runs on ``needs-retry`` beside botocore's retry handler, with its conditions: an
    attempt botocore would retry, whose worst next backoff does not fit in the budget, ends
    the call here (``BudgetSpent``) instead of sleeping past it. A retry that goes ahead is
    stamped, so the next attempt's ``request-created`` can count the sleep."""

    def __init__(self, max_attempts: int) -> None:
        from botocore.retries import standard

        self.max_attempts = max_attempts
        self._adapter = standard.RetryEventAdapter()
        self._conditions = standard.StandardRetryConditions(max_attempts=max_attempts)
        self._throttling = standard.ThrottlingErrorDetector(self._adapter)

    def __call__(self, **kwargs: Any) -> None:
        attempts = int(kwargs.get("attempts") or 1)
        response = kwargs.get("response")
        ok = response and getattr(response[0], "status_code", 500) < 300
        if attempts >= self.max_attempts or (kwargs.get("caught_exception") is None and ok):
            return None  # the usual case, decided without building botocore's retry context
        context = self._adapter.create_retry_context(**kwargs)
        if not self._conditions.is_retryable(context):
            return None
        name = getattr(kwargs.get("operation"), "name", "call")
        throttled = self._throttling.is_throttling_error_from_context(context)
        if current().remaining() < sdk_worst_backoff(attempts, throttled=throttled):
            raise BudgetSpent(f"{name} failed after {attempts} attempt(s), no time for another")
        context = (kwargs.get("request_dict") or {}).get("context")
        if isinstance(context, dict):
            context["racecap_retry_at"] = time.monotonic()
        return None


def _on_request_created(request: Any = None, **_: Any) -> None:
    context = getattr(request, "context", None)
    if not isinstance(context, dict):
        return
    decided = context.pop("racecap_retry_at", None)
    if decided is not None:
        inv = current()
        inv.sdk_sleep_s += time.monotonic() - decided
        inv.sdk_retries += 1


class _TimedLimiter:
    """Wraps the adaptive mode's ``before-send`` rate limiter to count how long it blocks."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        try:
            return self.inner(**kwargs)
        finally:
            current().limiter_wait_s += time.monotonic() - t0


def instrument(client: Any, *, max_attempts: int, adaptive: bool) -> Any:
    """Hook a botocore client to the budget and the sleep counters.

    ``adaptive``: the client was created in ``standard`` mode and gets the adaptive rate
    limiter here, registered by botocore's own function, with its ``before-send`` hook
    wrapped in a timer (botocore registers it without a handle to wrap otherwise).
    """
    events = client.meta.events
    events.register_first("needs-retry", _RetryGuard(max_attempts))
    events.register_first("request-created", _on_request_created)
    if adaptive:
        from botocore.retries import adaptive as botocore_adaptive

        limiter = botocore_adaptive.register_retry_handler(client)
        events.unregister("before-send", limiter.on_sending_request)
        events.register("before-send", _TimedLimiter(limiter.on_sending_request))
    return client
