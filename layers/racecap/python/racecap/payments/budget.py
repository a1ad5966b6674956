"""The provider's request budget, shared by every execution environment.

Stripe allows about 100 requests/s per account in live mode and 25 in test mode, and on top
of that **25 requests/s per endpoint** unless it raises them: creating PaymentIntents tops out
at 25/s whatever the account allows. Past either it answers 429 to whichever request is
unlucky. ``LimitedPaymentProvider`` wraps any ``PaymentProvider`` so that each call first
reserves a slot in both limits, shared through Redis (``racecap.ratelimit.RequestBudget``,
sized from configuration below the provider's limits; one round trip reserves both or
neither). A slot within ``max_wait_s`` is waited for; a later one is refused at once with
``PaymentRateLimited(retry_after)``, which the API answers with 429 + ``Retry-After`` while
the runner keeps the place. A refused caller takes no slot in either limit: when every refusal
kept one, an opening's retries (hundreds of runners, each environment calling at once) pushed
every caller's next slot further out with each refusal, until nobody got one (issue 31).
Webhook parsing makes no call and is not limited.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from racecap.payments.port import PaymentProvider, PaymentRateLimited, ProviderEvent

P = ParamSpec("P")

# Each call of the port as the endpoint Stripe counts it against: a named API operation, its
# method and path (every intent's ``GET /v1/payment_intents/:id`` counts against one limit). The
# names are ``racecap.config.PAYMENT_ENDPOINTS``, which the settings check (a unit test pins both).
ENDPOINTS: dict[str, str] = {
    "create_intent": "POST /v1/payment_intents",
    "retrieve_intent": "GET /v1/payment_intents/:id",
    "update_intent_amount": "POST /v1/payment_intents/:id",
    "confirm_intent": "POST /v1/payment_intents/:id/confirm",
    "cancel_intent": "POST /v1/payment_intents/:id/cancel",
    "find_intents": "GET /v1/payment_intents/search",
    "refund": "POST /v1/refunds",
    "list_refunds": "GET /v1/refunds",
    "list_events": "GET /v1/events",
}


T = TypeVar("T")


def _through_limiter(
    method: Callable[Concatenate[PaymentProvider, P], T],
) -> Callable[Concatenate[LimitedPaymentProvider, P], T]:
    """The port's ``method``, called on the wrapped provider once a slot is reserved in its
    endpoint's limit and the account's: one wrapper for every call, typed from the port so a
    signature cannot drift from it."""
    name = method.__name__
    endpoint = ENDPOINTS[name]

    def call(self: LimitedPaymentProvider, /, *args: P.args, **kwargs: P.kwargs) -> T:
        forward: Callable[P, T] = getattr(self._provider, name)
        return self._limited(endpoint, lambda: forward(*args, **kwargs))

    call.__name__ = name
    return call


class LimitedPaymentProvider:
    def __init__(
        self,
        provider: PaymentProvider,
        reserve: Callable[[str, float], float],
        *,
        max_wait_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._provider = provider
        # (endpoint, longest wait taken) -> seconds until this caller's slot in both limits,
        # taken in neither when further out (RequestBudget.reserve)
        self._reserve = reserve
        self._max_wait = max_wait_s
        self._sleep = sleep

    def _take_slot(self, endpoint: str) -> None:
        wait = self._reserve(endpoint, self._max_wait)
        if wait > self._max_wait:
            raise PaymentRateLimited("the payment provider's request budget is spent for now", retry_after=wait)
        if wait > 0:
            self._sleep(wait)

    def _limited(self, endpoint: str, call: Callable[[], T]) -> T:
        self._take_slot(endpoint)
        return call()

    def admitted(self, call: str = "refund") -> PaymentProvider:
        """A slot for the port's ``call`` taken now (or ``PaymentRateLimited``, nothing asked);
        the provider returned spends it on its first call and goes through the budget after."""
        self._take_slot(ENDPOINTS[call])
        spent = threading.Event()

        def reserve(endpoint: str, max_wait_s: float) -> float:
            if not spent.is_set():
                spent.set()
                return 0.0
            return self._reserve(endpoint, max_wait_s)

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
        return self._limited(
            ENDPOINTS["list_events"],
            lambda: iter(list(self._provider.list_events(types=types, created_after=created_after))),
        )

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        return self._provider.parse_webhook(payload, signature_header)
