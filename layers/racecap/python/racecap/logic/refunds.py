"""Cancelling a confirmed registration: refund, place back to the pool, an email to the runner.

The order of steps is what makes a repeat harmless and a crash recoverable:

1. CONFIRMED → CANCELLING, with the audit entry, in one transaction: the director's
   decision is on record before any money moves;
2. refund through the provider with a key derived from the registration
   (``refund-<registrationId>``): however often this runs, the runner is refunded once;
3. CANCELLING → CANCELLED in one transaction with everything the place touches: the
   cap shard gives the place back, the email's claim is released (the runner may
   register again), the counters move;
4. the refund email goes on the queue (``dedupKey`` ``refund:<registrationId>``: the
   sender sends it once however often it is enqueued).

Repeating the call at any point resumes from where the last one stopped; repeating it
after it finished only re-enqueues the (deduplicated) email. If the provider refuses the
refund outright, the registration goes back to CONFIRMED and nothing has changed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from racecap.dal.payments import AlreadyRefunded, PaymentProvider, PaymentRejected, PaymentUnavailable
from racecap.dal.ports import HoldStore, MessageQueue, RegistrationStore
from racecap.dal.transactions import ConditionFailed, TransactItem
from racecap.domain import EmailMessage, Registration, RegistrationPhase
from racecap.errors import Busy, Conflict, RefundFailed, RegistrationNotFound
from racecap.logic.audit import AuditTrail
from racecap.logic.races import RaceDefinitions
from racecap.models import CancellationView, Director, Race
from racecap.observability import logger, metrics

MAX_STEPS = 4  # each loop moves the registration one state on; more means a concurrent fight


def refund_key(registration_id: str) -> str:
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
            "amountCents": reg.amountCents,
            "currency": reg.currency,
        },
    )


class Cancellations:
    def __init__(
        self,
        registrations: RegistrationStore,
        holds: HoldStore,
        payments: PaymentProvider,
        emails: MessageQueue,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditTrail,
        catalog: RaceDefinitions,
    ) -> None:
        self._regs = registrations
        self._holds = holds
        self._payments = payments
        self._emails = emails
        self._transact = transact
        self._audit = audit
        self._catalog = catalog

    def cancel(self, director: Director, race: Race, registration_id: str, reason: str = "") -> CancellationView:
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
                self._emails.send(refund_email(reg))
                return _view(reg, changed)
            if status == RegistrationPhase.CONFIRMED:
                self._begin(director, reg, reason)
                changed = True
                continue
            if status == RegistrationPhase.CANCELLING:
                self._refund_and_release(reg)
                changed = True
                continue
            raise Conflict(f"Registration {registration_id} is {status} and cannot be cancelled.")
        raise Conflict("The registration kept changing while we cancelled it; please retry.")

    def refunded_elsewhere(self, registration_id: str) -> bool:
        """The provider says the registration's payment was refunded outside Racecap (its
        dashboard): cancel the registration and give the place back, audited as such. The
        refund call that finishes it answers ``AlreadyRefunded``; nothing is refunded twice.
        False when there is no registration (yet) to cancel."""
        reg = self._regs.get(registration_id)
        if reg is None:
            return False
        if reg.status == RegistrationPhase.CONFIRMED:
            self._begin(PROVIDER, reg, "refunded in the payment provider's dashboard")
            logger.warning("payment refunded outside Racecap", extra={"registrationId": registration_id})
            metrics.add_metric(name="RefundedOutside", unit="Count", value=1)
        race, _ = self._catalog.definition(reg.raceId)
        self.cancel(PROVIDER, race, registration_id)
        return True

    def _begin(self, director: Director, reg: Registration, reason: str) -> None:
        rid = reg.registrationId
        now = datetime.now(UTC).isoformat()
        details = {
            "eventId": reg.eventId,
            "bib": reg.bib,
            "email": reg.email,
            "amountCents": reg.amountCents,
            "currency": reg.currency,
            **({"reason": reason} if reason else {}),
        }
        try:
            self._transact(
                [
                    self._regs.begin_cancel_item(rid, now, director.sub),
                    self._audit.item(director, reg.raceId, "registration.cancel", rid, **details),
                ]
            )
        except ConditionFailed:
            pass  # a concurrent call got there first: the loop reads the new state

    def _refund_and_release(self, reg: Registration) -> None:
        rid = reg.registrationId
        try:
            refund_id = self._payments.refund(intent_id=reg.chargeId, idempotency_key=refund_key(rid)).id
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
            try:
                self._transact([self._regs.undo_cancel_item(rid)])
            except ConditionFailed:
                pass
            raise RefundFailed(f"The payment provider refused the refund ({exc.code}); nothing was changed.") from exc
        hold = self._holds.get(reg.holdId)
        if hold is None:
            raise RuntimeError(f"registration {rid} has no hold {reg.holdId}")
        try:
            self._transact(self._regs.finish_cancel_items(reg, hold, refund_id, datetime.now(UTC).isoformat()))
        except ConditionFailed:
            return  # finished by a concurrent call: the loop reads CANCELLED
        self._catalog.places_came_back(reg.raceId, reg.eventId)
        metrics.add_metric(name="RegistrationCancelled", unit="Count", value=1)
        logger.info("registration cancelled and refunded", extra={"registrationId": rid, "refundId": refund_id})


# Who the audit names for a refund made in the provider's dashboard, outside Racecap.
PROVIDER = Director(sub="payment-provider", username="payment provider (refund made outside Racecap)")


def _view(reg: Registration, changed: bool) -> CancellationView:
    return CancellationView(
        registrationId=reg.registrationId,
        status="CANCELLED",
        refundId=reg.refundId or "",
        amountCents=reg.amountCents,
        currency=reg.currency,
        cancelledAt=reg.cancelledAt or "",
        changed=changed,
    )
