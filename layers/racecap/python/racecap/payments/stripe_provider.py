"""The payment port on Stripe, through the official ``stripe`` SDK (``StripeClient``).

The same code runs on AWS against https://api.stripe.com and locally against the stand-in
(``local/stripe_standin``): only ``api_base`` differs, from configuration. The SDK is
imported on first use, not at import time: most invocations of the functions that hold a
provider never call it, and its import is a noticeable part of a cold start.

Timeouts and retries are sized for API Gateway's 29 s: each attempt may take
``connect_timeout_s + read_timeout_s`` (2 + 5 s); the SDK retries connection errors, 409s
(a concurrent request with the same idempotency key) and 5xx ``max_retries`` times (2) with
its own backoff (0.5 s, 1 s), so a call gives up after ~22.5 s at worst. Every retry carries
the caller's idempotency key, so a retry can never charge twice.

SDK errors become the port's: a card error is a RESULT (the intent, ``requires_payment_method``
with its decline code); 429 is ``PaymentRateLimited``; other 4xx are ``PaymentRejected``
(``AlreadyRefunded`` for a refunded charge); network errors and 5xx are
``PaymentUnavailable`` (the outcome is unknown).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from racecap.payments.port import (
    AlreadyRefunded,
    IntentNotCancelable,
    IntentStatus,
    InvalidWebhookSignature,
    NewIntent,
    PaymentIntent,
    PaymentRateLimited,
    PaymentRejected,
    PaymentUnavailable,
    ProviderEvent,
    Refund,
    refund_from,
)

if TYPE_CHECKING:
    import stripe


STRIPE_API_BASE = "https://api.stripe.com"


# Stripe's own default: a signature older than this is refused, even if it verifies.
SIGNATURE_TOLERANCE_S = 300


DEFAULT_RETRY_AFTER_S = 1.0


# The pauses before retrying a provider's 429 (two retries, then the 429 is the caller's).
RATE_LIMIT_PAUSES_S = (0.25, 0.5)


EVENTS_PAGE_SIZE = 100


NOT_CANCELABLE = frozenset({IntentStatus.SUCCEEDED, IntentStatus.PROCESSING})


@dataclass(frozen=True)
class StripeKeys:
    """What the secret holds: the API secret key and the webhook endpoint's signing secret."""

    secret_key: str
    webhook_secret: str

    def __repr__(self) -> str:  # never in a log line or a traceback
        return "StripeKeys(***)"


def keys_from_secret(secret_id: str, *, max_age_s: int = 300) -> Callable[[], StripeKeys]:
    """The keys, read from Secrets Manager with Powertools Parameters (cached ``max_age_s`` in
    the execution environment, so a burst reads the secret once per environment and a rotated
    key is picked up within minutes). Locally the same call reaches moto's Secrets Manager
    (``AWS_ENDPOINT_URL_SECRETS_MANAGER``), holding the stand-in's keys."""

    def read() -> StripeKeys:
        from aws_lambda_powertools.utilities import parameters

        value = parameters.get_secret(secret_id, transform="json", max_age=max_age_s)
        if not isinstance(value, dict) or not value.get("secretKey") or not value.get("webhookSecret"):
            # Never the value itself in the message: it is a secret, however malformed.
            raise PaymentUnavailable(f"secret {secret_id} must be a JSON object with secretKey and webhookSecret")
        return StripeKeys(secret_key=str(value["secretKey"]), webhook_secret=str(value["webhookSecret"]))

    return read


class StripePaymentProvider:
    def __init__(
        self,
        keys: Callable[[], StripeKeys],
        *,
        api_base: str = STRIPE_API_BASE,
        connect_timeout_s: float = 2.0,
        read_timeout_s: float = 5.0,
        max_retries: int = 2,
        rate_limit_pauses_s: tuple[float, ...] = RATE_LIMIT_PAUSES_S,
    ) -> None:
        self._rate_limit_pauses = rate_limit_pauses_s
        self._keys = keys  # called per use: a cached secret read, so a rotated key is picked up
        self._api_base = api_base.rstrip("/")
        self._timeout = (connect_timeout_s, read_timeout_s)
        self._max_retries = max_retries
        self._client: stripe.StripeClient | None = None
        self._client_key: str | None = None
        self._lock = threading.Lock()

    # -- the SDK, lazily ---------------------------------------------------------------------------
    def _stripe(self) -> stripe.StripeClient:
        secret_key = self._keys().secret_key
        with self._lock:
            if self._client is None or self._client_key != secret_key:
                import requests
                import stripe

                # requests re-reads the environment's proxies and ~/.netrc on every call
                # (trust_env): a walk of os.environ per payment call in a burst. The proxy, if
                # the stage has one, is read once here instead.
                session = requests.Session()
                session.trust_env = False
                proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or None
                self._client = stripe.StripeClient(
                    secret_key,
                    base_addresses={"api": self._api_base},
                    max_network_retries=self._max_retries,
                    http_client=stripe.RequestsClient(timeout=self._timeout, session=session, proxy=proxy),
                )
                self._client_key = secret_key
            return self._client

    def _call(self, work: Callable[[stripe.StripeClient], Any]) -> Any:
        import stripe

        client = self._stripe()
        try:
            return self._past_rate_limits(client, work)
        except stripe.RateLimitError as exc:
            raise PaymentRateLimited(str(exc.user_message or exc), _retry_after(exc)) from exc
        except stripe.IdempotencyError as exc:
            if exc.http_status == 409:  # still in flight after the SDK's retries: outcome unknown
                raise PaymentUnavailable(f"provider busy with this key: {exc.user_message}") from exc
            raise PaymentRejected("idempotency_key_reused", str(exc.user_message or ""), exc.http_status) from exc
        except (stripe.APIConnectionError, stripe.APIError) as exc:
            raise PaymentUnavailable(f"payment provider unavailable: {exc.user_message or exc}") from exc
        except stripe.StripeError as exc:
            if exc.http_status is None or exc.http_status >= 500:
                raise PaymentUnavailable(f"payment provider error: {exc.user_message or exc}") from exc
            code = exc.code or type(exc).__name__
            if code == "charge_already_refunded":
                raise AlreadyRefunded(code, str(exc.user_message or ""), exc.http_status) from exc
            raise PaymentRejected(code, str(exc.user_message or ""), exc.http_status) from exc

    def _past_rate_limits(self, client: stripe.StripeClient, work: Callable[[stripe.StripeClient], Any]) -> Any:
        """The SDK does not retry a 429; Stripe's docs ask for a retry with backoff. The shared
        budget keeps calls under the provider's limits as slotted, but a call stalled in flight
        (a starved CPU) can land in the next second beside its successors, as an email can at
        SES: such a 429 is retried here, after a short jittered pause, instead of reaching the
        runner. A 429 means the request was not applied, and the key makes a retry safe anyway."""
        import stripe

        for pause in self._rate_limit_pauses:
            try:
                return work(client)
            except stripe.RateLimitError as exc:
                time.sleep(min(pause, _retry_after(exc)) * random.uniform(0.5, 1.0))
        return work(client)

    # -- intents -----------------------------------------------------------------------------------
    def create_intent(self, new: NewIntent, *, idempotency_key: str) -> PaymentIntent:
        params: Any = {
            "amount": new.amount_cents,
            "currency": new.currency.lower(),
            "payment_method_types": ["card"],
            "metadata": dict(new.metadata),
            "description": new.description,
        }
        if new.payment_method is not None:
            params["payment_method"] = new.payment_method
        if new.confirm:
            params["confirm"] = True
        options: Any = {"idempotency_key": idempotency_key}
        return self._declines_as_results(lambda c: c.v1.payment_intents.create(params=params, options=options))

    def retrieve_intent(self, intent_id: str) -> PaymentIntent:
        return _intent(self._call(lambda c: c.v1.payment_intents.retrieve(intent_id)))

    def confirm_intent(self, intent_id: str, *, payment_method: str, idempotency_key: str) -> PaymentIntent:
        params: Any = {"payment_method": payment_method}
        options: Any = {"idempotency_key": idempotency_key}
        return self._declines_as_results(
            lambda c: c.v1.payment_intents.confirm(intent_id, params=params, options=options)
        )

    def _declines_as_results(self, work: Callable[[stripe.StripeClient], Any]) -> PaymentIntent:
        import stripe

        def attempt(client: stripe.StripeClient) -> Any:
            try:
                return work(client)
            except stripe.CardError as exc:
                # A decline: the intent is still there, back to requires_payment_method.
                intent = exc.error.payment_intent if exc.error is not None else None
                if intent is None:
                    raise
                return intent

        return _intent(self._call(attempt))

    def cancel_intent(self, intent_id: str, *, idempotency_key: str) -> PaymentIntent:
        import stripe

        options: Any = {"idempotency_key": idempotency_key}

        def attempt(client: stripe.StripeClient) -> Any:
            try:
                return client.v1.payment_intents.cancel(intent_id, options=options)
            except stripe.InvalidRequestError as exc:
                if exc.code != "payment_intent_unexpected_state":
                    raise
                current = _intent(
                    exc.error.payment_intent
                    if exc.error and exc.error.payment_intent
                    else client.v1.payment_intents.retrieve(intent_id)
                )
                if current.status == IntentStatus.CANCELED:
                    return current  # cancelled already (a retry, or the other tab): the same outcome
                if current.status in NOT_CANCELABLE:
                    raise IntentNotCancelable(current) from exc
                raise

        result = self._call(attempt)
        return result if isinstance(result, PaymentIntent) else _intent(result)

    def update_intent_amount(self, intent_id: str, amount_cents: int, *, idempotency_key: str) -> PaymentIntent:
        # The client's form of ``stripe.PaymentIntent.modify``: POST /v1/payment_intents/:id.
        params: Any = {"amount": amount_cents}
        options: Any = {"idempotency_key": idempotency_key}
        return _intent(self._call(lambda c: c.v1.payment_intents.update(intent_id, params=params, options=options)))

    def find_intents(self, *, hold_id: str) -> list[PaymentIntent]:
        # Stripe's search is eventually consistent (a new intent may take a moment to show):
        # callers use it for crash recovery long after the fact, never as the only record.
        query = f"metadata['holdId']:'{_quote(hold_id)}'"
        result = self._call(lambda c: c.v1.payment_intents.search(params={"query": query, "limit": 100}))
        return [_intent(i) for i in result.auto_paging_iter()]

    # -- refunds -----------------------------------------------------------------------------------
    def refund(
        self,
        *,
        intent_id: str,
        idempotency_key: str,
        amount_cents: int | None = None,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Refund:
        params: Any = {"payment_intent": intent_id}
        if amount_cents is not None:
            params["amount"] = amount_cents
        if reason is not None:
            params["reason"] = reason
        if metadata:
            params["metadata"] = dict(metadata)
        options: Any = {"idempotency_key": idempotency_key}
        return refund_from(self._call(lambda c: c.v1.refunds.create(params=params, options=options)), intent_id)

    def list_refunds(self, *, intent_id: str) -> list[Refund]:
        params: Any = {"payment_intent": intent_id, "limit": 100}
        page = self._call(lambda c: c.v1.refunds.list(params=params))
        return [refund_from(r, intent_id) for r in page.auto_paging_iter()]

    def admitted(self, call: str = "refund") -> StripePaymentProvider:
        return self  # no budget of its own: LimitedPaymentProvider keeps it

    # -- events ------------------------------------------------------------------------------------
    def list_events(self, *, types: Sequence[str], created_after: int) -> Iterator[ProviderEvent]:
        params: Any = {"created": {"gte": created_after}, "limit": EVENTS_PAGE_SIZE}
        if types:
            params["types"] = list(types)

        def every_page(client: stripe.StripeClient) -> list[ProviderEvent]:
            # The SDK's transport, retries and errors, without its objects: each run reads
            # back over a five-minute overlap, which in an opening is thousands of events, and
            # building a StripeObject tree per event (then a dict again) cost the sweeper 0.3-0.6 s
            # of CPU per run for 900 registrations (issue 30's per-route figures).
            events: list[ProviderEvent] = []
            query = dict(params)
            while True:
                page = client.raw_request("get", "/v1/events", **query).data
                events.extend(_event(e) for e in page["data"])
                if not page.get("has_more") or not page["data"]:
                    return events
                query["starting_after"] = page["data"][-1]["id"]

        # Stripe lists newest first; reconciliation reads oldest first.
        yield from reversed(self._call(every_page))

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        import stripe

        if not signature_header:
            raise InvalidWebhookSignature("no Stripe-Signature header")
        try:
            text = payload.decode("utf-8")
            stripe.WebhookSignature.verify_header(
                text, signature_header, self._keys().webhook_secret, SIGNATURE_TOLERANCE_S
            )
            return _event(json.loads(text))
        except (stripe.SignatureVerificationError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise InvalidWebhookSignature(f"webhook refused: {exc}") from exc


# -- mapping the SDK's objects -------------------------------------------------------------------
def _intent(found: Any) -> PaymentIntent:
    if isinstance(found, PaymentIntent):
        return found
    # The SDK's objects refuse dict methods (``.get``); read a plain copy.
    obj: Mapping[str, Any] = found.to_dict() if hasattr(found, "to_dict") else found
    try:
        error = obj.get("last_payment_error") or {}
        status = IntentStatus(obj["status"])
        decline = None
        if status == IntentStatus.REQUIRES_PAYMENT_METHOD and error:
            decline = error.get("decline_code") or error.get("code")
        charge = obj.get("latest_charge")
        return PaymentIntent(
            id=str(obj["id"]),
            status=status,
            amount_cents=int(obj["amount"]),
            currency=str(obj["currency"]),
            metadata={str(k): str(v) for k, v in (obj.get("metadata") or {}).items()},
            client_secret=obj.get("client_secret"),
            latest_charge=charge if isinstance(charge, str) or charge is None else str(charge["id"]),
            decline_code=decline,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PaymentUnavailable(f"unreadable payment intent from the provider: {exc}") from exc


def _event(data: Mapping[str, Any]) -> ProviderEvent:
    return ProviderEvent(
        id=str(data["id"]),
        type=str(data["type"]),
        created=int(data["created"]),
        data=dict(data["data"]["object"]),
    )


def _retry_after(exc: Any) -> float:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else DEFAULT_RETRY_AFTER_S
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER_S


def _quote(value: str) -> str:
    """A value inside a search query's single quotes (Stripe escapes ' with a backslash)."""
    return value.replace("\\", "\\\\").replace("'", "\\'")
