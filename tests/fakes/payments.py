"""An in-memory ``PaymentProvider`` (the port in ``payments.port``), in Stripe's terms.

Payment methods are Stripe's test ones, as the stand-in knows them: ``pm_card_visa``
succeeds, ``pm_card_chargeDeclined`` / ``pm_card_chargeDeclinedInsufficientFunds`` are
declined (a result: ``requires_payment_method`` with ``decline_code``),
``pm_card_authenticationRequired`` stops at ``requires_action`` (3-D Secure), anything else
is ``PaymentRejected``.

Idempotency as Stripe keeps it: a key replays its first answer for the same parameters and
is ``PaymentRejected("idempotency_key_reused")`` for others; a rejected request stores
nothing. Faults, to prove callers recover:

* ``fail_next = N`` — the next N mutating calls raise ``PaymentUnavailable`` before doing
  anything;
* ``fail_after_next = N`` — the next N mutating calls do their work, then raise
  ``PaymentUnavailable`` (charged, but the caller did not hear);
* ``rate_limit_next = N`` — the next N calls raise ``PaymentRateLimited``;
* ``budget_refuses = N`` — the next N ``admitted()`` raise ``PaymentRateLimited`` (the request
  budget, before anything is asked);
* ``forget_keys()`` — every idempotency key is forgotten, as Stripe may after 24 hours.

Refunds of a charge paid with ``pm_card_pendingRefund`` start ``pending``, and of one paid
with ``pm_card_refundFail`` start ``succeeded``; ``finish_refunds()`` then settles them
(succeeded, or failed with the amount back on the charge) with a ``charge.refund.updated``
event each, as Stripe's test cards do some time later.

Webhooks are signed like Stripe's (``t=<unix>,v1=<HMAC-SHA256 of "t.payload">``); ``sign``
makes a valid header. Thread-safe: one lock per key, as the provider serialises a key.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from racecap.money import MAXIMUM_CHARGE, charge_problem
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
)

SUCCEEDS = frozenset({"pm_card_visa", "pm_card_pendingRefund", "pm_card_refundFail"})
# Stripe's test cards for refunds that settle later: ``finish_refunds`` plays "later".
PENDING_REFUND, FAILING_REFUND = "pm_card_pendingRefund", "pm_card_refundFail"
DECLINES = {"pm_card_chargeDeclined": "card_declined", "pm_card_chargeDeclinedInsufficientFunds": "insufficient_funds"}
NEEDS_ACTION = frozenset({"pm_card_authenticationRequired"})
WEBHOOK_SECRET = "whsec_fake"
SIGNATURE_TOLERANCE_S = 300


@dataclass
class _Key:
    lock: threading.Lock = field(default_factory=threading.Lock)
    fingerprint: tuple[object, ...] | None = None
    result: PaymentIntent | Refund | None = None


@dataclass
class FakeIntent:
    intent: PaymentIntent
    description: str
    refunded_cents: int = 0
    payment_method: str | None = None


# Stripe updates the amount of an intent that can still be paid, and no other.
AMOUNT_UPDATABLE = frozenset(
    {IntentStatus.REQUIRES_PAYMENT_METHOD, IntentStatus.REQUIRES_CONFIRMATION, IntentStatus.REQUIRES_ACTION}
)


class FakePaymentProvider:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.fail_next = 0
        self.fail_after_next = 0
        self.rate_limit_next = 0
        self.budget_refuses = 0
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._keys: dict[str, _Key] = {}
        self._intents: dict[str, FakeIntent] = {}
        self._refunds: dict[str, Refund] = {}
        self._events: list[ProviderEvent] = []
        self._ids = itertools.count(1)

    # -- inspection, for assertions ---------------------------------------------------------
    @property
    def intents(self) -> list[PaymentIntent]:
        with self._lock:
            return [f.intent for f in self._intents.values()]

    @property
    def succeeded(self) -> list[PaymentIntent]:
        return [i for i in self.intents if i.status == IntentStatus.SUCCEEDED]

    @property
    def refunds(self) -> list[Refund]:
        with self._lock:
            return list(self._refunds.values())

    def is_refunded(self, intent_id: str) -> bool:
        with self._lock:
            record = self._intents[intent_id]
            return record.refunded_cents >= record.intent.amount_cents

    def put_intent(self, intent: PaymentIntent) -> None:
        """Arrange a state (e.g. an intent stuck in ``processing``) as a test's Given."""
        with self._lock:
            self._intents[intent.id] = FakeIntent(intent, "arranged")

    # -- the port ---------------------------------------------------------------------------
    def create_intent(self, new: NewIntent, *, idempotency_key: str) -> PaymentIntent:
        amount_cents, currency, payment_method = new.amount_cents, new.currency, new.payment_method
        if amount_cents <= 0:
            raise PaymentRejected("parameter_invalid_integer", "amount must be positive", 400)
        problem = charge_problem(amount_cents, currency)
        if problem is not None:  # the provider's own minimums and maximum (racecap.money)
            code = "amount_too_large" if amount_cents > MAXIMUM_CHARGE else "amount_too_small"
            raise PaymentRejected(code, problem, 400)
        fingerprint = ("create", new.amount_cents, currency.lower(), tuple(sorted(new.metadata.items())))
        fingerprint += (new.description, payment_method, new.confirm)

        def work() -> PaymentIntent:
            n = next(self._ids)
            intent = PaymentIntent(
                id=f"pi_fake_{n:06d}",
                status=IntentStatus.REQUIRES_CONFIRMATION if payment_method else IntentStatus.REQUIRES_PAYMENT_METHOD,
                amount_cents=amount_cents,
                currency=currency.lower(),
                metadata=dict(new.metadata),
                client_secret=f"pi_fake_{n:06d}_secret_fake",
            )
            if new.confirm:
                if payment_method is None:
                    raise PaymentRejected("parameter_missing", "confirm needs a payment_method", 400)
                intent = self._apply(intent, payment_method)
            with self._lock:
                self._intents[intent.id] = FakeIntent(intent, new.description, payment_method=payment_method)
                self._event("payment_intent.created", intent)
                self._record_outcome(intent)
            return intent

        return self._keyed(idempotency_key, fingerprint, work)  # type: ignore[return-value]

    def retrieve_intent(self, intent_id: str) -> PaymentIntent:
        self._enter("retrieve")
        return self._get(intent_id)

    def _get(self, intent_id: str) -> PaymentIntent:
        with self._lock:
            found = self._intents.get(intent_id)
        if found is None:
            raise PaymentRejected("resource_missing", f"No such payment_intent: {intent_id!r}", 404)
        return found.intent

    def confirm_intent(self, intent_id: str, *, payment_method: str, idempotency_key: str) -> PaymentIntent:
        def work() -> PaymentIntent:
            current = self._get(intent_id)
            if current.status not in (IntentStatus.REQUIRES_PAYMENT_METHOD, IntentStatus.REQUIRES_CONFIRMATION):
                raise PaymentRejected("payment_intent_unexpected_state", f"intent is {current.status}", 400)
            intent = self._apply(current, payment_method)
            with self._lock:
                self._intents[intent_id].intent = intent
                self._intents[intent_id].payment_method = payment_method
                self._record_outcome(intent)
            return intent

        return self._keyed(idempotency_key, ("confirm", intent_id, payment_method), work)  # type: ignore[return-value]

    def cancel_intent(self, intent_id: str, *, idempotency_key: str) -> PaymentIntent:
        def work() -> PaymentIntent:
            current = self._get(intent_id)
            if current.status in (IntentStatus.SUCCEEDED, IntentStatus.PROCESSING):
                raise IntentNotCancelable(current)
            if current.status == IntentStatus.CANCELED:
                return current
            intent = replace(current, status=IntentStatus.CANCELED)
            with self._lock:
                self._intents[intent_id].intent = intent
                self._event("payment_intent.canceled", intent)
            return intent

        return self._keyed(idempotency_key, ("cancel", intent_id), work)  # type: ignore[return-value]

    def update_intent_amount(self, intent_id: str, amount_cents: int, *, idempotency_key: str) -> PaymentIntent:
        def work() -> PaymentIntent:
            current = self._get(intent_id)
            if current.status not in AMOUNT_UPDATABLE:
                raise PaymentRejected("payment_intent_unexpected_state", f"intent is {current.status}", 400)
            problem = charge_problem(amount_cents, current.currency)
            if problem is not None:
                code = "amount_too_large" if amount_cents > MAXIMUM_CHARGE else "amount_too_small"
                raise PaymentRejected(code, problem, 400)
            status = current.status
            if status == IntentStatus.REQUIRES_ACTION:  # authenticated for the old amount
                status = IntentStatus.REQUIRES_CONFIRMATION
            intent = replace(current, amount_cents=amount_cents, status=status)
            with self._lock:
                self._intents[intent_id].intent = intent
            return intent

        return self._keyed(idempotency_key, ("update", intent_id, amount_cents), work)  # type: ignore[return-value]

    def find_intents(self, *, hold_id: str) -> list[PaymentIntent]:
        self._enter("find")
        return [i for i in self.intents if i.metadata.get("holdId") == hold_id]

    def refund(
        self,
        *,
        intent_id: str,
        idempotency_key: str,
        amount_cents: int | None = None,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Refund:
        def work() -> Refund:
            with self._lock:
                record = self._intents.get(intent_id)
                if record is None:
                    raise PaymentRejected("resource_missing", f"No such payment_intent: {intent_id!r}", 404)
                if record.intent.status != IntentStatus.SUCCEEDED:
                    raise PaymentRejected("charge_not_refundable", "Only a succeeded payment can be refunded", 400)
                left = record.intent.amount_cents - record.refunded_cents
                if left <= 0:
                    raise AlreadyRefunded("charge_already_refunded", f"{intent_id} was refunded already", 400)
                amount = left if amount_cents is None else amount_cents
                if not 0 < amount <= left:
                    raise PaymentRejected("amount_too_large", f"Refund amount ({amount}) is more than {left}", 400)
                record.refunded_cents += amount
                refund = Refund(
                    id=f"re_fake_{next(self._ids):06d}",
                    intent_id=intent_id,
                    amount_cents=amount,
                    status="pending" if record.payment_method == PENDING_REFUND else "succeeded",
                    metadata=dict(metadata or {}),
                )
                self._refunds[refund.id] = refund
                self._event("charge.refunded", record.intent)
            return refund

        fingerprint = ("refund", intent_id, amount_cents, reason, tuple(sorted((metadata or {}).items())))
        return self._keyed(idempotency_key, fingerprint, work)  # type: ignore[return-value]

    def list_refunds(self, *, intent_id: str) -> list[Refund]:
        self._enter("list_refunds")
        with self._lock:
            return [r for r in reversed(self._refunds.values()) if r.intent_id == intent_id]

    def admitted(self, call: str = "refund") -> FakePaymentProvider:
        with self._lock:
            if self.budget_refuses > 0:
                self.budget_refuses -= 1
                raise PaymentRateLimited("injected: the request budget is spent", retry_after=2.0)
        return self

    # -- later, at the provider ---------------------------------------------------------------
    def finish_refunds(self) -> list[ProviderEvent]:
        """What Stripe does some time after a test card's refund: pending ones succeed, the
        failing card's fail (its amount back on the charge). Returns the events, to deliver."""
        events: list[ProviderEvent] = []
        with self._lock:
            for refund in list(self._refunds.values()):
                method = self._intents[refund.intent_id].payment_method
                if refund.status == "pending":
                    done = replace(refund, status="succeeded")
                elif method == FAILING_REFUND and refund.status == "succeeded":
                    done = replace(refund, status="failed", failure_reason="expired_or_canceled_card")
                    self._intents[refund.intent_id].refunded_cents -= refund.amount_cents
                else:
                    continue
                self._refunds[refund.id] = done
                events.append(self._refund_event(done))
        return events

    def fail_refund(self, refund_id: str) -> ProviderEvent:
        """A refund that fails later whatever the card (the account's balance, a closed card)."""
        with self._lock:
            refund = self._refunds[refund_id]
            done = replace(refund, status="failed", failure_reason="expired_or_canceled_card")
            self._intents[refund.intent_id].refunded_cents -= refund.amount_cents
            self._refunds[refund_id] = done
            return self._refund_event(done)

    def _refund_event(self, refund: Refund) -> ProviderEvent:
        data = {
            "id": refund.id,
            "object": "refund",
            "amount": refund.amount_cents,
            "payment_intent": refund.intent_id,
            "status": refund.status,
            "metadata": dict(refund.metadata),
            "failure_reason": refund.failure_reason,
        }
        event = ProviderEvent(
            id=f"evt_fake_{next(self._ids):06d}", type="charge.refund.updated", created=int(self.clock()), data=data
        )
        self._events.append(event)
        return event

    def forget_keys(self) -> None:
        with self._lock:
            self._keys.clear()

    def list_events(self, *, types: Sequence[str], created_after: int) -> Iterator[ProviderEvent]:
        self._enter("events")
        with self._lock:
            events = list(self._events)
        return iter([e for e in events if e.type in types and e.created >= created_after])

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        parts = dict(p.split("=", 1) for p in (signature_header or "").split(",") if "=" in p)
        try:
            stamp = int(parts["t"])
        except (KeyError, ValueError):
            raise InvalidWebhookSignature("no timestamp in the signature header") from None
        expected = _signature(stamp, payload)
        if not hmac.compare_digest(expected, parts.get("v1", "")):
            raise InvalidWebhookSignature("signature does not match")
        if abs(self.clock() - stamp) > SIGNATURE_TOLERANCE_S:
            raise InvalidWebhookSignature("timestamp outside the tolerance")
        body = json.loads(payload)
        return ProviderEvent(
            id=body["id"], type=body["type"], created=int(body["created"]), data=body["data"]["object"]
        )

    def sign(self, payload: bytes) -> str:
        stamp = int(self.clock())
        return f"t={stamp},v1={_signature(stamp, payload)}"

    # -- how a payment method behaves ---------------------------------------------------------
    def _apply(self, intent: PaymentIntent, payment_method: str) -> PaymentIntent:
        if payment_method in SUCCEEDS:
            return replace(
                intent, status=IntentStatus.SUCCEEDED, latest_charge=f"ch_for_{intent.id}", decline_code=None
            )
        if payment_method in DECLINES:
            return replace(intent, status=IntentStatus.REQUIRES_PAYMENT_METHOD, decline_code=DECLINES[payment_method])
        if payment_method in NEEDS_ACTION:
            return replace(intent, status=IntentStatus.REQUIRES_ACTION)
        raise PaymentRejected("invalid_payment_method", f"No such payment method: {payment_method!r}", 400)

    def _record_outcome(self, intent: PaymentIntent) -> None:
        if intent.status == IntentStatus.SUCCEEDED:
            self._event("payment_intent.succeeded", intent)
        elif intent.decline_code:
            self._event("payment_intent.payment_failed", intent)

    def _event(self, kind: str, intent: PaymentIntent) -> None:
        data = {
            "id": intent.id,
            "object": "payment_intent",
            "status": str(intent.status),
            "amount": intent.amount_cents,
            "currency": intent.currency,
            "metadata": dict(intent.metadata),
        }
        self._events.append(
            ProviderEvent(id=f"evt_fake_{next(self._ids):06d}", type=kind, created=int(self.clock()), data=data)
        )

    # -- idempotency and faults ---------------------------------------------------------------
    def _enter(self, call: str) -> None:
        with self._lock:
            self.calls.append(call)
            if self.rate_limit_next > 0:
                self.rate_limit_next -= 1
                raise PaymentRateLimited("injected: rate limited", retry_after=1.0)

    def _keyed(self, key: str, fingerprint: tuple[object, ...], work: Callable[[], PaymentIntent | Refund]) -> object:
        if not key:
            raise ValueError("an idempotency key is required")
        self._enter(str(fingerprint[0]))
        with self._lock:
            if self.fail_next > 0:
                self.fail_next -= 1
                raise PaymentUnavailable("injected: provider unavailable (nothing done)")
            state = self._keys.setdefault(key, _Key())
        with state.lock:
            if state.result is not None:
                if state.fingerprint != fingerprint:
                    raise PaymentRejected("idempotency_key_reused", "key used with other parameters", 400)
                return state.result
            result = work()  # a rejection raises here and stores nothing, as Stripe does
            state.fingerprint, state.result = fingerprint, result
            with self._lock:
                lose_answer = self.fail_after_next > 0
                if lose_answer:
                    self.fail_after_next -= 1
            if lose_answer:
                raise PaymentUnavailable("injected: done, but the answer was lost")
            return result


def _signature(stamp: int, payload: bytes) -> str:
    return hmac.new(WEBHOOK_SECRET.encode(), f"{stamp}.".encode() + payload, hashlib.sha256).hexdigest()
