"""The stand-in's state: PaymentIntents, charges, refunds, disputes and events, in memory.

Everything here is thread-safe under one lock (``Book._lock``), held briefly; the HTTP layer
(``server.py``) adds idempotency and the rate limit around these operations. Every state
change appends an event (``Book.events``) and hands it to ``on_event`` (the webhook sender).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from local.runtime import install_layer_path

install_layer_path()  # the provider's amount rules are declared once, in the layer (racecap.money)
from racecap import money  # noqa: E402

API_VERSION = "2025-10-29.clover"  # what the events say they were rendered with

# Card number -> behaviour, as Stripe documents its test cards.
SUCCEEDS, DECLINED, INSUFFICIENT, THREE_DS = "succeeds", "generic_decline", "insufficient_funds", "3ds"


# What a card's refunds do, as Stripe's refund test cards do: succeed at once; start pending and
# succeed some time later; or succeed at once and fail some time later (charge.refund.updated).
REFUND_SUCCEEDS, REFUND_PENDING, REFUND_FAILS = "succeeds", "pending", "fails"
# How long "some time later" is here (seconds; the control endpoint sets it).
REFUND_SETTLE_S = 2.0


@dataclass(frozen=True)
class TestCard:
    number: str
    brand: str
    outcome: str
    refund: str = REFUND_SUCCEEDS


TEST_CARDS: dict[str, TestCard] = {
    c.number: c
    for c in (
        TestCard("4242424242424242", "visa", SUCCEEDS),
        TestCard("5555555555554444", "mastercard", SUCCEEDS),
        TestCard("4000000000000002", "visa", DECLINED),
        TestCard("4000000000009995", "visa", INSUFFICIENT),
        TestCard("4000002500003155", "visa", THREE_DS),
        TestCard("4000002760003184", "visa", THREE_DS),
        TestCard("4000000000003220", "visa", THREE_DS),
        TestCard("4000000000007726", "visa", SUCCEEDS, refund=REFUND_PENDING),
        TestCard("4000000000005126", "visa", SUCCEEDS, refund=REFUND_FAILS),
    )
}

# Stripe's test PaymentMethods (pm_card_*) -> the card they stand for.
TEST_PAYMENT_METHODS: dict[str, str] = {
    "pm_card_visa": "4242424242424242",
    "pm_card_mastercard": "5555555555554444",
    "pm_card_chargeDeclined": "4000000000000002",
    "pm_card_visa_chargeDeclined": "4000000000000002",
    "pm_card_chargeDeclinedInsufficientFunds": "4000000000009995",
    "pm_card_authenticationRequiredOnSetup": "4000002500003155",
    "pm_card_authenticationRequired": "4000002760003184",
    "pm_card_threeDSecure2Required": "4000000000003220",
    "pm_card_pendingRefund": "4000000000007726",
    "pm_card_refundFail": "4000000000005126",
}

CANCELABLE = ("requires_payment_method", "requires_confirmation", "requires_action")
CONFIRMABLE = ("requires_payment_method", "requires_confirmation")
# Stripe: "You may only update the amount of a PaymentIntent with one of the following
# statuses: requires_payment_method, requires_confirmation, requires_action."
AMOUNT_UPDATABLE = ("requires_payment_method", "requires_confirmation", "requires_action")
UPDATABLE_PARAMS = frozenset({"amount", "description", "metadata"})
REFUND_REASONS = ("duplicate", "fraudulent", "requested_by_customer")


class ApiError(Exception):
    """An answer in Stripe's error shape: ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, type_: str, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"type": type_, "message": message, **{k: v for k, v in fields.items() if v is not None}}}


def invalid(message: str, *, param: str | None = None, code: str | None = None, status: int = 400) -> ApiError:
    return ApiError(status, "invalid_request_error", message, param=param, code=code)


def missing(kind: str, ident: str, param: str = "id") -> ApiError:
    return ApiError(404, "invalid_request_error", f"No such {kind}: '{ident}'", code="resource_missing", param=param)


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_urlsafe(18).replace('-', 'x').replace('_', 'y')}"


def luhn_ok(number: str) -> bool:
    digits = [int(d) for d in number]
    total = 0
    for i, digit in enumerate(reversed(digits)):
        doubled = digit * 2 if i % 2 else digit
        total += doubled - 9 if doubled > 9 else doubled
    return total % 10 == 0


def _as_int(value: Any, param: str) -> int:
    try:
        number = int(str(value))
    except ValueError:
        raise invalid(f"Invalid integer: {value}", param=param, code="parameter_invalid_integer") from None
    return number


def _chargeable(amount: int, currency: str) -> None:
    """Stripe's refusals of an amount, from its documented table (``racecap.money``): under the
    currency's minimum (in its API unit: cents, or yen for a zero-decimal currency), over eight
    digits, or a three-decimal amount not ending in 0. A currency the table has no minimum for
    is held to 50 units, the stand-in's stand-in for "the equivalent of 0.50 USD"."""
    least = money.minimum_charge(currency) or money.MINIMUM_CHARGE["USD"]
    if amount < least:
        shown = f"{money.in_units(least, currency)} {currency}"
        raise invalid(f"Amount must be at least {shown}", param="amount", code="amount_too_small")
    if amount > money.MAXIMUM_CHARGE:
        raise invalid(
            f"Amount must be no more than {money.in_units(money.MAXIMUM_CHARGE, currency)} {currency}",
            param="amount",
            code="amount_too_large",
        )
    if currency.upper() in money.THREE_DECIMAL and amount % 10:
        raise invalid(
            f"Amounts in {currency} must be divisible by 10 (rounded to the hundredth).",
            param="amount",
            code="parameter_invalid_integer",
        )


def _metadata(value: Any) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise invalid("Invalid metadata: must be a hash.", param="metadata", code="parameter_invalid")
    if len(value) > 50:
        raise invalid("Metadata can have at most 50 keys.", param="metadata", code="parameter_invalid")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, str) or len(str(key)) > 40 or len(item) > 500:
            raise invalid(f"Invalid metadata value for {key}.", param=f"metadata[{key}]", code="parameter_invalid")
        out[str(key)] = item
    return out


class Book:
    def __init__(self, on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self._lock = threading.RLock()
        self.intents: dict[str, dict[str, Any]] = {}
        self.charges: dict[str, dict[str, Any]] = {}
        self.refunds: dict[str, dict[str, Any]] = {}
        self.disputes: dict[str, dict[str, Any]] = {}
        self.payment_methods: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []  # oldest first
        self.on_event = on_event
        self.refund_settle_s = REFUND_SETTLE_S

    # -- events ------------------------------------------------------------------------------
    def _emit(self, type_: str, obj: dict[str, Any], request: dict[str, Any] | None = None) -> None:
        event = {
            "id": _id("evt"),
            "object": "event",
            "api_version": API_VERSION,
            "created": int(time.time()),
            "data": {"object": _copy(obj)},
            "livemode": False,
            "pending_webhooks": 1,
            "request": request or {"id": None, "idempotency_key": None},
            "type": type_,
        }
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    # -- payment methods ---------------------------------------------------------------------
    def _payment_method(self, ref: Any, data: Any) -> dict[str, Any]:
        """A PaymentMethod from a test id (pm_card_visa), an id made earlier, or card data."""
        if isinstance(ref, str) and ref:
            if ref in self.payment_methods:
                return self.payment_methods[ref]
            if ref in TEST_PAYMENT_METHODS:
                return self._card_method(TEST_PAYMENT_METHODS[ref], 12, 2034)
            raise missing("PaymentMethod", ref, "payment_method")
        if isinstance(data, dict) and data.get("type") == "card" and isinstance(data.get("card"), dict):
            card = data["card"]
            number = re.sub(r"\s+", "", str(card.get("number", "")))
            if not number.isdigit() or not 12 <= len(number) <= 19 or not luhn_ok(number):
                raise ApiError(402, "card_error", "Your card number is incorrect.", code="incorrect_number")
            month = _as_int(card.get("exp_month", ""), "payment_method_data[card][exp_month]")
            year = _as_int(card.get("exp_year", ""), "payment_method_data[card][exp_year]")
            if year < 100:
                year += 2000
            now = time.gmtime()
            if not 1 <= month <= 12 or (year, month) < (now.tm_year, now.tm_mon):
                raise ApiError(402, "card_error", "Your card's expiration date is invalid.", code="invalid_expiry_year")
            cvc = str(card.get("cvc", ""))
            if not cvc.isdigit() or len(cvc) not in (3, 4):
                raise ApiError(402, "card_error", "Your card's security code is invalid.", code="invalid_cvc")
            return self._card_method(number, month, year)
        raise invalid("You must provide a payment_method or payment_method_data to confirm.", param="payment_method")

    def _card_method(self, number: str, month: int, year: int) -> dict[str, Any]:
        card = TEST_CARDS.get(number)
        pm: dict[str, Any] = {
            "id": _id("pm"),
            "object": "payment_method",
            "type": "card",
            "card": {
                "brand": card.brand if card else "visa",
                "last4": number[-4:],
                "exp_month": month,
                "exp_year": year,
                "funding": "credit",
            },
            "created": int(time.time()),
            # What the card does; private (``_copy`` drops it), as is the number, never stored.
            "_outcome": card.outcome if card else DECLINED,
            "_refund": card.refund if card else REFUND_SUCCEEDS,
        }
        self.payment_methods[pm["id"]] = pm
        return pm

    # -- PaymentIntents ----------------------------------------------------------------------
    def create_intent(self, p: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        amount = _as_int(p.get("amount", ""), "amount") if "amount" in p else None
        if amount is None:
            raise invalid("Missing required param: amount.", param="amount", code="parameter_missing")
        currency = str(p.get("currency", "")).lower()
        if not re.fullmatch(r"[a-z]{3}", currency):
            raise invalid(f"Invalid currency: {currency}.", param="currency", code="parameter_invalid")
        _chargeable(amount, currency)
        types = p.get("payment_method_types") or ["card"]
        if types != ["card"]:
            raise invalid("The stand-in supports only payment_method_types=['card'].", param="payment_method_types")
        description = p.get("description")
        if description is not None and len(str(description)) > 1000:
            raise invalid("Invalid description.", param="description")
        with self._lock:
            # An unknown payment method is refused before anything exists, as Stripe does.
            pm = self._payment_method(p["payment_method"], None) if p.get("payment_method") else None
            pi_id = _id("pi")
            intent = {
                "id": pi_id,
                "object": "payment_intent",
                "amount": amount,
                "amount_received": 0,
                "capture_method": "automatic",
                "canceled_at": None,
                "cancellation_reason": None,
                "client_secret": f"{pi_id}_secret_{secrets.token_urlsafe(18)}",
                "confirmation_method": "automatic",
                "created": int(time.time()),
                "currency": currency,
                "description": description,
                "last_payment_error": None,
                "latest_charge": None,
                "livemode": False,
                "metadata": _metadata(p.get("metadata")),
                "next_action": None,
                "payment_method": None,
                "payment_method_types": ["card"],
                "status": "requires_payment_method",
            }
            self.intents[pi_id] = intent
            self._emit("payment_intent.created", intent, request)
            if pm is not None:
                intent["payment_method"] = pm["id"]
                intent["status"] = "requires_confirmation"
            if str(p.get("confirm", "false")).lower() == "true":
                return self.confirm_intent(pi_id, {k: v for k, v in p.items() if k == "return_url"}, request)
            return _copy(intent)

    def intent(self, pi_id: str) -> dict[str, Any]:
        with self._lock:
            intent = self.intents.get(pi_id)
            if intent is None:
                raise missing("payment_intent", pi_id)
            return _copy(intent)

    def confirm_intent(self, pi_id: str, p: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            intent = self._live_intent(pi_id)
            if intent["status"] not in CONFIRMABLE:
                raise ApiError(
                    400,
                    "invalid_request_error",
                    f"This PaymentIntent's status is {intent['status']}; it cannot be confirmed.",
                    code="payment_intent_unexpected_state",
                    payment_intent=_copy(intent),
                )
            if p.get("payment_method") or p.get("payment_method_data"):
                pm = self._payment_method(p.get("payment_method"), p.get("payment_method_data"))
            elif intent["payment_method"]:
                pm = self.payment_methods[intent["payment_method"]]
            else:
                raise invalid(
                    "You cannot confirm this PaymentIntent because it's missing a payment method.",
                    param="payment_method",
                    code="payment_intent_unexpected_state",
                )
            intent["payment_method"] = pm["id"]
            intent["last_payment_error"] = None
            if pm["_outcome"] == THREE_DS:
                intent["status"] = "requires_action"
                intent["next_action"] = {
                    "type": "use_stripe_sdk",
                    "use_stripe_sdk": {"type": "three_d_secure_redirect", "stripe_js": f"/3ds/{pi_id}"},
                }
                self._emit("payment_intent.requires_action", intent, request)
                return _copy(intent)
            return self._charge(intent, pm, request)

    def _charge(self, intent: dict[str, Any], pm: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        outcome = pm["_outcome"]
        ok = outcome == SUCCEEDS
        charge = {
            "id": _id("ch"),
            "object": "charge",
            "amount": intent["amount"],
            "amount_refunded": 0,
            "captured": ok,
            "created": int(time.time()),
            "currency": intent["currency"],
            "disputed": False,
            "failure_code": None if ok else "card_declined",
            "failure_message": None if ok else "Your card was declined.",
            "metadata": dict(intent["metadata"]),
            "outcome": {"type": "authorized" if ok else "issuer_declined", "reason": None if ok else outcome},
            "paid": ok,
            "payment_intent": intent["id"],
            "payment_method": pm["id"],
            "refunded": False,
            "status": "succeeded" if ok else "failed",
            "_refund": pm.get("_refund", REFUND_SUCCEEDS),
        }
        self.charges[charge["id"]] = charge
        intent["latest_charge"] = charge["id"]
        intent["next_action"] = None
        if ok:
            intent["status"] = "succeeded"
            intent["amount_received"] = intent["amount"]
            self._emit("charge.succeeded", charge, request)
            self._emit("payment_intent.succeeded", intent, request)
            return _copy(intent)
        message = "Your card has insufficient funds." if outcome == INSUFFICIENT else "Your card was declined."
        error = {
            "type": "card_error",
            "code": "card_declined",
            "decline_code": outcome,
            "message": message,
            "charge": charge["id"],
            "payment_method": {k: v for k, v in pm.items() if not k.startswith("_")},
        }
        intent["status"] = "requires_payment_method"
        intent["last_payment_error"] = error
        self._emit("charge.failed", charge, request)
        self._emit("payment_intent.payment_failed", intent, request)
        raise ApiError(
            402,
            "card_error",
            message,
            code="card_declined",
            decline_code=outcome,
            charge=charge["id"],
            payment_intent=_copy(intent),
        )

    def authenticate(self, pi_id: str, approve: bool) -> dict[str, Any]:
        """The 3-D Secure challenge's answer (the bank's page, in Stripe's world)."""
        with self._lock:
            intent = self._live_intent(pi_id)
            if intent["status"] != "requires_action":
                raise invalid(
                    f"This PaymentIntent's status is {intent['status']}.", code="payment_intent_unexpected_state"
                )
            pm = self.payment_methods[intent["payment_method"]]
            if approve:
                return self._charge(intent, {**pm, "_outcome": SUCCEEDS}, {"id": None, "idempotency_key": None})
            intent["status"] = "requires_payment_method"
            intent["next_action"] = None
            intent["last_payment_error"] = {
                "type": "invalid_request_error",
                "code": "payment_intent_authentication_failure",
                "message": "We are unable to authenticate your payment method. Please choose a different "
                "payment method and try again.",
                "payment_method": {k: v for k, v in pm.items() if not k.startswith("_")},
            }
            self._emit("payment_intent.payment_failed", intent)
            return _copy(intent)

    def update_intent(self, pi_id: str, p: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        """Stripe's update (``POST /v1/payment_intents/:id``), the parameters Racecap may send:
        ``amount`` (only while the intent can still be paid, and chargeable: the minimums),
        ``description`` and ``metadata`` (merged; an empty value deletes its key)."""
        unknown = sorted(set(p) - UPDATABLE_PARAMS)
        if unknown:
            raise invalid(f"Received unknown parameter: {unknown[0]}", param=unknown[0])
        with self._lock:
            intent = self._live_intent(pi_id)
            if "amount" in p:
                amount = _as_int(p["amount"], "amount")
                if intent["status"] not in AMOUNT_UPDATABLE:
                    raise ApiError(
                        400,
                        "invalid_request_error",
                        f"This PaymentIntent's amount could not be updated because it has a status of "
                        f"{intent['status']}. You may only update the amount of a PaymentIntent with one of the "
                        "following statuses: requires_payment_method, requires_confirmation, requires_action.",
                        code="payment_intent_unexpected_state",
                        payment_intent=_copy(intent),
                    )
                _chargeable(amount, intent["currency"])
                intent["amount"] = amount
                if intent["status"] == "requires_action":
                    # The authentication was for the old amount: the payment is confirmed again.
                    intent.update(status="requires_confirmation", next_action=None)
            if "description" in p:
                intent["description"] = p["description"] or None
            if "metadata" in p:
                merged = {**intent["metadata"], **_metadata(p["metadata"])}
                intent["metadata"] = {k: v for k, v in merged.items() if v != ""}
            return _copy(intent)

    def cancel_intent(self, pi_id: str, p: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        reason = p.get("cancellation_reason")
        if reason not in (None, "duplicate", "fraudulent", "requested_by_customer", "abandoned"):
            raise invalid(f"Invalid cancellation_reason: {reason}", param="cancellation_reason")
        with self._lock:
            intent = self._live_intent(pi_id)
            if intent["status"] not in CANCELABLE:
                raise ApiError(
                    400,
                    "invalid_request_error",
                    f"You cannot cancel this PaymentIntent because it has a status of {intent['status']}. "
                    "Only a PaymentIntent with one of the following statuses may be canceled: "
                    "requires_payment_method, requires_capture, requires_confirmation, requires_action, processing.",
                    code="payment_intent_unexpected_state",
                    payment_intent=_copy(intent),
                )
            intent.update(status="canceled", canceled_at=int(time.time()), cancellation_reason=reason, next_action=None)
            self._emit("payment_intent.canceled", intent, request)
            return _copy(intent)

    def _live_intent(self, pi_id: str) -> dict[str, Any]:
        intent = self.intents.get(pi_id)
        if intent is None:
            raise missing("payment_intent", pi_id, "intent")
        return intent

    def list_intents(self) -> list[dict[str, Any]]:
        with self._lock:
            return [_copy(i) for i in reversed(self.intents.values())]  # newest first, as Stripe lists

    def search_intents(self, query: str) -> list[dict[str, Any]]:
        clauses = _parse_query(query)
        with self._lock:
            return [
                _copy(i)
                for i in reversed(self.intents.values())
                if all(
                    (i["metadata"].get(key[9:]) if key.startswith("metadata:") else str(i.get(key))) == value
                    for key, value in clauses
                )
            ]

    # -- refunds and disputes ----------------------------------------------------------------
    def refund(self, p: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
        reason = p.get("reason")
        if reason is not None and reason not in REFUND_REASONS:
            raise invalid(f"Invalid reason: must be one of {', '.join(REFUND_REASONS)}", param="reason")
        with self._lock:
            if p.get("payment_intent"):
                intent = self._live_intent(str(p["payment_intent"]))
                charge = self.charges.get(intent["latest_charge"] or "")
                if charge is None or charge["status"] != "succeeded":
                    raise invalid(
                        f"This PaymentIntent ({intent['id']}) does not have a successful charge to refund.",
                        param="payment_intent",
                        code="charge_not_refundable" if charge else "resource_missing",
                    )
            elif p.get("charge"):
                charge = self.charges.get(str(p["charge"]))
                if charge is None:
                    raise missing("charge", str(p["charge"]), "charge")
            else:
                raise invalid(
                    "One of the following params should be provided for this request: payment_intent or charge.",
                    code="parameter_missing",
                )
            remaining = charge["amount"] - charge["amount_refunded"]
            if charge["refunded"] or remaining <= 0:
                raise invalid(f"Charge {charge['id']} has already been refunded.", code="charge_already_refunded")
            amount = _as_int(p["amount"], "amount") if "amount" in p else remaining
            if not 0 < amount <= remaining:
                raise invalid(
                    f"Refund amount ({amount}) is greater than unrefunded amount on charge ({remaining})",
                    param="amount",
                    code="amount_too_large",
                )
            refund = {
                "id": _id("re"),
                "object": "refund",
                "amount": amount,
                "charge": charge["id"],
                "created": int(time.time()),
                "currency": charge["currency"],
                "metadata": _metadata(p.get("metadata")),
                "payment_intent": charge["payment_intent"],
                "reason": reason,
                "status": "pending" if charge["_refund"] == REFUND_PENDING else "succeeded",
                "failure_reason": None,
            }
            self.refunds[refund["id"]] = refund
            charge["amount_refunded"] += amount
            charge["refunded"] = charge["amount_refunded"] >= charge["amount"]
            self._emit("refund.created", refund, request)
            self._emit("charge.refunded", charge, request)
            if charge["_refund"] != REFUND_SUCCEEDS:
                later = threading.Timer(self.refund_settle_s, self._settle_refund, args=(refund["id"],))
                later.daemon = True
                later.start()
            return _copy(refund)

    def _settle_refund(self, re_id: str) -> None:
        """Some time later: a pending refund succeeds; the failing card's refund fails, its
        amount back on the charge (Stripe's refund test cards)."""
        with self._lock:
            refund = self.refunds[re_id]
            charge = self.charges[refund["charge"]]
            if charge["_refund"] == REFUND_PENDING and refund["status"] == "pending":
                refund["status"] = "succeeded"
            elif charge["_refund"] == REFUND_FAILS and refund["status"] == "succeeded":
                refund["status"] = "failed"
                refund["failure_reason"] = "expired_or_canceled_card"
                charge["amount_refunded"] -= refund["amount"]
                charge["refunded"] = False
                self._emit("refund.failed", refund)
            else:
                return
            self._emit("charge.refund.updated", refund)
            self._emit("refund.updated", refund)

    def list_refunds(self, payment_intent: str | None) -> list[dict[str, Any]]:
        """Newest first, as Stripe lists them; of one PaymentIntent's charges when named."""
        with self._lock:
            return [
                _copy(r)
                for r in reversed(self.refunds.values())
                if payment_intent is None or r["payment_intent"] == payment_intent
            ]

    def refund_by_id(self, re_id: str) -> dict[str, Any]:
        with self._lock:
            refund = self.refunds.get(re_id)
            if refund is None:
                raise missing("refund", re_id)
            return _copy(refund)

    def dispute(self, pi_id: str, reason: str = "fraudulent") -> dict[str, Any]:
        """A cardholder's dispute (test mode: card 4000 0000 0000 0259 does this by itself)."""
        with self._lock:
            intent = self._live_intent(pi_id)
            charge = self.charges.get(intent["latest_charge"] or "")
            if charge is None or charge["status"] != "succeeded":
                raise invalid("Only a succeeded charge can be disputed.", code="charge_not_disputable")
            dispute = {
                "id": _id("dp"),
                "object": "dispute",
                "amount": charge["amount"],
                "charge": charge["id"],
                "created": int(time.time()),
                "currency": charge["currency"],
                "payment_intent": intent["id"],
                "reason": reason,
                "status": "needs_response",
            }
            self.disputes[dispute["id"]] = dispute
            charge["disputed"] = True
            self._emit("charge.dispute.created", dispute)
            return _copy(dispute)

    # -- events ------------------------------------------------------------------------------
    def list_events(self, types: Iterable[str] | None, created: dict[str, Any] | None) -> list[dict[str, Any]]:
        wanted = set(types or ())
        bounds = {k: _as_int(v, f"created[{k}]") for k, v in (created or {}).items()}
        tests = {"gte": int.__ge__, "gt": int.__gt__, "lte": int.__le__, "lt": int.__lt__}
        with self._lock:
            return [
                _copy(e)
                for e in reversed(self.events)
                if (not wanted or e["type"] in wanted)
                and all(tests[op](e["created"], bound) for op, bound in bounds.items() if op in tests)
            ]

    def event(self, evt_id: str) -> dict[str, Any]:
        with self._lock:
            for e in self.events:
                if e["id"] == evt_id:
                    return _copy(e)
        raise missing("event", evt_id)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            statuses: dict[str, int] = {}
            for i in self.intents.values():
                statuses[i["status"]] = statuses.get(i["status"], 0) + 1
            return {
                "intents": len(self.intents),
                "intentStatuses": statuses,
                "charges": len(self.charges),
                "succeededCharges": sum(c["status"] == "succeeded" for c in self.charges.values()),
                "refunds": len(self.refunds),
                "disputes": len(self.disputes),
                "events": len(self.events),
            }


_CLAUSE = re.compile(r"\s*(metadata\[['\"]([^'\"]+)['\"]\]|status)\s*:\s*['\"]([^'\"]*)['\"]\s*")


def _parse_query(query: str) -> list[tuple[str, str]]:
    """Stripe's search language, the part Racecap uses: exact-match clauses joined by AND."""
    clauses: list[tuple[str, str]] = []
    for part in re.split(r"\s+AND\s+", query.strip()):
        m = _CLAUSE.fullmatch(part)
        if m is None:
            raise invalid(f"Invalid search query: {query!r}.", param="query", code="parameter_invalid")
        clauses.append((f"metadata:{m.group(2)}" if m.group(2) else "status", m.group(3)))
    return clauses


def _copy(obj: Any) -> Any:
    """A deep copy without the stand-in's private fields (``_outcome``)."""
    if isinstance(obj, dict):
        return {k: _copy(v) for k, v in obj.items() if not k.startswith("_")}
    if isinstance(obj, list):
        return [_copy(v) for v in obj]
    return obj
