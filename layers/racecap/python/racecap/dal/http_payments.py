"""TEMPORARY: the payment port over the local Charges-style server (``local/payments.py``).

Until the payments work moves to Stripe PaymentIntents (``stripe_provider``), the server
keeps today's behaviour through the port: ``create_intent(..., payment_method=token,
confirm=True)`` is one keyed ``POST /v1/charges``, and a charge reads as an intent whose id
is the charge's id. What a Charges API cannot express — an intent confirmed later, a
cancel, the events list, webhooks — raises ``NotImplementedError`` (the contract suite
lists these as capabilities this adapter lacks).

``ChargesClient`` is the wire client (retries with the SAME key and jittered backoff on
connection errors, timeouts, 429 and 5xx). Only ``urllib3`` is used (it ships with
botocore in every Lambda Python runtime), and only the API common to urllib3 1.26 and 2.x.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlencode

import urllib3

from racecap.dal.payments import (
    AlreadyRefunded,
    IntentNotCancelable,
    IntentStatus,
    PaymentIntent,
    PaymentRateLimited,
    PaymentRejected,
    PaymentUnavailable,
    ProviderEvent,
    Refund,
)
from racecap.observability import logger

ChargeStatus = Literal["succeeded", "declined"]


@dataclass(frozen=True)
class Charge:
    id: str
    status: ChargeStatus
    amount_cents: int
    currency: str
    idempotency_key: str
    decline_reason: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@dataclass(frozen=True)
class ChargeRefund:
    id: str
    charge_id: str
    amount_cents: int
    status: Literal["succeeded"]


class InvalidPaymentToken(PaymentRejected):
    """The runner's payment token is unknown to the provider (``invalid_token``)."""


class IdempotencyKeyReused(PaymentRejected):
    """The key was already used with different parameters: a bug in the caller's keys."""


class ChargeAlreadyRefunded(AlreadyRefunded):
    """The charge was already refunded under another idempotency key."""


_REJECTIONS: dict[str, type[PaymentRejected]] = {
    "invalid_token": InvalidPaymentToken,
    "idempotency_key_reused": IdempotencyKeyReused,
    "charge_already_refunded": ChargeAlreadyRefunded,
}
# Codes that mean "try again later" even though the status is 4xx (Stripe answers 409
# idempotency_key_in_use while a request with the same key is still in flight).
_RETRYABLE_CODES = frozenset({"idempotency_key_in_use", "lock_timeout", "rate_limit"})


class ChargesClient:
    """``POST /v1/charges``, ``GET /v1/charges[?idempotency_key=]``, ``POST /v1/refunds``.
    Thread-safe; create once per execution environment."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "sk_test_local",
        timeout_s: float = 10.0,
        retries: int = 3,
        *,
        backoff_s: float = 0.2,
        max_backoff_s: float = 2.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"payments base URL must be http(s): {base_url!r}")
        self._base = base_url.rstrip("/")
        self._api_key = api_key
        self._retries = max(0, retries)
        self._backoff = backoff_s
        self._max_backoff = max_backoff_s
        self._timeout = urllib3.Timeout(connect=min(timeout_s, 3.0), read=timeout_s)
        self._http = urllib3.PoolManager(num_pools=2, maxsize=32, block=False, retries=False)

    def charge(
        self,
        *,
        amount_cents: int,
        currency: str,
        token: str,
        idempotency_key: str,
        description: str,
        metadata: Mapping[str, str],
    ) -> Charge:
        if amount_cents <= 0:
            raise ValueError("amount_cents must be positive")
        body = {
            "amount": amount_cents,
            "currency": currency,
            "source": token,
            "description": description,
            "metadata": dict(metadata),
        }
        data = self._call("POST", "/v1/charges", body, idempotency_key=idempotency_key, decline_ok=True)
        err = data.get("error")
        if "id" not in data and isinstance(err, dict):  # Stripe's decline shape: an error naming the charge
            return Charge(
                id=str(err["charge"]),
                status="declined",
                amount_cents=amount_cents,
                currency=currency,
                idempotency_key=idempotency_key,
                decline_reason=str(err.get("decline_code") or err.get("code") or "card_declined"),
                metadata=dict(metadata),
            )
        return _charge(data, idempotency_key)

    def find_charge(self, idempotency_key: str) -> Charge | None:
        """For crash recovery: the charge made under this key, if any (declined ones too)."""
        _require_key(idempotency_key)
        found = self._list(f"/v1/charges?{urlencode({'idempotency_key': idempotency_key})}")
        return _charge(found[0], idempotency_key) if found else None

    def all_charges(self) -> list[Charge]:
        return [_charge(c, str(c.get("idempotency_key") or "")) for c in self._list("/v1/charges")]

    def refund(self, *, charge_id: str, idempotency_key: str) -> ChargeRefund:
        data = self._call("POST", "/v1/refunds", {"charge": charge_id}, idempotency_key=idempotency_key)
        try:
            return ChargeRefund(
                id=str(data["id"]), charge_id=str(data["charge"]), amount_cents=int(data["amount"]), status="succeeded"
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PaymentUnavailable(f"unreadable refund from the payment provider: {exc}") from exc

    # -- transport ------------------------------------------------------------------------
    def _list(self, path: str) -> list[dict[str, Any]]:
        found = self._call("GET", path, None).get("data")
        if not isinstance(found, list):
            raise PaymentUnavailable("unreadable charge list from the payment provider")
        return found

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        idempotency_key: str | None = None,
        decline_ok: bool = False,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self._api_key}", "Accept": "application/json", "User-Agent": "racecap/1"}
        payload: bytes | None = None
        if body is not None:
            payload = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        if method == "POST":
            # Every mutating call is keyed; the key is what makes the retries below safe.
            headers["Idempotency-Key"] = _require_key(idempotency_key)
        url = self._base + path
        last_error = "no attempt made"
        retry_after: float | None = None
        rate_limited = False
        for attempt in range(self._retries + 1):
            if attempt:
                time.sleep(self._delay(attempt, retry_after))
            retry_after, rate_limited = None, False
            try:
                resp = self._http.request(
                    method, url, body=payload, headers=headers, timeout=self._timeout, retries=False
                )
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                # Connection refused/reset, timeout: the request may or may not have landed.
                last_error = f"{type(exc).__name__}: {exc}"
                self._log_retry(method, path, attempt, last_error)
                continue
            status = resp.status
            data = _json(resp.data)
            if 200 <= status < 300 or (decline_ok and status == 402 and _is_decline(data)):
                if data is None:
                    # It may have charged and we cannot read how: the outcome is unknown.
                    raise PaymentUnavailable(f"unreadable {status} answer from the payment provider")
                return data
            code, message = _error(data)
            if status == 429 or status >= 500 or code in _RETRYABLE_CODES:
                retry_after = _retry_after(resp.headers.get("Retry-After"))
                rate_limited = status == 429
                last_error = f"HTTP {status} {code}"
                self._log_retry(method, path, attempt, last_error)
                continue
            raise _REJECTIONS.get(code, PaymentRejected)(code, message, status)
        message = f"payment provider unavailable after {self._retries + 1} attempts ({last_error})"
        if rate_limited:
            raise PaymentRateLimited(message, retry_after=retry_after or self._max_backoff)
        raise PaymentUnavailable(message)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self._max_backoff, self._backoff * 2 ** (attempt - 1))
        delay = random.uniform(ceiling / 2, ceiling)  # "equal jitter": spread, never zero
        if retry_after is not None:
            delay = max(delay, min(retry_after, self._max_backoff))
        return delay

    def _log_retry(self, method: str, path: str, attempt: int, error: str) -> None:
        logger.warning(
            "payment provider call failed",
            extra={"method": method, "path": path.split("?", 1)[0], "attempt": attempt + 1, "error": error},
        )


class HttpPaymentProvider:
    """The payment port over ``ChargesClient`` (see the module doc for what it lacks)."""

    def __init__(
        self, base_url: str, api_key: str = "sk_test_local", timeout_s: float = 10.0, retries: int = 3
    ) -> None:
        self.charges = ChargesClient(base_url, api_key, timeout_s, retries)

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
        if not (confirm and payment_method):
            raise NotImplementedError("the Charges-style provider only creates intents confirmed at once")
        charge = self.charges.charge(
            amount_cents=amount_cents,
            currency=currency,
            token=payment_method,
            idempotency_key=idempotency_key,
            description=description,
            metadata=metadata,
        )
        return _intent(charge)

    def retrieve_intent(self, intent_id: str) -> PaymentIntent:
        for charge in self.charges.all_charges():
            if charge.id == intent_id:
                return _intent(charge)
        raise PaymentRejected("resource_missing", f"No such payment intent: {intent_id!r}", 404)

    def confirm_intent(self, intent_id: str, *, payment_method: str, idempotency_key: str) -> PaymentIntent:
        raise NotImplementedError("the Charges-style provider confirms when it creates")

    def cancel_intent(self, intent_id: str, *, idempotency_key: str) -> PaymentIntent:
        intent = self.retrieve_intent(intent_id)
        if intent.status == IntentStatus.SUCCEEDED:
            raise IntentNotCancelable(intent)
        raise NotImplementedError("a charge cannot be cancelled; a declined one never takes money")

    def find_intents(self, *, hold_id: str) -> list[PaymentIntent]:
        return [_intent(c) for c in self.charges.all_charges() if c.metadata.get("holdId") == hold_id]

    def refund(self, *, intent_id: str, idempotency_key: str, reason: str | None = None) -> Refund:
        refund = self.charges.refund(charge_id=intent_id, idempotency_key=idempotency_key)
        return Refund(id=refund.id, intent_id=intent_id, amount_cents=refund.amount_cents, status=refund.status)

    def list_events(self, *, types: Sequence[str], created_after: int) -> Iterator[ProviderEvent]:
        raise NotImplementedError("the Charges-style provider has no events list")

    def parse_webhook(self, payload: bytes, signature_header: str | None) -> ProviderEvent:
        raise NotImplementedError("the Charges-style provider sends no webhooks")


def _intent(charge: Charge) -> PaymentIntent:
    succeeded = charge.status == "succeeded"
    return PaymentIntent(
        id=charge.id,
        status=IntentStatus.SUCCEEDED if succeeded else IntentStatus.REQUIRES_PAYMENT_METHOD,
        amount_cents=charge.amount_cents,
        currency=charge.currency.lower(),
        metadata=dict(charge.metadata),
        latest_charge=charge.id,
        decline_code=None if succeeded else (charge.decline_reason or "card_declined"),
    )


def _require_key(key: str | None) -> str:
    if not key or not key.strip():
        raise ValueError("an idempotency key is required")
    return key


def _json(raw: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(raw or b"null")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _is_decline(data: dict[str, Any] | None) -> bool:
    """A 402 that names its charge: the charge object itself (the local provider), or
    Stripe's ``{"error": {"type": "card_error", "charge": "ch_..."}}``."""
    if data is None:
        return False
    if isinstance(data.get("id"), str) and "status" in data:
        return True
    err = data.get("error")
    return isinstance(err, dict) and isinstance(err.get("charge"), str)


def _error(data: dict[str, Any] | None) -> tuple[str, str]:
    err = (data or {}).get("error")
    if isinstance(err, dict):
        return str(err.get("code") or err.get("type") or "unknown"), str(err.get("message") or "")
    return "unknown", ""


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _charge(data: dict[str, Any], requested_key: str) -> Charge:
    status = data.get("status")
    if status == "succeeded":
        outcome: ChargeStatus = "succeeded"
    elif status in ("declined", "failed"):
        outcome = "declined"
    else:
        # e.g. "pending": neither paid nor declined, so the caller must not decide yet.
        raise PaymentUnavailable(f"charge {data.get('id')!r} is {status!r}, neither succeeded nor declined")
    try:
        return Charge(
            id=str(data["id"]),
            status=outcome,
            amount_cents=int(data["amount"]),
            currency=str(data["currency"]),
            idempotency_key=str(data.get("idempotency_key") or requested_key),
            decline_reason=(data.get("decline_code") or data.get("failure_code")) if outcome == "declined" else None,
            metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PaymentUnavailable(f"unreadable charge from the payment provider: {exc}") from exc
