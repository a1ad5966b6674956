"""Registering and paying for a held place, and asking how it went.

The order of steps is what makes the non-negotiables hold under crashes:

1. claim the email for the race and mark the hold PAYING with this attempt — one
   transaction, so two runners can't both get one email, nor one hold pay twice;
2. create and confirm a payment intent with an idempotency key derived from (hold, email,
   card): a retry of the same attempt can never charge twice, the provider replays its
   first answer;
3. put the paid registration on the queue, then mark the hold QUEUED.

A crash after 2 or 3 leaves the hold PAYING; the runner's retry resumes it, and if the
runner never comes back the sweeper asks the provider for the hold's intents and
finishes (or unwinds) it. So no paid registration is ever lost.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime

from racecap.dal.payments import (
    IntentStatus,
    PaymentProvider,
    PaymentRateLimited,
    PaymentRejected,
    PaymentUnavailable,
)
from racecap.dal.ports import HoldStore, MessageQueue, RegistrationStore
from racecap.domain import (
    DONE_PHASES,
    GONE_PHASES,
    PAID_PHASES,
    Attempt,
    BeginOutcome,
    Hold,
    HoldPhase,
    PaidRegistration,
)
from racecap.errors import (
    Busy,
    Conflict,
    EmailAlreadyRegistered,
    HoldExpired,
    HoldNotFound,
    PaymentDeclined,
    RegistrationNotFound,
)
from racecap.logic.holds import hold_id_for
from racecap.logic.races import RaceDefinitions
from racecap.logic.validation import RegistrationRequest
from racecap.models import Event, Race, RegistrationAccepted, RegistrationStatus
from racecap.observability import logger, metrics

# The paper's waiting screen: poll after 10, 20, 40, then every 60 seconds.
BACKOFF_SCHEDULE = ((10, 10), (30, 20), (70, 40))
BACKOFF_LAST = 60


def retry_after(queued_for_s: float) -> int:
    for until, wait in BACKOFF_SCHEDULE:
        if queued_for_s < until:
            return wait
    return BACKOFF_LAST


def attempt_key(hold_id: str, email: str, token: str) -> str:
    return hashlib.sha256(f"{hold_id}|{email}|{token}".encode()).hexdigest()[:40]


def charge_key(attempt: Attempt) -> str:
    return f"charge-{attempt.key}"


def payment_metadata(hold: Hold, attempt: Attempt) -> dict[str, str]:
    """What the provider keeps with the payment: enough to find the hold again after a crash."""
    return {
        "holdId": hold.holdId,
        "registrationId": hold.registrationId,
        "raceId": hold.raceId,
        "eventId": hold.eventId,
        "email": attempt.email,
    }


def registration_message(
    hold: Hold, attempt: Attempt, payment_id: str, race: Race, event: Event, now: datetime
) -> PaidRegistration:
    """What the writer needs to persist a registration without reading anything else."""
    return PaidRegistration(
        registrationId=hold.registrationId,
        holdId=hold.holdId,
        raceId=hold.raceId,
        eventId=hold.eventId,
        email=attempt.email,
        firstName=attempt.firstName,
        lastName=attempt.lastName,
        dateOfBirth=attempt.dateOfBirth,
        amountCents=attempt.amountCents,
        currency=attempt.currency,
        chargeId=payment_id,
        raceName=race.name,
        raceDate=race.raceDate,
        eventName=event.name,
        paidAt=now.isoformat(),
    )


class RegistrationService:
    def __init__(
        self,
        catalog: RaceDefinitions,
        holds: HoldStore,
        registrations: RegistrationStore,
        payments: PaymentProvider,
        queue: MessageQueue,
    ) -> None:
        self._catalog = catalog
        self._holds = holds
        self._registrations = registrations
        self._payments = payments
        self._queue = queue

    def register(self, hold_id: str, request: RegistrationRequest, now: datetime | None = None) -> RegistrationAccepted:
        now = now or datetime.now(UTC)
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        already = self._already_registered(hold, request)
        if already is not None:
            return already
        if hold.status in GONE_PHASES or (hold.status == HoldPhase.HELD and hold.expired(now)):
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")

        race, events = self._catalog.definition(hold.raceId)
        event = next(e for e in events if e.eventId == hold.eventId)
        attempt = Attempt(
            key=attempt_key(hold_id, request.email, request.paymentToken),
            email=request.email,
            firstName=request.firstName,
            lastName=request.lastName,
            dateOfBirth=request.dateOfBirth.isoformat(),
            amountCents=event.priceCents,
            currency=event.currency,
            startedAt=now.isoformat(),
        )
        outcome = self._holds.begin_payment(hold, attempt, now)
        if outcome == BeginOutcome.EMAIL_TAKEN:
            metrics.add_metric(name="EmailAlreadyRegistered", unit="Count", value=1)
            raise EmailAlreadyRegistered(f"{request.email} is already registered for {race.name}.")
        if outcome == BeginOutcome.HOLD_GONE:
            return self._explain_hold_gone(hold_id, request)

        try:
            intent = self._payments.create_intent(
                amount_cents=attempt.amountCents,
                currency=attempt.currency,
                idempotency_key=charge_key(attempt),
                metadata=payment_metadata(hold, attempt),
                description=f"{race.name} — {event.name}",
                payment_method=request.paymentToken,
                confirm=True,
            )
        except PaymentRateLimited as exc:
            logger.warning("payment provider rate limited", extra={"holdId": hold_id})
            raise Busy(
                "The payment service is busy; please retry in a moment.", retry_after=max(1, math.ceil(exc.retry_after))
            ) from exc
        except PaymentUnavailable as exc:
            # Unknown outcome: keep PAYING. The runner's retry (same attempt) or the
            # sweeper will find out from the provider; never assume declined.
            logger.warning("payment provider unavailable", extra={"holdId": hold_id, "error": str(exc)})
            metrics.add_metric(name="PaymentUnavailable", unit="Count", value=1)
            raise Busy("The payment service is not answering; please retry in a moment.", retry_after=5) from exc
        except PaymentRejected as exc:
            # The provider refused the card outright (an unknown token): nothing was
            # charged, so this is a decline as far as the runner is concerned.
            self._holds.payment_declined(hold, attempt)
            metrics.add_metric(name="PaymentRejected", unit="Count", value=1)
            raise PaymentDeclined("That card was not accepted. Your place is still held: try another card.") from exc
        if intent.status == IntentStatus.REQUIRES_PAYMENT_METHOD:
            self._holds.payment_declined(hold, attempt)
            metrics.add_metric(name="PaymentDeclined", unit="Count", value=1)
            raise PaymentDeclined("Your card was declined. Your place is still held: try another card.")
        if intent.status != IntentStatus.SUCCEEDED:
            # Not decided yet (processing, or 3-D Secure the server cannot complete): keep
            # PAYING, like an unknown outcome; the retry replays the intent and the sweeper
            # cancels it if it never succeeds.
            raise Busy("Your payment is still being processed; please retry in a moment.", retry_after=5)

        self.enqueue_paid(hold, attempt, intent.id, race, event, now)
        metrics.add_metric(name="RegistrationQueued", unit="Count", value=1)
        return RegistrationAccepted(registrationId=hold.registrationId, status="QUEUED")

    def enqueue_paid(
        self, hold: Hold, attempt: Attempt, payment_id: str, race: Race, event: Event, now: datetime
    ) -> None:
        self._queue.send(registration_message(hold, attempt, payment_id, race, event, datetime.now(UTC)))
        self._holds.mark_queued(hold, attempt, payment_id, now)

    def _already_registered(self, hold: Hold, request: RegistrationRequest) -> RegistrationAccepted | None:
        if hold.status not in DONE_PHASES:
            return None
        if hold.attempt is None or hold.attempt.email != request.email:
            raise Conflict("This hold has already been used for another registration.")
        if hold.status == HoldPhase.CONFIRMED:
            return RegistrationAccepted(registrationId=hold.registrationId, status="CONFIRMED")
        return RegistrationAccepted(registrationId=hold.registrationId, status="QUEUED")

    def _explain_hold_gone(self, hold_id: str, request: RegistrationRequest) -> RegistrationAccepted:
        hold = self._holds.get(hold_id)
        done = self._already_registered(hold, request) if hold else None
        if done is not None:
            return done
        if hold is not None and hold.status == HoldPhase.PAYING:
            raise Conflict("A payment for this hold is already in progress.", retry_after=2)
        raise HoldExpired("Your hold on this place has expired; please hold a new place.")

    # -- the waiting screen -----------------------------------------------------------------
    def status(self, registration_id: str, now: datetime | None = None) -> tuple[RegistrationStatus, int | None]:
        now = now or datetime.now(UTC)
        reg = self._registrations.get(registration_id)
        if reg is not None:
            return RegistrationStatus(
                registrationId=registration_id,
                status="CONFIRMED",
                raceId=reg.raceId,
                eventId=reg.eventId,
                bib=reg.bib,
                firstName=reg.firstName,
                lastName=reg.lastName,
                eventName=reg.eventName,
                raceName=reg.raceName,
                confirmedAt=datetime.fromisoformat(reg.confirmedAt),
            ), None
        hold = self._holds.get(hold_id_for(registration_id)) if registration_id.startswith("reg_") else None
        if hold is None or hold.registrationId != registration_id or hold.attempt is None:
            raise RegistrationNotFound(f"No registration with id {registration_id}.")
        base = RegistrationStatus(
            registrationId=registration_id, status="QUEUED", raceId=hold.raceId, eventId=hold.eventId
        )
        if hold.status in PAID_PHASES:
            since = hold.queuedAt or datetime.fromisoformat(hold.attempt.startedAt)
            return base, retry_after((now - since).total_seconds())
        base.status = "FAILED"
        base.message = "The registration could not be completed and no payment was kept."
        return base, None
