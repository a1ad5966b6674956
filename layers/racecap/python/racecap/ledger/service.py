"""The ledger's use cases: a director's refund of an amount, the cancellation's refund, a statement.

A refund, in the order that keeps the sum of refunds within the charge under concurrent clicks
and makes a crash or a repeat harmless:

1. reserve: one conditional transaction adds the amount to the registration's refunded sum
   (only while it stays within the charge) and records the refund entry, PENDING, under the
   refund's own key (a director's click: ``refund-<registrationId>-<entryId>``, new per click;
   the cancellation: ``refund-<registrationId>``, one per registration);
2. ask the provider with that key (the same key replays the same refund);
3. the provider refunded: the entry gets its refund id. It refused: the reservation is
   released (the sum goes back down, the entry is REFUSED) and nothing was refunded. It did not
   answer: the entry stays PENDING and its amount reserved, so a retry of the same action
   resumes under the same key and no other refund can spend that money meanwhile.

A click refused by step 1 never reaches the provider: it is a 409 saying what is left.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime

from racecap.audit.service import AuditTrail
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.errors import Busy, Conflict, RefundFailed, RegistrationNotFound
from racecap.ledger.cancel_store import CancelStore
from racecap.ledger.models import LedgerEntry, RefundPhase, RefundView, RegistrationDetail, Statement
from racecap.ledger.store import LedgerStore
from racecap.models import Director
from racecap.money import in_units
from racecap.observability import logger, metrics
from racecap.payments.port import PaymentProvider, PaymentRejected, PaymentUnavailable
from racecap.races.models import Race
from racecap.registration.models import Registration, RegistrationPhase, registration_row


class RefundTooLarge(Conflict):
    """More than is left of the charge: nothing was reserved and the provider was not asked."""

    code = "REFUND_TOO_LARGE"


def payment_entry(reg: Registration) -> LedgerEntry:
    """The entry payment, read from the registration item the writer wrote (no write of its own)."""
    return LedgerEntry(
        kind="payment",
        key=f"hold:{reg.holdId}",  # one PaymentIntent per hold, keyed on it (registration/service.py)
        providerId=reg.chargeId,
        amountCents=reg.amountCents,
        currency=reg.currency,
        reason="entry",
        actor="runner",
        at=reg.paidAt,
    )


class Ledger:
    def __init__(
        self,
        store: LedgerStore,
        registrations: CancelStore,
        payments: PaymentProvider,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditTrail,
    ) -> None:
        self._store = store
        self._regs = registrations
        self._payments = payments
        self._transact = transact
        self._audit = audit

    # -- reads --------------------------------------------------------------------------------
    def statement(self, reg: Registration) -> Statement:
        refunds = self._store.refunds(reg.registrationId)
        reserved = sum(e.amountCents for e in refunds if e.status != RefundPhase.REFUSED)
        return Statement(
            registrationId=reg.registrationId,
            currency=reg.currency,
            chargedCents=reg.amountCents,
            refundedCents=reserved,
            leftCents=reg.amountCents - reserved,
            entries=[payment_entry(reg), *refunds],
        )

    def registration(self, race: Race, registration_id: str) -> RegistrationDetail:
        """One registration of ``race`` with its statement; another race's is not found (404)."""
        reg = self._owned(race, registration_id)
        row = registration_row(reg)
        return RegistrationDetail(**row.model_dump(), ledger=self.statement(reg))

    def _owned(self, race: Race, registration_id: str) -> Registration:
        reg = self._regs.get(registration_id)
        if reg is None or reg.raceId != race.raceId:
            raise RegistrationNotFound(f"No registration {registration_id} in race {race.raceId}.")
        return reg

    # -- a director's refund of an amount (the registration stays confirmed) -----------------
    def refund(
        self, director: Director, race: Race, registration_id: str, amount_cents: int, reason: str = ""
    ) -> RefundView:
        reg = self._owned(race, registration_id)
        if reg.status != RegistrationPhase.CONFIRMED:
            raise Conflict(f"Registration {registration_id} is {reg.status}: only a confirmed one is refunded in part.")
        if reg.amountCents == 0:
            raise RefundTooLarge("A free entry: there is no payment to refund.")
        if reg.purgedAt or not reg.chargeId:
            raise Conflict(
                "The registration's payment data was deleted (retention): refund in the provider's dashboard."
            )
        refund_key = f"refund-{registration_id}-{secrets.token_hex(6)}"  # this click, and only this one
        entry = self.refund_registration(reg, amount_cents, refund_key, director, reason)
        return RefundView(registrationId=registration_id, refund=entry, statement=self.statement(reg))

    # -- the core, shared with the cancellation ---------------------------------------------
    def refund_registration(
        self, reg: Registration, amount_cents: int | None, refund_key: str, director: Director, reason: str
    ) -> LedgerEntry:
        """Refund ``amount_cents`` (all that is left when None) under ``refund_key``; a repeat
        of one key resumes or replays that refund. Raises ``RefundTooLarge`` (nothing asked),
        ``RefundFailed`` (the provider refused; released) or ``Busy`` (no answer; reserved)."""
        rid = reg.registrationId
        entry = self._store.refund(rid, refund_key)
        if entry is None:
            entry = self._reserve(reg, amount_cents, refund_key, director, reason)
        if entry.status != RefundPhase.PENDING:
            return entry
        return self._ask_provider(reg, entry)

    def _reserve(
        self, reg: Registration, amount_cents: int | None, refund_key: str, director: Director, reason: str
    ) -> LedgerEntry:
        rid = reg.registrationId
        left = reg.amountCents - self._store.refunded_cents(rid)
        amount = left if amount_cents is None else amount_cents
        if amount <= 0 or amount > left:
            raise RefundTooLarge(too_large(amount, left, reg.currency))
        entry = LedgerEntry(
            kind="refund",
            key=refund_key,
            providerId="",
            amountCents=amount,
            currency=reg.currency,
            reason=reason,
            actor=director.sub,
            at=datetime.now(UTC).isoformat(),
            status=RefundPhase.PENDING,
        )
        audit = self._audit.item(
            director, reg.raceId, "registration.refund", rid, amountCents=amount, currency=reg.currency, key=refund_key,
            **({"reason": reason} if reason else {}),
        )  # fmt: skip
        counted = self._regs.refunds_counted_item(reg.raceId, reg.eventId, amount)
        try:
            self._transact([*self._store.reserve_items(reg, entry), counted, audit])
        except ConditionFailed as exc:
            again = self._store.refund(rid, refund_key)
            if again is not None:
                return again  # the same action, recorded by a concurrent call: resume it
            if 0 in exc.indexes:
                now_left = reg.amountCents - self._store.refunded_cents(rid)
                raise RefundTooLarge(too_large(amount, now_left, reg.currency)) from exc
            raise
        return entry

    def _ask_provider(self, reg: Registration, entry: LedgerEntry) -> LedgerEntry:
        rid = reg.registrationId
        try:
            refund = self._payments.refund(
                intent_id=reg.chargeId, idempotency_key=entry.key, amount_cents=entry.amountCents
            )
        except PaymentUnavailable as exc:
            logger.warning("refund outcome unknown; its amount stays reserved", extra={"registrationId": rid})
            raise Busy(
                "The payment provider is not answering; the refund is pending. Retry in a moment.", retry_after=5
            ) from exc
        except PaymentRejected as exc:
            now = datetime.now(UTC).isoformat()
            given_back = self._regs.refunds_counted_item(reg.raceId, reg.eventId, -entry.amountCents)
            try:
                self._transact([*self._store.release_items(rid, entry, now), given_back])
            except ConditionFailed:
                pass  # released by a concurrent call of the same action
            raise RefundFailed(f"The payment provider refused the refund ({exc.code}); nothing was refunded.") from exc
        now = datetime.now(UTC).isoformat()
        self._store.settle_reserved(rid, entry.key, refund.id, now)
        metrics.add_metric(name="Refunded", unit="Count", value=1)
        logger.info("refunded", extra={"registrationId": rid, "refundId": refund.id, "amountCents": entry.amountCents})
        return entry.model_copy(update={"providerId": refund.id, "status": RefundPhase.SUCCEEDED})


def too_large(amount: int, left: int, currency: str) -> str:
    if left <= 0:
        return "Nothing is left to refund: the whole payment was refunded."
    code = currency.upper()
    return (
        f"A refund of {in_units(amount, code)} {code} is more than is left of the payment "
        f"({in_units(left, code)} {code}); nothing was refunded."
    )
