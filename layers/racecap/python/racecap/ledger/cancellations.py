"""Cancelling a confirmed registration: refund, place back to the pool, an email to the runner.

The director chooses the refund: FULL (all that is left at the moment the cancellation reserves
it, after earlier and concurrent refunds), NONE, or an AMOUNT within what is left. The order of
steps is what makes a repeat harmless and a crash recoverable:

1. CONFIRMED → CANCELLING, with the audit entry (the choice and the reason) and the refund's
   ledger entry, in one transaction: the director's decision is on record and the refund's
   amount reserved in the ledger's sum (within the charge, as a partial refund's is: the same
   condition in the same write) before any money moves; an AMOUNT past what is left is a 409
   that changed nothing. FULL reserves only while the sum is still the one it read (a partial
   refund that got in between makes it read again and reserve the rest, never a 409);
2. refund through the provider with the key recorded on the registration in step 1
   (``refund-<registrationId>-c<random>``): however often this runs, the runner is refunded
   once. NONE, a free entry, or nothing left: no provider is asked;
3. CANCELLING → CANCELLED in one transaction with everything the place touches: the
   cap shard gives the place back, the email's claim is released (the runner may
   register again), the counters move;
4. the refund email goes on the queue (``dedupKey`` ``refund:<registrationId>``: the
   sender sends it once however often it is enqueued).

Repeating the call at any point resumes from where the last one stopped (with the choice
recorded in step 1, whatever the repeat's body says); repeating it after it finished only
re-enqueues the (deduplicated) email. If the provider refuses the refund outright, the
registration goes back to CONFIRMED, the reservation is released and nothing has changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from racecap.audit.service import AuditTrail
from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.emails.models import EmailMessage
from racecap.errors import Busy, Conflict, RefundFailed, RegistrationNotFound
from racecap.holds.service import waitlisted
from racecap.holds.store import LINE_TRIES, HoldStore
from racecap.ledger.cancel_store import CancelStore
from racecap.ledger.models import CancellationView, LedgerEntry, RefundPhase
from racecap.ledger.service import RefundTooLarge, entry_phase, refund_metadata, too_large
from racecap.ledger.store import LedgerStore
from racecap.models import Actor, Director
from racecap.observability import logger, metrics
from racecap.payments.port import AlreadyRefunded, PaymentProvider, PaymentRejected, PaymentUnavailable
from racecap.places.returns import PlaceReturns
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Race
from racecap.registration.links import LinkRevoked
from racecap.registration.models import Registration, RegistrationPhase, refunded_by_cancel
from racecap.registration.status import StatusSnapshots

# Each loop moves the registration one state on (CONFIRMED, CANCELLING, CANCELLED, then the
# answer), or reads again what is left for a FULL refund a concurrent partial refund got ahead
# of (twice at most here); more means a concurrent fight.
MAX_STEPS = 6


RefundChoice = Literal["FULL", "NONE", "AMOUNT"]


OUTSIDE_REASON = "refunded in the payment provider's dashboard"
RUNNER = "runner"  # ``cancelledBy`` of a runner's own cancellation (``cancelled_by``)


def refund_key(registration_id: str) -> str:
    """The key of a cancellation begun before the refund choice (it refunded all that was left)."""
    return f"refund-{registration_id}"


def refund_email(reg: Registration) -> EmailMessage:
    return EmailMessage(
        kind="refund",
        dedupKey=f"refund:{reg.registrationId}",
        to=reg.email,
        data={
            "firstName": reg.firstName,
            "raceName": reg.raceName,
            "eventName": reg.eventName,
            "registrationId": reg.registrationId,
            "amountCents": refunded_by_cancel(reg),  # what this cancellation refunded (0: none)
            "currency": reg.currency,
        },
    )


def deferral_email(reg: Registration) -> EmailMessage:
    """The runner who deferred: their code for the next edition (it replaces the refund email)."""
    return EmailMessage(
        kind="deferred",
        dedupKey=f"deferred:{reg.registrationId}",
        to=reg.email,
        data={
            "firstName": reg.firstName,
            "raceName": reg.raceName,
            "eventName": reg.eventName,
            "registrationId": reg.registrationId,
            "code": reg.deferralCode or "",
            "creditCents": reg.deferralCreditCents or 0,
            "currency": reg.currency,
            "nextRaceId": reg.deferredTo or "",
        },
    )


@dataclass(frozen=True)
class Deferred:
    """A cancellation that defers the place (``ledger.deferral``): what the registration records
    of it, and the writes that make its code in the next edition, in the cancellation's first write."""

    sets: dict[str, Any]
    items: list[TransactItem]


class Cancellations:
    def __init__(
        self,
        registrations: CancelStore,
        holds: HoldStore,
        payments: PaymentProvider,
        emails: MessageQueue,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditTrail,
        catalog: RaceDefinitions,
        ledger: LedgerStore,
        statuses: StatusSnapshots | None = None,
        returns: PlaceReturns | None = None,
    ) -> None:
        self._ledger = ledger
        # Where a freed place goes when the event has a waitlist (None: always its shard).
        self._returns = returns
        # The waiting screen's snapshot of a confirmed registration: forgotten as its status moves.
        self._statuses = statuses
        self._regs = registrations
        self._holds = holds
        self._payments = payments
        self._emails = emails
        self._transact = transact
        self._audit = audit
        self._catalog = catalog

    def cancel(
        self,
        director: Director | Actor,
        race: Race,
        registration_id: str,
        reason: str = "",
        refund: RefundChoice = "FULL",
        amount_cents: int | None = None,
        link_version: int | None = None,
        deferral: Deferred | None = None,
    ) -> CancellationView:
        """Cancel with the director's refund choice (``amount_cents`` with AMOUNT only).
        Raises ``RefundTooLarge`` (409, nothing changed) for an AMOUNT past what is left.
        ``link_version``: a runner's own cancellation, begun only while the link it was asked
        with is still the registration's (``LinkRevoked`` once a transfer or a change of address
        replaced it, even between the read and the write). ``deferral``: the place goes to the
        race's next edition (``ledger.deferral``): recorded on the registration and its code made
        in the cancellation's first write, all or nothing; no refund (choose NONE)."""
        changed = False
        for _ in range(MAX_STEPS):
            reg = self._regs.get(registration_id)
            if reg is None or reg.raceId != race.raceId:
                raise RegistrationNotFound(f"No registration {registration_id} in race {race.raceId}.")
            if reg.purgedAt:
                # No email to tell the runner and no payment to refund: retention deleted both.
                raise Conflict(
                    f"The race's retention period is over: the runner's email and payment were deleted on "
                    f"{reg.purgedAt[:10]}. Refund through the payment provider's dashboard."
                )
            status = reg.status
            if status == RegistrationPhase.CANCELLED:
                # Done (now or before): make sure the runner hears of it; the sender deduplicates.
                self._emails.send(deferral_email(reg) if reg.deferredTo else refund_email(reg))
                self._tell_the_payer(reg)
                return _view(reg, changed)
            if status == RegistrationPhase.CONFIRMED:
                if link_version is not None and (reg.linkVersion or 0) != link_version:
                    raise LinkRevoked(
                        "This link was replaced (the place changed hands or address); use the newest one."
                    )
                self._begin(director, reg, reason, refund, amount_cents, link_version, deferral)
                self._forget_status(registration_id)
                changed = True
                continue
            if status == RegistrationPhase.CANCELLING:
                self._refund_and_release(reg)
                self._forget_status(registration_id)
                changed = True
                continue
            raise Conflict(f"Registration {registration_id} is {status} and cannot be cancelled.")
        raise Conflict("The registration kept changing while we cancelled it; please retry.")

    def refunded_elsewhere(self, registration_id: str, refunded_total: int | None = None) -> bool:
        """The provider says the registration's payment was refunded outside Racecap (its
        dashboard): the refund goes in the ledger, and the registration is cancelled with
        nothing more to refund, the place given back, audited as such. False when there is no
        registration (yet) to cancel."""
        reg = self._regs.get(registration_id)
        if reg is None:
            return False
        if refunded_total is not None:  # in the ledger whatever its state (a cancelled one's too)
            self.record_outside(reg, refunded_total)
        if reg.status == RegistrationPhase.CONFIRMED:
            self._begin(PROVIDER, reg, OUTSIDE_REASON, "NONE", None)
            logger.warning("payment refunded outside Racecap", extra={"registrationId": registration_id})
            metrics.add_metric(name="RefundedOutside", unit="Count", value=1)
        race, _ = self._catalog.definition(reg.raceId)
        self.cancel(PROVIDER, race, registration_id)
        return True

    def record_outside(self, reg: Registration, refunded_total: int, refund_id: str = "") -> bool:
        """A refund made outside Racecap: what the charge says was refunded (``refunded_total``)
        beyond the ledger's sum goes in the ledger, flagged on the registration, in the event's
        counters (``outsideRefunds``) and the audit trail. Its key is the charge's refunded
        total, which only grows, so a repeat of the same webhook records nothing. True: recorded."""
        rid = reg.registrationId
        outside = refunded_total - self._ledger.refunded_cents(rid)
        if outside <= 0:
            return False
        entry = LedgerEntry(
            kind="refund",
            key=f"outside-{refunded_total}",  # no provider id in a key: retention could not empty it
            providerId=refund_id,
            amountCents=outside,
            currency=reg.currency,
            reason=OUTSIDE_REASON,
            actor=PROVIDER.sub,
            at=datetime.now(UTC).isoformat(),
            origin="outside",
            intentId=reg.chargeId,
        )
        audit = self._audit.item(
            PROVIDER, reg.raceId, "registration.refund.outside", rid,
            amountCents=outside, currency=reg.currency, refundedInAllCents=refunded_total, flagged=True,
        )  # fmt: skip
        counted = self._regs.refunds_counted_item(reg.raceId, reg.eventId, outside, outside=True)
        try:
            self._transact([*self._ledger.outside_items(rid, entry), counted, audit])
        except ConditionFailed:
            return False  # recorded by a repeat of the same event
        if refunded_total < reg.amountCents:  # all of it: refunded_elsewhere says so as it cancels
            logger.warning("payment refunded in part outside Racecap", extra={"registrationId": rid, "cents": outside})
            metrics.add_metric(name="RefundedOutsideInPart", unit="Count", value=1)
        return True

    def _begin(
        self,
        director: Director | Actor,
        reg: Registration,
        reason: str,
        choice: RefundChoice,
        amount_cents: int | None,
        link_version: int | None = None,
        deferral: Deferred | None = None,
    ) -> None:
        rid = reg.registrationId
        by = cancelled_by(director)
        now = datetime.now(UTC).isoformat()
        left = reg.amountCents - self._ledger.refunded_cents(rid)
        cents = {"FULL": max(left, 0), "NONE": 0, "AMOUNT": amount_cents or 0}[choice]
        if cents > left:
            raise RefundTooLarge(too_large(cents, left, reg.currency))
        key = f"{refund_key(rid)}-c{secrets.token_hex(4)}" if cents else None
        details = {
            "eventId": reg.eventId,
            "bib": reg.bib,  # the runner by bib and registration id: never their address
            "amountCents": reg.amountCents,
            "currency": reg.currency,
            "refund": choice,
            "refundCents": cents,
            **({"reason": reason} if reason else {}),
        }
        items = [
            self._regs.begin_cancel_item(
                rid,
                now,
                by,
                choice=choice,
                refund_cents=cents,
                refund_key=key,
                charged=reg.amountCents,
                whole=choice == "FULL",
                link_version=link_version,
                event_id=reg.eventId,
                also=deferral.sets if deferral else None,
            ),
            self._audit.item(director, reg.raceId, "registration.cancel", rid, **details),
            self._regs.open_cancel_item(rid, now),
            *(deferral.items if deferral else ()),
        ]
        if key is not None:
            entry = LedgerEntry(
                kind="refund",
                key=key,
                providerId="",
                amountCents=cents,
                currency=reg.currency,
                reason=reason or "cancelled",
                actor=by,
                at=now,
                status=RefundPhase.PENDING,
                origin="cancel",
                intentId=reg.chargeId,
            )
            items.append(self._ledger.entry_item(rid, entry))
        try:
            self._transact(items)
        except ConditionFailed as exc:
            again = self._regs.get(rid)
            if link_version is not None and again is not None and (again.linkVersion or 0) != link_version:
                raise LinkRevoked(REPLACED) from exc  # handed over (or moved) between the read and the write
            still = 0 in exc.indexes and again is not None and again.status == RegistrationPhase.CONFIRMED
            if still and choice == "AMOUNT":
                # A concurrent refund spent the room this amount needed.
                now_left = reg.amountCents - self._ledger.refunded_cents(rid)
                raise RefundTooLarge(too_large(cents, now_left, reg.currency)) from exc
            # else a concurrent call got there first, or (FULL) a concurrent refund moved the sum
            # since we read it: the loop reads the new state, and what is left now

    def _refund(self, reg: Registration) -> tuple[str, int]:
        """The cancellation's refund at the provider: (its id, the amount refunded)."""
        rid = reg.registrationId
        if reg.cancelRefund is None:  # begun before the refund choice: all that is left, keyed on the registration
            return self._ask(reg, refund_key(rid), None, None), reg.amountCents
        entry = self._ledger.refund(rid, reg.cancelRefundKey) if reg.cancelRefundKey else None
        if entry is None:
            return "", 0  # NONE, a free entry, or nothing left: no provider is asked
        if entry.status != RefundPhase.PENDING:
            # The provider has answered (the sweeper or a webhook may have recorded it): asking
            # again could, once the provider forgot the key, refund twice.
            return entry.providerId, entry.amountCents
        return self._ask(reg, entry.key, entry.amountCents, entry), entry.amountCents

    def _ask(self, reg: Registration, key: str, amount: int | None, entry: LedgerEntry | None) -> str:
        rid = reg.registrationId
        try:
            refund = self._payments.refund(
                intent_id=reg.chargeId, idempotency_key=key, amount_cents=amount, metadata=refund_metadata(reg, key)
            )
            refund_id = refund.id
        except AlreadyRefunded:
            # Refunded under another key (by hand, in the provider's dashboard): the money
            # is back with the runner either way; finish the cancellation.
            refund_id = "refunded-elsewhere"
        except PaymentUnavailable as exc:
            logger.warning("refund outcome unknown; the cancellation stays pending", extra={"registrationId": rid})
            raise Busy(
                "The payment provider is not answering; the cancellation is pending. Retry in a moment.",
                retry_after=5,
            ) from exc
        except PaymentRejected as exc:
            now = datetime.now(UTC).isoformat()
            undo = [
                self._regs.undo_cancel_item(rid, entry.amountCents if entry else 0),
                self._regs.close_cancel_item(rid),
            ]
            try:
                self._transact([*undo, self._ledger.refuse_item(rid, entry, now)] if entry else undo)
            except ConditionFailed:
                pass
            raise RefundFailed(f"The payment provider refused the refund ({exc.code}); nothing was changed.") from exc
        if entry is not None and refund_id != "refunded-elsewhere" and entry_phase(refund) != RefundPhase.SUCCEEDED:
            # Pending at the provider: the cancellation goes on (the refund is on its way) and
            # its entry waits, open, for the provider's last word (``Ledger.settle``).
            now = datetime.now(UTC).isoformat()
            moved = self._ledger.move_items(rid, entry, RefundPhase.PROCESSING, refund_id=refund_id, at=now)
            try:
                self._transact(moved)
            except ConditionFailed:
                pass  # moved on by the webhook or the sweeper meanwhile
        elif entry is not None:
            self._ledger.settle(rid, key, refund_id, datetime.now(UTC).isoformat())
        return refund_id

    def finish_open(self, before: datetime) -> dict[str, int]:
        """The sweeper's backstop: every cancellation begun before ``before`` and not finished (a
        provider that timed out or was rate limited, a crash between steps) is resumed under
        its own refund key, so nothing waits for the director to click again. A mark left by
        a cancellation that finished or was undone is cleared. Returns counts per outcome."""
        counts: dict[str, int] = {}
        for rid in self._regs.open_cancels(before.isoformat()):
            reg = self._regs.get(rid)
            outcome = "cleared"
            try:
                if reg is None or reg.status != RegistrationPhase.CANCELLING:
                    self._transact([self._regs.close_cancel_item(rid)])
                else:
                    race, _ = self._catalog.definition(reg.raceId)
                    self.cancel(SYSTEM, race, rid)
                    outcome = "finished"
            except (Busy, PaymentUnavailable):
                outcome = "waiting"
            except (Conflict, RefundFailed) as exc:
                logger.warning("a cancellation could not be finished", extra={"registrationId": rid, "error": str(exc)})
                outcome = "stuck"
            counts[outcome] = counts.get(outcome, 0) + 1
        if counts:
            logger.info("cancellations left half-way", extra=counts)
        return counts

    def after_refund_settled(self, reg: Registration, entry: LedgerEntry) -> None:
        """The sweeper found the provider's answer to a refund: if it was a cancellation's that
        stopped waiting for it, the cancellation finishes now (the place back, the email)."""
        if reg.cancelRefundKey != entry.key or reg.status != RegistrationPhase.CANCELLING:
            return
        race, _ = self._catalog.definition(reg.raceId)
        self.cancel(PROVIDER, race, reg.registrationId)

    def _forget_status(self, registration_id: str) -> None:
        if self._statuses is not None:
            self._statuses.forget(registration_id)

    def _tell_the_payer(self, reg: Registration) -> None:
        """A team member's refund goes to the card that paid, the captain's: the captain hears of
        it too, whoever cancelled and whatever finished it (a click, the sweeper, a webhook),
        under a key of its own so the sender drops neither and repeats neither."""
        captain_id = (reg.teamMembers or [reg.registrationId])[0]
        if captain_id == reg.registrationId or not refunded_by_cancel(reg):
            return
        captain = self._regs.get(captain_id)
        if captain is None or not captain.email:  # purged, or gone: the member's own email stands
            logger.warning("a team's payer could not be told of a refund", extra={"registrationId": reg.registrationId})
            return
        message = refund_email(reg)
        data = message.data | {"payerFirstName": captain.firstName, "teamName": reg.teamName}
        self._emails.send(
            message.model_copy(update={"to": captain.email, "dedupKey": f"{message.dedupKey}:payer", "data": data})
        )

    def _refund_and_release(self, reg: Registration) -> None:
        rid = reg.registrationId
        refund_id, refunded = self._refund(reg)
        hold = self._holds.get(reg.holdId)
        if hold is None:
            raise RuntimeError(f"registration {rid} has no hold {reg.holdId}")
        line = self._returns is not None and waitlisted(self._catalog, hold)
        for _ in range(LINE_TRIES):
            # The place goes to the waitlist's pool first (``places.returns``), in this transaction.
            place = (
                self._returns.give_back(reg.raceId, reg.eventId, {reg.shard or hold.shard: 1}, waitlist=True)
                if line and self._returns is not None
                else None
            )
            now = datetime.now(UTC).isoformat()
            items = [
                *self._regs.finish_cancel_items(reg, hold, refund_id, now, refunded, place=place),
                self._regs.close_cancel_item(rid),
            ]
            try:
                self._transact(items)
            except ConditionFailed as exc:
                if place is not None and place.line_moved(exc, items):
                    continue  # the line changed between its read and this write: build it again
                return  # finished by a concurrent call: the loop reads CANCELLED
            break
        else:
            return  # the line kept moving: the caller's loop (or the sweeper) finishes it
        if place is None or place.freed == "public":  # a place kept for the waitlist leaves it sold out
            self._catalog.places_came_back(reg.raceId, reg.eventId)
        metrics.add_metric(name="RegistrationCancelled", unit="Count", value=1)
        logger.info("registration cancelled", extra={"registrationId": rid, "refundId": refund_id, "cents": refunded})


def cancelled_by(who: Director | Actor) -> str:
    """What a cancellation records as who began it: a director's id, the provider's or a job's
    name, or ``runner`` (the registration's own runner: its id is the item's own, and the
    address never goes there)."""
    actor = Actor.of(who)
    return RUNNER if actor.kind == "runner" else actor.id


# Who the audit names for a cancellation the sweeper finished (it began as someone else's).
REPLACED = "This link was replaced (the place changed hands or address): nothing was cancelled."
SYSTEM = Director(sub="system-sweeper", username="the sweeper (finished a cancellation left half-way)")
# Who the audit names for a refund made in the provider's dashboard, outside Racecap.
PROVIDER = Director(sub="payment-provider", username="payment provider (refund made outside Racecap)")


def _view(reg: Registration, changed: bool) -> CancellationView:
    legacy = reg.cancelRefund is None  # begun before the refund choice: refunded in full
    return CancellationView(
        registrationId=reg.registrationId,
        status="CANCELLED",
        refund="FULL" if legacy else reg.cancelRefund,  # type: ignore[arg-type]
        refundedCents=refunded_by_cancel(reg),
        refundId=reg.refundId or "",
        amountCents=reg.amountCents,
        currency=reg.currency,
        cancelledAt=reg.cancelledAt or "",
        changed=changed,
    )
