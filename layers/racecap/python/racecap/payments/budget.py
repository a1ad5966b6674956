"""The provider's request budget, shared by every execution environment.

Stripe allows about 100 requests/s per account in live mode and 25 in test mode; past that
it answers 429 to whichever request is unlucky. ``LimitedPaymentProvider`` wraps any
``PaymentProvider`` so that each call first reserves a slot in a limiter shared through
Redis (``racecap.ratelimit.SendRateLimiter``, sized from configuration below the provider's
limit). A slot within ``max_wait_s`` is waited for; a later one is refused at once with
``PaymentRateLimited(retry_after)``, which the API answers with 429 + ``Retry-After`` while
the runner keeps the place. A refused caller takes no slot: when every refusal kept one, an
opening's retries (hundreds of runners, each environment calling at once) pushed every
caller's next slot further out with each refusal, until nobody got one (issue 31). Webhook parsing makes no call
and is not limited.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from racecap.payments.port import PaymentProvider, PaymentRateLimited, ProviderEvent

P = ParamSpec("P")


T = TypeVar("T")


def _through_limiter(
    method: Callable[Concatenate[PaymentProvider, P], T],
) -> Callable[Concatenate[LimitedPaymentProvider, P], T]:
    """The port's ``method``, called on the wrapped provider once a slot is reserved: one
    wrapper for every call, typed from the port so a signature cannot drift from it."""
    name = method.__name__

    def call(self: LimitedPaymentProvider, /, *args: P.args, **kwargs: P.kwargs) -> T:
        forward: Callable[P, T] = getattr(self._provider, name)
        return self._limited(lambda: forward(*args, **kwargs))

    call.__name__ = name
    return call


class LimitedPaymentProvider:
    def __init__(
        self,
        provider: PaymentProvider,
        reserve: Callable[[float], float],
        *,
        max_wait_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._provider = provider
        # (longest wait taken) -> seconds until this caller's slot, not taken when further
        # out (e.g. SendRateLimiter.reserve)
        self._reserve = reserve
        self._max_wait = max_wait_s
        self._sleep = sleep

    def _take_slot(self) -> None:
        wait = self._reserve(self._max_wait)
        if wait > self._max_wait:
            raise PaymentRateLimited("the payment provider's request budget is spent for now", retry_after=wait)
        if wait > 0:
            self._sleep(wait)

    def _limited(self, call: Callable[[], T]) -> T:
        self._take_slot()
        return call()

    def admitted(self) -> PaymentProvider:
        """A slot taken now (or ``PaymentRateLimited``, nothing asked); the provider returned
        spends it on its first call and goes through the budget after that."""
        self._take_slot()
        spent = threading.Event()

        def reserve(max_wait_s: float) -> float:
            if not spent.is_set():
                spent.set()
                return 0.0
            return self._reserve(max_wait_s)

        return LimitedPaymentProvider(self._provider, reserve, max_wait_s=self._max_wait, sleep=self._sleep)

    create_intent = _through_limiter(PaymentProvider.create_intent)
    retrieve_intent = _through_limiter(PaymentProvider.retrieve_intent)
    confirm_intent = _through_limiter(PaymentProvider.confirm_intent)
    cancel_intent = _through_limiter(PaymentProvider.cancel_intent)
    update_intent_amount = _through_limiter(PaymentProvider.update_intent_amount)
    find_intents = _through_limiter(PaymentProvider.find_intents)
    refund = _through_limiter(PaymentProvider.refund)
    list_refunds = _through_limiter(PaymentProvider.list_refunds)

    def list_events(self, *, types: Sequence[str], created_after: int) -> Iterator[ProviderEvent]:
        # One reservation for the listing: its pages follow each other, not in parallel.
        return self._limited(lambda: iter(list(self._provider.list_events(types=types, created_after=created_after))))

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        return self._provider.parse_webhook(payload, signature_header)
