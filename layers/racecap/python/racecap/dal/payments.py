"""Payments: the provider port and its HTTP adapter (a Stripe-shaped JSON API).

The one rule is *never charge a card twice*. Every charge and refund carries an
``Idempotency-Key`` chosen by the caller (derived from the registration, never random per
attempt); the provider stores the outcome under that key and replays it for any repeat.
So the adapter may retry freely — connection errors, timeouts, 429 and 5xx are retried
with the SAME key and jittered backoff — and a caller that crashed mid-charge can call
``charge`` again with the same key, or ask ``find_charge`` whether the attempt charged.

Outcomes:

* ``Charge(status="succeeded")`` — paid.
* ``Charge(status="declined")`` — a normal result (HTTP 402 from the provider), not an
  exception. Nothing was taken.
* ``PaymentRejected`` and subclasses — the provider refused the request itself (bad token,
  key reused with other parameters, already refunded, ...). Nothing was charged by it.
* ``PaymentUnavailable`` — unreachable / 5xx after every retry, or an answer we could
  not read. The card MAY have been charged: never treat this as declined; retry later with
  the same key, or ask ``find_charge``.

Only ``urllib3`` is used (it ships with botocore in every Lambda Python runtime), and only
the API common to urllib3 1.26 and 2.x.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlencode

import urllib3

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

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@dataclass(frozen=True)
class Refund:
    id: str
    charge_id: str
    amount_cents: int
    status: Literal["succeeded"]


class PaymentProvider(Protocol):
    def charge(
        self,
        *,
        amount_cents: int,
        currency: str,
        token: str,
        idempotency_key: str,
        description: str,
        metadata: dict[str, str],
    ) -> Charge: ...

    def find_charge(self, idempotency_key: str) -> Charge | None:
        """For crash recovery: the charge made under this key, if any (declined ones too)."""
        ...

    def refund(self, *, charge_id: str, idempotency_key: str) -> Refund: ...


class PaymentUnavailable(Exception):
    """Provider unreachable, 5xx after retries, or an unreadable answer.

    The outcome is UNKNOWN: the card may have been charged. Do not assume declined.
    Deliberately not a ``PaymentRejected``, so ``except PaymentRejected`` cannot swallow it.
    """


class PaymentRejected(Exception):
    """The provider refused the request (4xx other than a decline); it charged nothing."""

    def __init__(self, code: str, message: str, http_status: int) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.http_status = http_status


class InvalidPaymentToken(PaymentRejected):
    """The runner's payment token is unknown to the provider (``invalid_token``)."""


class IdempotencyKeyReused(PaymentRejected):
    """The key was already used with different parameters: a bug in the caller's keys."""


class ChargeAlreadyRefunded(PaymentRejected):
    """The charge was already refunded under another idempotency key."""


_REJECTIONS: dict[str, type[PaymentRejected]] = {
    "invalid_token": InvalidPaymentToken,
    "idempotency_key_reused": IdempotencyKeyReused,
    "charge_already_refunded": ChargeAlreadyRefunded,
}
# Codes that mean "try again later" even though the status is 4xx (Stripe answers 409
# idempotency_key_in_use while a request with the same key is still in flight).
_RETRYABLE_CODES = frozenset({"idempotency_key_in_use", "lock_timeout", "rate_limit"})


class HttpPaymentProvider:
    """The provider over HTTP: ``POST /v1/charges``, ``GET /v1/charges?idempotency_key=``,
    ``POST /v1/refunds``. Thread-safe; create once per execution environment."""

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

    # -- the port ---------------------------------------------------------------------------
    def charge(
        self,
        *,
        amount_cents: int,
        currency: str,
        token: str,
        idempotency_key: str,
        description: str,
        metadata: dict[str, str],
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
            )
        return _charge(data, idempotency_key)

    def find_charge(self, idempotency_key: str) -> Charge | None:
        _require_key(idempotency_key)
        query = urlencode({"idempotency_key": idempotency_key})
        data = self._call("GET", f"/v1/charges?{query}", None)
        found = data.get("data")
        if not isinstance(found, list):
            raise PaymentUnavailable("unreadable charge list from the payment provider")
        return _charge(found[0], idempotency_key) if found else None

    def refund(self, *, charge_id: str, idempotency_key: str) -> Refund:
        data = self._call("POST", "/v1/refunds", {"charge": charge_id}, idempotency_key=idempotency_key)
        try:
            return Refund(
                id=str(data["id"]),
                charge_id=str(data["charge"]),
                amount_cents=int(data["amount"]),
                status="succeeded",
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PaymentUnavailable(f"unreadable refund from the payment provider: {exc}") from exc

    # -- transport ------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        idempotency_key: str | None = None,
        decline_ok: bool = False,
    ) -> dict[str, Any]:
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": "racecap/1",
        }
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
        for attempt in range(self._retries + 1):
            if attempt:
                time.sleep(self._delay(attempt, retry_after))
            retry_after = None
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
                last_error = f"HTTP {status} {code}"
                self._log_retry(method, path, attempt, last_error)
                continue
            raise _REJECTIONS.get(code, PaymentRejected)(code, message, status)
        raise PaymentUnavailable(f"payment provider unavailable after {self._retries + 1} attempts ({last_error})")

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
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PaymentUnavailable(f"unreadable charge from the payment provider: {exc}") from exc


__all__ = [
    "Charge",
    "ChargeAlreadyRefunded",
    "HttpPaymentProvider",
    "IdempotencyKeyReused",
    "InvalidPaymentToken",
    "PaymentProvider",
    "PaymentRejected",
    "PaymentUnavailable",
    "Refund",
]
