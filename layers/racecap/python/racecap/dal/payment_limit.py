"""The provider's request budget, shared by every execution environment.

Stripe allows about 100 requests/s per account in live mode and 25 in test mode; past that
it answers 429 to whichever request is unlucky. ``LimitedPaymentProvider`` wraps any
``PaymentProvider`` so that each call first reserves a slot in a limiter shared through
Redis (``racecap.ratelimit.SendRateLimiter``, sized from configuration below the provider's
limit). A slot within ``max_wait_s`` is waited for; a later one is refused at once with
``PaymentRateLimited(retry_after)``, which the API answers with 429 + ``Retry-After`` while
the runner keeps the place. A refused caller's slot is not handed back: under overload the
shared budget errs on the side of fewer calls, never more. Webhook parsing makes no call
and is not limited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from racecap.dal.payments import PaymentIntent, PaymentProvider, PaymentRateLimited, ProviderEvent, Refund

T = TypeVar("T")


class LimitedPaymentProvider:
    def __init__(
        self,
        provider: PaymentProvider,
        reserve: Callable[[], float],
        *,
        max_wait_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._provider = provider
        self._reserve = reserve  # seconds until this caller's slot (e.g. SendRateLimiter.reserve)
        self._max_wait = max_wait_s
        self._sleep = sleep

    def _limited(self, call: Callable[[], T]) -> T:
        wait = self._reserve()
        if wait > self._max_wait:
            raise PaymentRateLimited("the payment provider's request budget is spent for now", retry_after=wait)
        if wait > 0:
            self._sleep(wait)
        return call()

    def create_intent(
        self,
        *,
        amount_cents: int,
        currency: str,
        idempotency_key: str,
        metadata: Mapping[str, str],
        description: str,
        payment_method: str | None = None,
        confirm: bool = False,
    ) -> PaymentIntent:
        return self._limited(
            lambda: self._provider.create_intent(
                amount_cents=amount_cents,
                currency=currency,
                idempotency_key=idempotency_key,
                metadata=metadata,
                description=description,
                payment_method=payment_method,
                confirm=confirm,
            )
        )

    def retrieve_intent(self, intent_id: str) -> PaymentIntent:
        return self._limited(lambda: self._provider.retrieve_intent(intent_id))

    def confirm_intent(self, intent_id: str, *, payment_method: str, idempotency_key: str) -> PaymentIntent:
        return self._limited(
            lambda: self._provider.confirm_intent(
                intent_id, payment_method=payment_method, idempotency_key=idempotency_key
            )
        )

    def cancel_intent(self, intent_id: str, *, idempotency_key: str) -> PaymentIntent:
        return self._limited(lambda: self._provider.cancel_intent(intent_id, idempotency_key=idempotency_key))

    def find_intents(self, *, hold_id: str) -> list[PaymentIntent]:
        return self._limited(lambda: self._provider.find_intents(hold_id=hold_id))

    def refund(self, *, intent_id: str, idempotency_key: str, reason: str | None = None) -> Refund:
        return self._limited(
            lambda: self._provider.refund(intent_id=intent_id, idempotency_key=idempotency_key, reason=reason)
        )

    def list_events(self, *, types: Sequence[str], created_after: int) -> Iterator[ProviderEvent]:
        # One reservation for the listing: its pages follow each other, not in parallel.
        return self._limited(lambda: iter(list(self._provider.list_events(types=types, created_after=created_after))))

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        return self._provider.parse_webhook(payload, signature_header)


__all__ = ["LimitedPaymentProvider"]
