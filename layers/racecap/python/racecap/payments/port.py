"""The payment port: what the logic may ask of a card payment provider, in Stripe's terms.

The one rule is *never charge a card twice*. Every mutating call carries an idempotency key
chosen by the caller (derived from the hold or registration, never random per try); the
provider replays its first answer for a repeat, so adapters may retry freely and a caller
that crashed mid-payment may call again with the same key, or ask ``find_intents``.

Adapters live in their own modules (``stripe_provider``: the official SDK, pointed at the
local stand-in or at Stripe); the in-memory fake is ``tests/fakes/payments.py``, and
``tests/contract/test_payment_port.py`` runs the same cases against both.

Outcomes:

* a ``PaymentIntent`` — its ``status`` says what happened; a decline is a RESULT
  (``REQUIRES_PAYMENT_METHOD`` with ``decline_code``), not an exception;
* ``PaymentRejected`` — the provider refused the request itself; nothing was charged;
* ``PaymentUnavailable`` — the outcome is UNKNOWN (network, 5xx after retries): the card
  MAY have been charged. Never treat it as declined.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class IntentStatus(StrEnum):
    """Stripe's own PaymentIntent statuses."""

    REQUIRES_PAYMENT_METHOD = "requires_payment_method"  # new, or after a decline
    REQUIRES_CONFIRMATION = "requires_confirmation"
    REQUIRES_ACTION = "requires_action"  # 3-D Secure pending
    PROCESSING = "processing"
    SUCCEEDED = "succeeded"
    CANCELED = "canceled"


@dataclass(frozen=True)
class PaymentIntent:
    id: str
    status: IntentStatus
    amount_cents: int
    currency: str  # lower-case ISO code, as Stripe returns it
    metadata: Mapping[str, str]  # holdId, raceId, eventId, registrationId, email
    client_secret: str | None = None  # for the browser's confirmPayment
    latest_charge: str | None = None
    decline_code: str | None = None  # last_payment_error's decline_code/code after a failed confirmation


@dataclass(frozen=True)
class NewIntent:
    """What a new PaymentIntent charges and carries: one record, so the port, its adapters and
    its fake state the request once."""

    amount_cents: int  # in the currency's API unit (racecap.money)
    currency: str
    metadata: Mapping[str, str]  # holdId, raceId, eventId, registrationId, email
    description: str
    payment_method: str | None = None  # with ``confirm``: confirmed on the server at once
    confirm: bool = False


class RefundStatus(StrEnum):
    """Stripe's own Refund statuses. A card refund may be ``pending`` for a while and end
    ``succeeded``, ``failed`` or ``canceled``; one ``succeeded`` at first may still fail later
    (the card was closed): ``charge.refund.updated`` says so."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    REQUIRES_ACTION = "requires_action"  # non-card refunds only; never for a card charge


# A refund that did not happen after all: its amount goes back to what can be refunded.
REFUND_UNDONE = frozenset({RefundStatus.FAILED, RefundStatus.CANCELED})


@dataclass(frozen=True)
class Refund:
    id: str
    intent_id: str
    amount_cents: int
    status: str  # a RefundStatus value
    metadata: Mapping[str, str] = field(default_factory=dict)  # registrationId, refundKey: set by the ledger
    failure_reason: str | None = None


def refund_from(found: Any, intent_id: str = "") -> Refund:
    """A Refund from Stripe's refund object: the SDK's (``to_dict``) or a webhook's ``data.object``."""
    obj: Mapping[str, Any] = found.to_dict() if hasattr(found, "to_dict") else found
    try:
        return Refund(
            id=str(obj["id"]),
            intent_id=str(obj.get("payment_intent") or intent_id),
            amount_cents=int(obj["amount"]),
            status=str(obj["status"]),
            metadata={str(k): str(v) for k, v in (obj.get("metadata") or {}).items()},
            failure_reason=obj.get("failure_reason"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PaymentUnavailable(f"unreadable refund from the provider: {exc}") from exc


@dataclass(frozen=True)
class ProviderEvent:
    """A webhook delivery or an entry of the events list."""

    id: str
    type: str  # e.g. "payment_intent.succeeded", "charge.refunded"
    created: int  # unix seconds
    data: Mapping[str, Any]  # event.data.object as a plain dict


class PaymentProvider(Protocol):
    def create_intent(self, new: NewIntent, *, idempotency_key: str) -> PaymentIntent:
        """Cards only; the same key replays the first answer."""
        ...

    def retrieve_intent(self, intent_id: str) -> PaymentIntent: ...

    def confirm_intent(self, intent_id: str, *, payment_method: str, idempotency_key: str) -> PaymentIntent:
        """A decline is a result (``REQUIRES_PAYMENT_METHOD`` + ``decline_code``), not an exception."""
        ...

    def cancel_intent(self, intent_id: str, *, idempotency_key: str) -> PaymentIntent:
        """Raises ``IntentNotCancelable(intent)`` when it already succeeded (or is processing)."""
        ...

    def update_intent_amount(self, intent_id: str, amount_cents: int, *, idempotency_key: str) -> PaymentIntent:
        """Change what an unpaid intent will charge (a discount applied before the runner pays):
        the same intent, never a new one under the same key. Only while it can still be paid
        (requires_payment_method, requires_confirmation, requires_action; from the last it
        must be confirmed again); otherwise ``PaymentRejected("payment_intent_unexpected_state")``,
        and ``PaymentRejected("amount_too_small")`` under the currency's minimum."""
        ...

    def find_intents(self, *, hold_id: str) -> list[PaymentIntent]:
        """Crash recovery: the intents whose metadata names this hold."""
        ...

    def refund(
        self,
        *,
        intent_id: str,
        idempotency_key: str,
        amount_cents: int | None = None,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Refund:
        """``amount_cents`` of the charge (all that is left of it when None); each refund its own
        key. Raises ``AlreadyRefunded`` when nothing is left to refund, and
        ``PaymentRejected("amount_too_large")`` for more than is left. The answer's status may
        be ``pending``: the outcome comes later, by ``charge.refund.updated``."""
        ...

    def list_refunds(self, *, intent_id: str) -> list[Refund]:
        """Every refund of the intent's charge, newest first: how a refund whose answer was lost
        is found again once its idempotency key may have expired (Stripe keeps keys for 24
        hours at least, not for ever), by the ``refundKey`` in its metadata."""
        ...

    def admitted(self, call: str = "refund") -> PaymentProvider:
        """Room for one call (the port's ``call``, e.g. ``refund``) in the request budget, taken
        now: raises ``PaymentRateLimited`` before anything is asked of the provider, so a caller
        can refuse an action that would otherwise reserve money and then find it could not ask
        (the ledger's refunds). The
        provider returned makes its first call in that room; a provider without a budget
        returns itself."""
        ...

    def list_events(self, *, types: Sequence[str], created_after: int) -> Iterator[ProviderEvent]:
        """For reconciliation, oldest first, every page."""
        ...

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        """Verifies the signature; raises ``InvalidWebhookSignature``."""
        ...


# -- errors -------------------------------------------------------------------------------------
class PaymentUnavailable(Exception):
    """Provider unreachable, 5xx after retries, or an unreadable answer.

    The outcome is UNKNOWN: the card may have been charged. Do not assume declined.
    Deliberately not a ``PaymentRejected``, so ``except PaymentRejected`` cannot swallow it.
    """


class PaymentRateLimited(PaymentUnavailable):
    """The provider's 429, still there after the adapter's own retries."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PaymentRejected(Exception):
    """The provider refused the request itself (invalid parameters or payment method, an
    idempotency key reused with other parameters...): nothing was charged by it."""

    def __init__(self, code: str, message: str = "", http_status: int | None = None) -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.http_status = http_status


class AlreadyRefunded(PaymentRejected):
    """The charge was refunded already (under another key, or by hand in the dashboard)."""


class IntentNotCancelable(Exception):
    """The intent already succeeded (or is processing): the money is, or may be, taken."""

    def __init__(self, intent: PaymentIntent) -> None:
        super().__init__(f"payment intent {intent.id} is {intent.status}")
        self.intent = intent


class InvalidWebhookSignature(Exception):
    """A webhook whose signature does not verify: not from the provider, or tampered with."""
