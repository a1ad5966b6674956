"""The ledger's use cases: a director's refund of an amount, the cancellation's refund, a statement,
and settling every refund with the provider's last word.

A refund, in the order that keeps the sum of refunds within the charge under concurrent clicks
and makes a crash, a repeat or a lost answer harmless:

1. room in the provider's request budget is taken first (``PaymentProvider.admitted``): past
   it, a 429 with Retry-After and nothing reserved, because nothing was asked;
2. reserve: one conditional transaction adds the amount to the registration's refunded sum
   (only while it stays within the charge) and records the refund entry, PENDING, under the
   refund's own key: a director's refund is keyed by the client's ``Idempotency-Key`` (one per
   refund dialog: a retry of the same refund resumes it; a request without one is a new refund),
   ``refund-<registrationId>-<key>``; the cancellation's is recorded on the registration;
3. ask the provider with that key and the key in the refund's metadata (the same key replays
   the same refund; the metadata finds it once the provider has forgotten the key);
4. the provider's word moves the entry (``settle``): succeeded → SUCCEEDED; pending →
   PROCESSING; refused → REFUSED and the amount released; failed or cancelled, now or later
   (``charge.refund.updated``) → FAILED, the amount refundable again, the director told. No
   answer: the entry stays PENDING, its amount reserved so no other refund can spend it, and
   the sweeper (``settle_open``) asks the provider for it by its key until it has an answer.

A click refused by step 2 never reaches the provider: it is a 409 saying what is left.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from racecap.audit.service import AuditTrail
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.errors import Busy, Conflict, RefundFailed, RegistrationNotFound
from racecap.ledger.cancel_store import CancelStore
from racecap.ledger.models import (
    COUNTED_PHASES,
    OPEN_PHASES,
    LedgerEntry,
    RefundPhase,
    RefundView,
    RegistrationDetail,
    Statement,
)
from racecap.ledger.store import LedgerStore
from racecap.models import Director
from racecap.money import in_units
from racecap.observability import logger, metrics
from racecap.payments.port import (
    REFUND_UNDONE,
    PaymentIntent,
    PaymentProvider,
    PaymentRateLimited,
    PaymentRejected,
    PaymentUnavailable,
    Refund,
    RefundStatus,
)
from racecap.races.models import Race
from racecap.registration.models import Registration, RegistrationPhase, registration_row


class RefundTooLarge(Conflict):
    """More than is left of the charge: nothing was reserved and the provider was not asked."""

    code = "REFUND_TOO_LARGE"


class RefundKeyReused(Conflict):
    """An ``Idempotency-Key`` already used for another refund (another amount): nothing was done."""

    code = "IDEMPOTENCY_KEY_REUSED"


# What a registration's payments beyond the entry are for (the intent's ``metadata.purpose``):
# a switch to a dearer event, a transfer to another runner, a deferral to next year.
PAYMENT_PURPOSES = frozenset({"upgrade", "transfer_fee", "deferral_fee"})
# Between a refund's key and the number of its part on another payment ("+p2"): a character no
# client key has, so one dialog's parts are never taken for another dialog's refund.
PART = "+p"
# A client's idempotency key: what Stripe accepts in a key (up to 255), less our prefix.
CLIENT_KEY = re.compile(r"[A-Za-z0-9_.:-]{8,100}")
# How long a refund waits for its own request's answer before the sweeper looks for it: longer
# than a provider call can take with its retries (stripe_provider: ~22.5 s at worst).
SETTLE_AFTER = timedelta(seconds=30)
# The provider's words that leave a refund waiting: pending, or an answer with no verdict yet.
_STILL_OPEN = frozenset({RefundStatus.PENDING, RefundStatus.REQUIRES_ACTION})
# Who the audit names for a refund the provider failed after the fact.
TRANSFER_JOB = Director(sub="system-transfers", username="Racecap transfers (a fee whose transfer did not happen)")
PROVIDER_REFUNDS = Director(sub="payment-provider", username="payment provider (a refund's outcome)")


def refund_metadata(reg: Registration, key: str) -> dict[str, str]:
    """What a refund carries at the provider: how its webhook and the sweeper find its entry."""
    return {"registrationId": reg.registrationId, "raceId": reg.raceId, "refundKey": key}


def entry_phase(refund: Refund) -> RefundPhase:
    """The ledger's phase for the provider's refund status."""
    if refund.status == RefundStatus.SUCCEEDED:
        return RefundPhase.SUCCEEDED
    if refund.status in REFUND_UNDONE:
        return RefundPhase.FAILED
    return RefundPhase.PROCESSING


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
        settle_after: timedelta = SETTLE_AFTER,
    ) -> None:
        self._settle_after = settle_after
        self._store = store
        self._regs = registrations
        self._payments = payments
        self._transact = transact
        self._audit = audit

    # -- reads --------------------------------------------------------------------------------
    def statement(self, reg: Registration) -> Statement:
        refunds = self._store.refunds(reg.registrationId)
        charges = self.charges(reg)
        charged = sum(c.amountCents for c in charges)
        reserved = sum(e.amountCents for e in refunds if e.status in COUNTED_PHASES)
        return Statement(
            registrationId=reg.registrationId,
            currency=reg.currency,
            chargedCents=charged,
            refundedCents=reserved,
            pendingCents=sum(e.amountCents for e in refunds if e.status in OPEN_PHASES),
            leftCents=charged - reserved,
            entries=[*charges, *refunds],
        )

    def charges(self, reg: Registration) -> list[LedgerEntry]:
        """Every payment of the registration, oldest first: the entry payment (read from the
        registration item), then any other (an upgrade, a fee) the ledger recorded."""
        extra = self._store.payments(reg.registrationId) if reg.ledgerExtraCents else []
        return [payment_entry(reg), *extra]

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
        self,
        director: Director,
        race: Race,
        registration_id: str,
        amount_cents: int,
        reason: str = "",
        client_key: str | None = None,
    ) -> RefundView:
        """``client_key`` (the request's ``Idempotency-Key``) names this refund: a repeat with it
        resumes or replays it, with another amount is ``RefundKeyReused``; without one, a new
        refund. The view's refund may be PENDING or PROCESSING: settled later, never lost."""
        reg = self._owned(race, registration_id)
        refund_key = f"refund-{registration_id}-{key_part(client_key) if client_key else secrets.token_hex(6)}"
        known = self.parts(registration_id, refund_key)
        if known and sum(p.amountCents for p in known) != amount_cents:
            done = sum(p.amountCents for p in known)
            raise RefundKeyReused(
                f"This Idempotency-Key was used for a refund of {in_units(done, reg.currency)} "
                f"{reg.currency.upper()}; use a new key for another refund."
            )
        if not known:
            self._refundable(reg)
        entry = self.refund_registration(reg, amount_cents, refund_key, director, reason)
        parts = self.parts(registration_id, refund_key)
        return RefundView(registrationId=registration_id, refund=entry, parts=parts, statement=self.statement(reg))

    def parts(self, registration_id: str, refund_key: str) -> list[LedgerEntry]:
        """One refund's entries: one per payment it goes back to (newest payment first)."""
        found = [
            e
            for e in self._store.refunds(registration_id)
            if e.key == refund_key or e.key.startswith(refund_key + PART)
        ]
        return sorted(found, key=lambda e: e.key != refund_key)

    @staticmethod
    def _refundable(reg: Registration) -> None:
        rid = reg.registrationId
        if reg.status != RegistrationPhase.CONFIRMED:
            raise Conflict(f"Registration {rid} is {reg.status}: only a confirmed one is refunded in part.")
        if reg.amountCents == 0:
            raise RefundTooLarge("A free entry: there is no payment to refund.")
        if reg.purgedAt or not reg.chargeId:
            raise Conflict(
                "The registration's payment data was deleted (retention): refund in the provider's dashboard."
            )

    # -- the core, shared with the cancellation ---------------------------------------------
    def refund_registration(
        self,
        reg: Registration,
        amount_cents: int | None,
        refund_key: str,
        director: Director,
        reason: str,
        *,
        confirmed_only: bool = True,
    ) -> LedgerEntry:
        """Refund ``amount_cents`` (all that is left when None) under ``refund_key``; a repeat
        of one key resumes or replays that refund. Raises ``RefundTooLarge`` (nothing asked),
        ``RefundFailed`` (the provider refused; released) or ``Busy`` (the request budget is
        spent: nothing reserved, or the refund stays as it was). The entry returned may still be
        PENDING (no answer) or PROCESSING: the sweeper settles it."""
        parts = self.parts(reg.registrationId, refund_key)
        if parts and all(p.status != RefundPhase.PENDING for p in parts):
            return parts[0]  # answered before: a replay
        provider = self._admitted()
        if not parts:
            parts = self._reserve(reg, amount_cents, refund_key, director, reason, confirmed_only)
        answered = [
            self._ask_provider(provider if i == 0 else self._payments, reg, p) if p.status == RefundPhase.PENDING else p
            for i, p in enumerate(parts)
        ]
        return answered[0]

    def _admitted(self) -> PaymentProvider:
        try:
            return self._payments.admitted()
        except PaymentRateLimited as exc:
            metrics.add_metric(name="RefundBudgetRefused", unit="Count", value=1)
            raise Busy(
                "The payment provider's request budget is spent for now; nothing was refunded or reserved. "
                "Retry with the same Idempotency-Key.",
                retry_after=max(1, round(exc.retry_after + 0.5)),
            ) from exc

    def _reserve(
        self,
        reg: Registration,
        amount_cents: int | None,
        refund_key: str,
        director: Director,
        reason: str,
        confirmed_only: bool = True,
    ) -> list[LedgerEntry]:
        """Reserve the refund, split over the registration's payments newest first (each part
        within what is left of its payment), in one transaction; its parts, newest first."""
        rid = reg.registrationId
        charges = self.charges(reg)
        refunds = self._store.refunds(rid)
        total = sum(c.amountCents for c in charges)
        left = total - sum(e.amountCents for e in refunds if e.status in COUNTED_PHASES)
        amount = left if amount_cents is None else amount_cents
        if amount <= 0 or amount > left:
            raise RefundTooLarge(too_large(amount, left, reg.currency))
        now = datetime.now(UTC).isoformat()
        parts = [
            LedgerEntry(
                kind="refund",
                key=refund_key if n == 0 else f"{refund_key}{PART}{n + 1}",
                providerId="",
                amountCents=cents,
                currency=reg.currency,
                reason=reason,
                actor=director.sub,
                at=now,
                status=RefundPhase.PENDING,
                intentId=intent,
            )
            for n, (intent, cents) in enumerate(split(amount, reg, charges, refunds))
        ]
        audit = self._audit.item(
            director, reg.raceId, "registration.refund", rid, amountCents=amount, currency=reg.currency, key=refund_key,
            **({"reason": reason} if reason else {}),
        )  # fmt: skip
        counted = self._regs.refunds_counted_item(reg.raceId, reg.eventId, amount)
        try:
            self._transact([*self._store.reserve_items(reg, *parts, confirmed_only=confirmed_only), counted, audit])
        except ConditionFailed as exc:
            again = self.parts(rid, refund_key)
            if again:
                return again  # the same action, recorded by a concurrent call: resume it
            if 0 in exc.indexes:
                fresh = self._regs.get(rid) or reg
                now_left = sum(c.amountCents for c in self.charges(fresh)) - self._store.refunded_cents(rid)
                raise RefundTooLarge(too_large(amount, now_left, reg.currency)) from exc
            raise
        return parts

    # -- payments beyond the entry payment ----------------------------------------------------
    def record_payment(self, intent: PaymentIntent) -> str:
        """A succeeded payment of another purpose (an upgrade, a transfer fee) naming a
        registration: recorded once in its ledger (a repeat of the webhook or reconciliation
        finds it: "already"); "orphan" when it names no registration of ours, or another
        currency (money with no ledger to go in: the caller refunds it)."""
        purpose = intent.metadata.get("purpose", "")
        if purpose not in PAYMENT_PURPOSES:
            # Not a purpose Racecap charges for: someone else's integration on the account, or a
            # bug. Neither recorded nor refunded; the audit names it for a person to look at.
            logger.warning("a payment of an unknown purpose names a registration", extra={"intentId": intent.id})
            metrics.add_metric(name="UnknownPaymentPurpose", unit="Count", value=1)
            return "ignored"
        rid = intent.metadata.get("registrationId", "")
        reg = self._regs.get(rid) if rid else None
        if reg is None or reg.currency.lower() != intent.currency.lower() or not reg.chargeId:
            return "orphan"
        entry = LedgerEntry(
            kind="payment",
            key=payment_key(intent.id),
            providerId=intent.id,
            amountCents=intent.amount_cents,
            currency=reg.currency,
            reason=purpose,
            actor="runner",
            at=datetime.now(UTC).isoformat(),
        )
        counted = self._regs.payments_counted_item(reg.raceId, reg.eventId, entry.amountCents)
        try:
            self._transact([*self._store.payment_items(rid, entry), counted])
        except ConditionFailed as exc:
            if 0 in exc.indexes:
                return "already"
            raise
        metrics.add_metric(name="ExtraPaymentRecorded", unit="Count", value=1)
        logger.info("payment recorded", extra={"registrationId": rid, "purpose": entry.reason})
        return "recorded"

    def reserved_entry_items(self, registration_id: str, entries: list[LedgerEntry]) -> list[TransactItem]:
        """The entries of a refund reserved by another use case's own transaction (a switch's,
        whose update of the registration adds their sum): PENDING, on the open index, so the
        sweeper asks the provider for them if no one else does."""
        return [self._store.entry_item(registration_id, e) for e in entries]

    def refund_lost_fee(
        self, reg: Registration, intent: PaymentIntent, key: str, reason: str = "the transfer did not happen"
    ) -> None:
        """A fee paid for a transfer that did not happen (the registration was cancelled, the
        offer withdrawn or replaced): its amount back, under ``key`` (once), from the newest
        payment, which the fee is. Nothing left to refund (a cancellation refunded all that was
        left, the fee too): nothing more to do."""
        try:
            self.refund_registration(reg, intent.amount_cents, key, TRANSFER_JOB, reason, confirmed_only=False)
        except RefundTooLarge:
            logger.info("a lost transfer's fee was refunded already", extra={"registrationId": reg.registrationId})
            return
        metrics.add_metric(name="TransferFeeRefunded", unit="Count", value=1)

    def _ask_provider(self, provider: PaymentProvider, reg: Registration, entry: LedgerEntry) -> LedgerEntry:
        rid = reg.registrationId
        try:
            refund = provider.refund(
                intent_id=entry.intentId or reg.chargeId,
                idempotency_key=entry.key,
                amount_cents=entry.amountCents,
                metadata=refund_metadata(reg, entry.key),
            )
        except PaymentUnavailable:
            # No answer (or the provider's own 429, after the adapter's retries): the outcome is
            # unknown, so the amount stays reserved and the sweeper finds the answer by the key.
            logger.warning("refund outcome unknown; the sweeper settles it", extra={"registrationId": rid})
            metrics.add_metric(name="RefundOutcomeUnknown", unit="Count", value=1)
            return entry
        except PaymentRejected as exc:
            self.settle(reg, entry, RefundPhase.REFUSED)
            raise RefundFailed(f"The payment provider refused the refund ({exc.code}); nothing was refunded.") from exc
        return self.settle(reg, entry, entry_phase(refund), refund)

    # -- the provider's word ------------------------------------------------------------------
    def settle(
        self, reg: Registration, entry: LedgerEntry, to: RefundPhase, refund: Refund | None = None
    ) -> LedgerEntry:
        """Move ``entry`` to ``to`` with its registration's counters, once: a concurrent move
        (the webhook and the request's own answer) is read back and moved on from where it is.
        A refund that FAILED (or was REFUSED) gives its amount back to what can be refunded, in
        the stats too; a failure is audited for the director."""
        rid = reg.registrationId
        refund_id = refund.id if refund is not None else ""
        why = (refund.failure_reason or "failed") if refund is not None and to == RefundPhase.FAILED else ""
        for _ in range(3):
            if entry.status == to or not _moves(RefundPhase(entry.status), to):
                return entry
            now = datetime.now(UTC).isoformat()
            items = self._store.move_items(rid, entry, to, refund_id=refund_id, at=now, why=why)
            if entry.status in COUNTED_PHASES and to not in COUNTED_PHASES:
                items.append(self._regs.refunds_counted_item(reg.raceId, reg.eventId, -entry.amountCents))
            if to == RefundPhase.FAILED:
                failed = {"amountCents": entry.amountCents, "currency": reg.currency, "key": entry.key}
                audit = self._audit.item(
                    PROVIDER_REFUNDS, reg.raceId, "registration.refund.failed", rid, **failed, failureReason=why
                )
                items.append(audit)
            try:
                self._transact(items)
            except ConditionFailed:
                again = self._store.refund(rid, entry.key)
                if again is None:
                    return entry
                entry = again
                continue
            _report(rid, entry, to, refund_id)
            update: dict[str, object] = {"status": to} | ({"providerId": refund_id} if refund_id else {})
            return entry.model_copy(update=update | ({"failureReason": why} if why else {}))
        return entry

    def provider_refund(self, refund: Refund) -> str:
        """A refund's update from the provider (``charge.refund.updated``, ``refund.failed``...):
        its entry, found by the metadata the ledger gave it, takes the provider's word."""
        rid, key = refund.metadata.get("registrationId"), refund.metadata.get("refundKey")
        if not rid or not key:
            return "ignored"  # not one of the ledger's (one made in the dashboard: charge.refunded has it)
        reg = self._regs.get(rid)
        entry = self._store.refund(rid, key)
        if reg is None or entry is None:
            return "ignored"
        moved = self.settle(reg, entry, entry_phase(refund), refund)
        return "refund " + str(moved.status).lower()

    def settle_open(
        self,
        now: datetime | None = None,
        resume_cancellation: Callable[[Registration, LedgerEntry], None] | None = None,
    ) -> dict[str, int]:
        """The sweeper's run: every refund still waiting for the provider's word after
        ``settle_after`` is looked for at the provider, by its key in the refund's metadata (so
        a refund whose answer was lost is found even once the provider forgot its idempotency
        key), and settled; one the provider never received is asked again under its key. A
        cancellation's refund goes back to its cancellation (``resume_cancellation``), which
        finishes it or asks again itself. A provider that does not answer leaves it for the next
        run. Returns counts per outcome."""
        now = now or datetime.now(UTC)
        counts: dict[str, int] = {}
        for rid, entry in self._store.open_refunds((now - self._settle_after).isoformat()):
            reg = self._regs.get(rid)
            if reg is None:
                continue
            try:
                outcome = self._settle_one(reg, entry)
                if entry.origin == "cancel" and resume_cancellation is not None:
                    resume_cancellation(self._regs.get(rid) or reg, self._store.refund(rid, entry.key) or entry)
            except (PaymentUnavailable, Busy):
                outcome = "waiting"
            except RefundFailed:
                outcome = "refused"
            counts[outcome] = counts.get(outcome, 0) + 1
        if counts:
            logger.info("settled open refunds", extra=counts)
        return counts

    def _settle_one(self, reg: Registration, entry: LedgerEntry) -> str:
        try:
            provider = self._payments.admitted("list_refunds")
        except PaymentRateLimited:
            return "waiting"
        found = _find(provider.list_refunds(intent_id=entry.intentId or reg.chargeId), entry)
        if found is not None:
            return str(self.settle(reg, entry, entry_phase(found), found).status).lower()
        if entry.status != RefundPhase.PENDING:
            return "waiting"  # PROCESSING but not listed (yet): the provider's list is eventually consistent
        if entry.origin == "cancel":
            return "resumed"  # its cancellation asks again, and undoes itself if refused
        moved = self._ask_provider(self._admitted(), reg, entry)  # never received: ask, same key
        return "asked-" + str(moved.status).lower()


def key_part(client_key: str) -> str:
    """The client's key as part of ours: itself when it is plain (what the console sends),
    else its digest, so any key the document allows names one refund and none can forge a
    part separator or an index key."""
    if CLIENT_KEY.fullmatch(client_key):
        return client_key
    return "h" + hashlib.sha256(client_key.encode()).hexdigest()[:32]


def payment_key(intent_id: str) -> str:
    """A payment's ledger key: derived from the intent (a repeat finds it), never the intent's id
    itself (retention empties provider ids, and it could not empty a key)."""
    return "payment-" + hashlib.sha256(intent_id.encode()).hexdigest()[:24]


def split(
    amount: int, reg: Registration, charges: list[LedgerEntry], refunds: list[LedgerEntry]
) -> list[tuple[str, int]]:
    """(payment, cents) parts of a refund of ``amount``: newest payment first, each within what
    its own refunds left of it. Refunds recorded before payments were told apart went to the
    entry payment (their ``intentId`` is empty)."""
    taken: dict[str, int] = {}
    for e in refunds:
        if e.status in COUNTED_PHASES:
            paid_by = e.intentId or reg.chargeId
            taken[paid_by] = taken.get(paid_by, 0) + e.amountCents
    parts: list[tuple[str, int]] = []
    rest = amount
    for charge in reversed(charges):
        give = min(rest, charge.amountCents - taken.get(charge.providerId, 0))
        if give > 0:
            parts.append((charge.providerId, give))
            rest -= give
    return parts


def _find(refunds: list[Refund], entry: LedgerEntry) -> Refund | None:
    return next(
        (
            r
            for r in refunds
            if r.metadata.get("refundKey") == entry.key or (entry.providerId and r.id == entry.providerId)
        ),
        None,
    )


def _moves(frm: RefundPhase, to: RefundPhase) -> bool:
    """The moves the provider's word can make: forward only, and a settled refund may still fail."""
    if frm == RefundPhase.PENDING:
        return to != RefundPhase.PENDING
    if frm == RefundPhase.PROCESSING:
        return to in (RefundPhase.SUCCEEDED, RefundPhase.FAILED)
    return frm == RefundPhase.SUCCEEDED and to == RefundPhase.FAILED


def _report(rid: str, entry: LedgerEntry, to: RefundPhase, refund_id: str) -> None:
    extra = {"registrationId": rid, "refundId": refund_id, "amountCents": entry.amountCents, "to": str(to)}
    if to == RefundPhase.SUCCEEDED:
        metrics.add_metric(name="Refunded", unit="Count", value=1)
        logger.info("refunded", extra=extra)
    elif to == RefundPhase.FAILED:
        metrics.add_metric(name="RefundFailed", unit="Count", value=1)
        logger.warning("the provider failed a refund; its amount is refundable again", extra=extra)
    else:
        logger.info("refund moved", extra=extra)


def too_large(amount: int, left: int, currency: str) -> str:
    if left <= 0:
        return "Nothing is left to refund: the whole payment was refunded."
    code = currency.upper()
    return (
        f"A refund of {in_units(amount, code)} {code} is more than is left of the payment "
        f"({in_units(left, code)} {code}); nothing was refunded."
    )
