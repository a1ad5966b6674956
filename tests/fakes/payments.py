"""An in-memory ``PaymentProvider`` with the local provider's semantics.

Same test tokens as ``local.payments`` (``tok_visa`` succeeds, ``tok_declined`` is
declined, ``tok_slow`` succeeds — after ``slow_seconds``, 0 by default — and any other
token raises ``InvalidPaymentToken``), and the same idempotency rules: a key replays its
first outcome for the same parameters, raises ``IdempotencyKeyReused`` for different ones,
and never makes a second charge. Faults, to prove callers recover:

* ``fail_next = N`` — the next N charge calls raise ``PaymentUnavailable`` before doing
  anything;
* ``fail_after_charge_next = N`` — the next N new charges are recorded, then
  ``PaymentUnavailable`` is raised (charged, but the caller did not hear).

Thread-safe (a per-key lock like the server), so concurrency tests can use it too.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field

from racecap.dal.payments import (
    Charge,
    ChargeAlreadyRefunded,
    IdempotencyKeyReused,
    InvalidPaymentToken,
    PaymentRejected,
    PaymentUnavailable,
    Refund,
)

TOKENS = ("tok_visa", "tok_declined", "tok_slow")


@dataclass
class FakeCharge:
    charge: Charge
    description: str
    metadata: dict[str, str]
    token: str
    refunded: bool = False


@dataclass
class _Key:
    lock: threading.Lock = field(default_factory=threading.Lock)
    fingerprint: tuple[object, ...] | None = None
    result: Charge | Refund | None = None


class FakePaymentProvider:
    def __init__(self, slow_seconds: float = 0.0) -> None:
        self.slow_seconds = slow_seconds
        self.fail_next = 0
        self.fail_after_charge_next = 0
        self.charge_calls = 0
        self.refund_calls = 0
        self._lock = threading.Lock()
        self._keys: dict[str, _Key] = {}
        self._charges: dict[str, FakeCharge] = {}
        self._by_key: dict[str, str] = {}
        self._refunds: dict[str, Refund] = {}
        self._ids = itertools.count(1)

    # -- inspection, for assertions ---------------------------------------------------------
    @property
    def charges(self) -> list[FakeCharge]:
        with self._lock:
            return list(self._charges.values())

    @property
    def succeeded(self) -> list[Charge]:
        return [c.charge for c in self.charges if c.charge.status == "succeeded"]

    @property
    def refunds(self) -> list[Refund]:
        with self._lock:
            return list(self._refunds.values())

    def is_refunded(self, charge_id: str) -> bool:
        with self._lock:
            return self._charges[charge_id].refunded

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
        with self._lock:
            self.charge_calls += 1
            if self.fail_next > 0:
                self.fail_next -= 1
                raise PaymentUnavailable("injected: provider unavailable (nothing charged)")
        if not idempotency_key:
            raise ValueError("an idempotency key is required")
        if amount_cents <= 0:
            raise ValueError("amount_cents must be positive")
        fingerprint = ("charge", amount_cents, currency, token, description, tuple(sorted(metadata.items())))
        state = self._state(idempotency_key)
        with state.lock:
            if state.result is not None:
                if state.fingerprint != fingerprint:
                    raise IdempotencyKeyReused("idempotency_key_reused", "key used with other parameters", 409)
                assert isinstance(state.result, Charge)
                return state.result
            if token not in TOKENS:
                raise InvalidPaymentToken("invalid_token", f"No such token: {token!r}", 400)
            if token == "tok_slow" and self.slow_seconds:
                time.sleep(self.slow_seconds)
            declined = token == "tok_declined"
            charge = Charge(
                id=f"ch_fake_{next(self._ids):06d}",
                status="declined" if declined else "succeeded",
                amount_cents=amount_cents,
                currency=currency,
                idempotency_key=idempotency_key,
                decline_reason="card_declined" if declined else None,
            )
            with self._lock:
                self._charges[charge.id] = FakeCharge(charge, description, dict(metadata), token)
                self._by_key[idempotency_key] = charge.id
                fail_after = self.fail_after_charge_next > 0
                if fail_after:
                    self.fail_after_charge_next -= 1
            state.fingerprint, state.result = fingerprint, charge
            if fail_after:
                raise PaymentUnavailable("injected: charged, but the answer was lost")
            return charge

    def find_charge(self, idempotency_key: str) -> Charge | None:
        with self._lock:
            state = self._keys.get(idempotency_key)
        if state is not None:
            with state.lock:  # like the server: wait for an in-flight charge with this key
                pass
        with self._lock:
            charge_id = self._by_key.get(idempotency_key)
            return self._charges[charge_id].charge if charge_id else None

    def refund(self, *, charge_id: str, idempotency_key: str) -> Refund:
        with self._lock:
            self.refund_calls += 1
        if not idempotency_key:
            raise ValueError("an idempotency key is required")
        fingerprint = ("refund", charge_id)
        state = self._state(idempotency_key)
        with state.lock:
            if state.result is not None:
                if state.fingerprint != fingerprint:
                    raise IdempotencyKeyReused("idempotency_key_reused", "key used with other parameters", 409)
                assert isinstance(state.result, Refund)
                return state.result
            with self._lock:
                record = self._charges.get(charge_id)
                if record is None:
                    raise PaymentRejected("resource_missing", f"No such charge: {charge_id!r}", 404)
                if record.charge.status != "succeeded":
                    raise PaymentRejected("charge_not_refundable", "Only succeeded charges can be refunded", 400)
                if record.refunded:
                    raise ChargeAlreadyRefunded("charge_already_refunded", f"{charge_id} already refunded", 400)
                record.refunded = True
                refund = Refund(
                    id=f"re_fake_{next(self._ids):06d}",
                    charge_id=charge_id,
                    amount_cents=record.charge.amount_cents,
                    status="succeeded",
                )
                self._refunds[refund.id] = refund
            state.fingerprint, state.result = fingerprint, refund
            return refund

    def _state(self, key: str) -> _Key:
        with self._lock:
            return self._keys.setdefault(key, _Key())
