"""The payment step: a hold records one PaymentIntent as its payment begins, and only that one
is ever handed to the runner or charged."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

from racecap.aws.queues import MessageQueue
from racecap.cache import Flags
from racecap.errors import (
    Conflict,
    HoldExpired,
    HoldNotFound,
    PaymentDeclined,
    PaymentNotStarted,
    PaymentPending,
    PaymentRefused,
)
from racecap.holds.models import (
    DONE_PHASES,
    GONE_PHASES,
    SETTLED_PHASES,
    Attempt,
    Hold,
    HoldPhase,
)
from racecap.holds.snapshots import HoldSnapshots
from racecap.observability import logger, metrics
from racecap.payments.calls import provider_call
from racecap.payments.port import (
    IntentStatus,
    NewIntent,
    PaymentIntent,
    PaymentProvider,
    PaymentRejected,
)
from racecap.pulse import FREE, QUEUED, pulse
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event, Race
from racecap.registration.attempts import Attempts
from racecap.registration.messages import registration_message
from racecap.registration.models import RegistrationAccepted
from racecap.registration.store import RegistrationStore

# What the runner sees of an unpaid intent (``RegistrationAccepted.status``).
UNPAID_STATUS = {
    IntentStatus.REQUIRES_PAYMENT_METHOD: "PAYMENT_REQUIRED",
    IntentStatus.REQUIRES_CONFIRMATION: "PAYMENT_REQUIRED",
    IntentStatus.REQUIRES_ACTION: "REQUIRES_ACTION",
    IntentStatus.PROCESSING: "PROCESSING",
}


def attempt_key(hold_id: str, email: str) -> str:
    """Same hold + same email = same attempt (a retry, a second tab): it may begin again."""
    return hashlib.sha256(f"{hold_id}|{email}".encode()).hexdigest()[:40]


def intent_key(hold_id: str, new: NewIntent) -> str:
    """The idempotency key of a hold's intent: the hold and every parameter of the request, so
    a repeat (a retry, a second tab, a lost answer) replays the same intent, and a request that
    differs (another runner's details on the hold, a price a code changed) is another intent,
    never a provider's refusal of a reused key. Only the one ``begin_payment`` records is ever
    handed out."""
    request = json.dumps(
        [new.amount_cents, new.currency.lower(), sorted(new.metadata.items()), new.description], ensure_ascii=False
    )
    return f"intent-{hold_id}-{hashlib.sha256(request.encode()).hexdigest()[:24]}"


def _whose(hold: Hold) -> tuple[str, str, str]:
    """``provider_call``'s hold, race and event: a rate limit counts against the hold's opening."""
    return hold.holdId, hold.raceId, hold.eventId


def payment_metadata(hold: Hold, attempt: Attempt) -> dict[str, str]:
    """What the provider keeps with the payment: enough to find the hold again after a crash."""
    return {
        "holdId": hold.holdId,
        "registrationId": hold.registrationId,
        "raceId": hold.raceId,
        "eventId": hold.eventId,
        "email": attempt.email,
        # A team's payment covers every member's registration: the captain's is named above.
        **({"places": str(hold.places), "teamName": attempt.teamName or ""} if hold.is_team else {}),
    }


# How long "this payment queued its hold" is kept: the webhook comes seconds after the payment,
# a redelivery or the reconciliation's overlap within hours. Past it, the hold is read.
PAID_MARK_TTL_S = 6 * 3600.0


def paid_mark(payment_id: str) -> str:
    return f"paid:{payment_id}"


def already_applied(hold: Hold, intent: PaymentIntent) -> bool:
    """The hold is past paying (queued, confirmed or cancelled) and this succeeded intent is
    its own payment (recorded as its intent, or as paid by whoever queued it): nothing to do.
    Settled is for good, so a hold read earlier still answers this."""
    return hold.status in SETTLED_PHASES and intent.id in (hold.chargeId, hold.intentId)


class PaymentStep:
    """The payment step of a registration, after the form: the hold's one PaymentIntent, the card
    confirmed on the server or in the browser (3-D Secure), the paid hold queued for the writer, a
    lost message sent again, and the provider's word on a payment. Part of ``RegistrationService``
    (which sets these attributes)."""

    _catalog: RaceDefinitions
    _holds: Attempts
    _registrations: RegistrationStore
    _payments: PaymentProvider
    _queue: MessageQueue
    _requeue_after: timedelta
    _marks: Flags | None
    _hold_hints: HoldSnapshots | None

    def confirm(self, hold_id: str, now: datetime | None = None) -> RegistrationAccepted:
        """The runner's browser says it confirmed the intent: the server asks the provider."""
        answer, intent = self._settle_paying(hold_id, now or datetime.now(UTC), by_clock=False, report_decline=True)
        if intent is None:
            return answer  # already paid
        if answer.status == "PAYMENT_REQUIRED" and intent.decline_code is None:
            raise PaymentPending("The payment has not been confirmed yet.", retry_after=2)
        if answer.status in ("REQUIRES_ACTION", "PROCESSING"):
            raise PaymentPending("Your payment is still being processed; please retry in a moment.", retry_after=2)
        return answer

    def payment_step(self, hold_id: str, now: datetime | None = None) -> RegistrationAccepted:
        """The card step of a hold whose details were sent, wherever its link is opened: the
        hold's one intent (its client secret), without the runner's details. A payment that
        already succeeded queues the registration, as the confirm call would."""
        answer, _ = self._settle_paying(hold_id, now or datetime.now(UTC), by_clock=True, report_decline=False)
        return answer

    def _settle_paying(
        self, hold_id: str, now: datetime, *, by_clock: bool, report_decline: bool
    ) -> tuple[RegistrationAccepted, PaymentIntent | None]:
        """A paying hold settled by what the provider says of its intent (and that intent), or
        the answer for a hold already paid (and no intent: nothing was asked)."""
        known = self._known(hold_id, now, by_clock=by_clock)
        if known is not None and known.status in DONE_PHASES:
            # The confirm call, a moment after the payment: QUEUED is its answer (the waiting
            # screen then polls). The card step's link, opened any time later, reads the table.
            if not by_clock:
                return self._paid_answer(known), None
            known = None
        intent = None
        if known is not None:
            intent = provider_call(lambda: self._payments.retrieve_intent(str(known.intentId)), hold_id)
            if self._queued_as_known(known, intent, now):
                return RegistrationAccepted(registrationId=known.registrationId, status="QUEUED"), intent
        hold = self._paying_hold(hold_id, now, by_clock=by_clock)
        if isinstance(hold, RegistrationAccepted):
            return hold, None
        assert hold.attempt is not None  # _paying_hold's promise
        if intent is None or intent.id != hold.intentId:
            intent = provider_call(lambda: self._payments.retrieve_intent(str(hold.intentId)), hold_id)
        race, event = self._race_event(hold)
        return self._settle(hold, hold.attempt, intent, race, event, now, report_decline=report_decline), intent

    def _known(self, hold_id: str, now: datetime, *, by_clock: bool) -> Hold | None:
        """The hold as the last step left it (``holds.snapshots``): QUEUED (paid and queued,
        settled for good: the answer needs nothing more), or PAYING its recorded intent with no
        code change under way (the confirm call's usual case)."""
        known = self._hold_hints.get(hold_id) if self._hold_hints is not None else None
        if known is not None and known.status in DONE_PHASES:
            return known
        if known is None or known.status != HoldPhase.PAYING or known.attempt is None or known.intentId is None:
            return None
        if known.reprice is not None or (by_clock and known.expired(now)):
            return None
        return known

    def _queued_as_known(self, known: Hold, intent: PaymentIntent, now: datetime) -> bool:
        """Queue a hold known from its snapshot when its payment plainly succeeded: the mark's
        condition (PAYING with this attempt) is what makes the snapshot's word safe. Anything
        else (not succeeded, another amount, the condition failed: the webhook queued it in
        between) is False, and the caller works it out from the table as before."""
        attempt = known.attempt
        if attempt is None or intent.status != IntentStatus.SUCCEEDED or not self._pays_for(intent, attempt):
            return False
        race, event = self._race_event(known)
        if not self.enqueue_paid(known, attempt, intent.id, race, event, now):
            return False  # moved on since the snapshot (the writer, a sweeper): a duplicate message changes nothing
        metrics.add_metric(name="RegistrationQueued", unit="Count", value=1)
        return True

    def _paying_hold(self, hold_id: str, now: datetime, *, by_clock: bool) -> Hold | RegistrationAccepted:
        """The hold a payment call is about, PAYING with its details and intent, or the answer
        for one already paid; HoldNotFound, HoldExpired (by its phase, and with ``by_clock`` by
        its expiry too) or PaymentNotStarted otherwise."""
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if hold.status in DONE_PHASES:
            return self._paid_answer(hold)
        if hold.status in GONE_PHASES or hold.status == HoldPhase.CANCELLED or (by_clock and hold.expired(now)):
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")
        if hold.status != HoldPhase.PAYING or hold.attempt is None or hold.intentId is None:
            raise PaymentNotStarted("Send the runner's details first; no payment has started for this hold.")
        return hold

    @staticmethod
    def _paid_answer(hold: Hold) -> RegistrationAccepted:
        return RegistrationAccepted(
            registrationId=hold.registrationId,
            status="CONFIRMED" if hold.status == HoldPhase.CONFIRMED else "QUEUED",
        )

    def payment_succeeded(self, intent: PaymentIntent, now: datetime | None = None) -> str:
        """A succeeded intent, however we learnt of it (webhook, reconciliation): queue the
        registration once. Answers "queued", "already" (nothing to do) or "orphan" (no hold
        is entitled to this payment: the caller refunds it)."""
        now = now or datetime.now(UTC)
        hold_id = intent.metadata.get("holdId", "")
        if hold_id and self._marks is not None and self._marks.has_flag(paid_mark(intent.id), local_ttl=0):
            return "already"
        hold = self._holds.get(hold_id) if hold_id else None
        if hold is None:
            return self._registered_by(intent)
        if hold.status in SETTLED_PHASES:
            if already_applied(hold, intent):
                self._mark_paid(intent.id)  # a redelivery or a reconciliation's next look: no read
                return "already"
            return "orphan"
        if hold.status != HoldPhase.PAYING or hold.attempt is None:
            return "orphan"
        hold = self._price_settled(hold, intent)
        if hold.attempt is None or hold.intentId not in (None, intent.id) or not self._pays_for(intent, hold.attempt):
            return "orphan"
        race, event = self._race_event(hold)
        self.enqueue_paid(hold, hold.attempt, intent.id, race, event, now)
        metrics.add_metric(name="RegistrationQueued", unit="Count", value=1)
        return "queued"

    def _registered_by(self, intent: PaymentIntent) -> str:
        """A payment whose hold is gone: the TTL of old holds, or the retention job (which
        also empties the registration's payment id). If its registration exists and this
        payment paid for it, or its data was purged, it is "already" — never refunded as an
        orphan: a webhook redelivered or a reconciliation window reaching back that far would
        otherwise refund a runner who is registered."""
        rid = intent.metadata.get("registrationId", "")
        reg = self._registrations.get(rid) if rid else None
        if (
            reg is not None
            and reg.holdId == intent.metadata.get("holdId")
            and (reg.purgedAt or reg.chargeId == intent.id)
        ):
            return "already"
        return "orphan"

    def enqueue_paid(
        self, hold: Hold, attempt: Attempt, payment_id: str, race: Race, event: Event, now: datetime
    ) -> bool:
        """Send the registration to the writer, then mark the hold QUEUED; False: the hold had
        moved on (the mark changed nothing; the writer keys on the registration id, so the
        message is at most a duplicate)."""
        self._queue.send(registration_message(hold, attempt, payment_id, race, event, datetime.now(UTC)))
        if not self._holds.mark_queued(hold, attempt, payment_id, now, requeue_at=now + self._requeue_after):
            return False
        # Once per registration: the mark above succeeds once (a team's places each).
        pulse.count(hold.raceId, QUEUED if payment_id else FREE, hold.eventId, n=hold.places)
        self._mark_paid(payment_id)
        if self._hold_hints is not None:
            # Queued is settled for good: a confirm call after the webhook (or a second one)
            # answers from this, with no read and no second message.
            queued = {"status": HoldPhase.QUEUED, "attempt": attempt, "chargeId": payment_id or None}
            self._hold_hints.keep(hold.model_copy(update=queued))
        return True

    def _mark_paid(self, payment_id: str) -> None:
        """The hold this payment paid for is settled with it (QUEUED, ``chargeId``): settled is
        for good (``already_applied``), so the provider's webhook for it, seconds later, answers
        "already" from this mark instead of reading the hold (issue 38: a read per registration).
        Lost with Redis: the webhook reads the hold, as before."""
        if self._marks is not None:
            self._marks.flag(paid_mark(payment_id), PAID_MARK_TTL_S)

    def resend_unconfirmed(self, hold: Hold, now: datetime) -> bool:
        """The backstop for a lost message: a queued hold the writer has not confirmed by its
        expiry (where the sweeper's index keeps it) and ``requeue_after`` after it was queued,
        whichever is later, gets its registration message again (the writer keys on
        the registration id, so if the first one was only late, the second changes nothing).
        The claim comes first, so of concurrent sweepers exactly one sends; each later re-send
        waits twice as long, so a long backlog is not flooded with copies. True: sent."""
        if hold.status != HoldPhase.QUEUED or hold.attempt is None or hold.chargeId is None:
            return False
        if hold.requeueAt is not None and hold.requeueAt > now:
            # Found at its expiry (the index keeps a queued hold there), paid too recently for a
            # re-send: the writer is only slow. Seen again at its re-send time.
            self._holds.await_requeue(hold)
            return False
        wait = self._requeue_after * 2 ** min(hold.requeues + 1, 6)
        if not self._holds.postpone_requeue(hold, now + wait):
            return False  # another sweeper sent it, or the writer confirmed it meanwhile
        race, event = self._race_event(hold)
        self._queue.send(registration_message(hold, hold.attempt, hold.chargeId, race, event, now))
        logger.warning(
            "re-sent a paid registration the writer had not confirmed",
            extra={"registrationId": hold.registrationId, "queuedAt": str(hold.queuedAt), "resends": hold.requeues + 1},
        )
        metrics.add_metric(name="RegistrationResent", unit="Count", value=1)
        return True

    def _race_event(self, hold: Hold) -> tuple[Race, Event]:
        race, events = self._catalog.definition(hold.raceId)
        return race, next(e for e in events if e.eventId == hold.eventId)

    def _intent_for(
        self, hold: Hold, attempt: Attempt, race: Race, event: Event, provider: PaymentProvider
    ) -> PaymentIntent:
        """The intent this attempt pays with: the hold's, recorded already, or created now (the
        same request replays it: ``intent_key``), before anything is written; ``begin_payment``
        then records it with the email's claim. Through ``provider``, the one whose first call
        the caller admitted (``RegistrationService._admitted``)."""
        try:
            if hold.intentId is not None:
                intent_id = hold.intentId
                return provider_call(lambda: provider.retrieve_intent(intent_id), *_whose(hold))
            new = NewIntent(
                amount_cents=attempt.amountCents,
                currency=attempt.currency,
                metadata=payment_metadata(hold, attempt),
                description=f"{race.name} — {event.name}",
            )
            return provider_call(
                lambda: provider.create_intent(new, idempotency_key=intent_key(hold.holdId, new)), *_whose(hold)
            )
        except PaymentRejected as exc:
            # The provider refused the request itself (a price under its minimum set before
            # prices were checked, a currency the account cannot take...): nothing was charged,
            # and no retry by the runner can change it, so a 4xx that says so, never a 500.
            logger.error(
                "payment provider refused the hold's intent",
                extra={"holdId": hold.holdId, "raceId": hold.raceId, "eventId": hold.eventId, "code": exc.code},
            )
            metrics.add_metric(name="PaymentRefused", unit="Count", value=1)
            raise PaymentRefused(
                f"The payment service cannot take this event's payment ({exc.code}); nothing was charged. "
                "Your place stays held; please tell the race organiser."
            ) from exc

    def _confirm_on_server(self, hold: Hold, intent: PaymentIntent, payment_method: str) -> PaymentIntent:
        try:
            return provider_call(
                lambda: self._payments.confirm_intent(
                    intent.id, payment_method=payment_method, idempotency_key=f"confirm-{intent.id}-{payment_method}"
                ),
                hold.holdId,
            )
        except PaymentRejected as exc:
            # An unknown PaymentMethod, or an intent no longer confirmable: nothing charged.
            metrics.add_metric(name="PaymentRejected", unit="Count", value=1)
            raise PaymentDeclined("That card was not accepted. Your place is still held: try another card.") from exc

    def _settle(
        self,
        hold: Hold,
        attempt: Attempt,
        intent: PaymentIntent,
        race: Race,
        event: Event,
        now: datetime,
        *,
        report_decline: bool,
    ) -> RegistrationAccepted:
        if intent.status == IntentStatus.SUCCEEDED:
            if hold.reprice is not None:
                hold = self._price_settled(hold, intent)
                attempt = hold.attempt or attempt
            if not self._pays_for(intent, attempt):
                raise Conflict("This payment does not match the hold; nothing was registered.")
            self.enqueue_paid(hold, attempt, intent.id, race, event, now)
            metrics.add_metric(name="RegistrationQueued", unit="Count", value=1)
            return RegistrationAccepted(registrationId=hold.registrationId, status="QUEUED")
        if intent.status == IntentStatus.CANCELED:
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")
        if report_decline and intent.status == IntentStatus.REQUIRES_PAYMENT_METHOD and intent.decline_code:
            metrics.add_metric(name="PaymentDeclined", unit="Count", value=1)
            if intent.decline_code == "payment_intent_authentication_failure":
                raise PaymentDeclined("The card's 3-D Secure check failed. Your place is still held: try again.")
            raise PaymentDeclined("Your card was declined. Your place is still held: try another card.")
        return RegistrationAccepted(
            registrationId=hold.registrationId,
            status=UNPAID_STATUS[intent.status],  # type: ignore[arg-type]
            clientSecret=intent.client_secret,
            amountCents=attempt.amountCents,
            currency=attempt.currency,
        )

    def _price_settled(self, hold: Hold, intent: PaymentIntent) -> Hold:
        """A discount code's change of the amount under way when the intent succeeded
        (racecap.codes): the amount paid says whether it happened — the hold's price becomes
        it, or the change is dropped and its use given back. The hold as it is then."""
        change = hold.reprice
        if change is None:
            return hold
        if intent.amount_cents == change.amountCents:
            self._holds.finish_reprice(hold, change)
        else:
            self._holds.undo_reprice(hold, change)
        return self._holds.get(hold.holdId) or hold

    @staticmethod
    def _pays_for(intent: PaymentIntent, attempt: Attempt) -> bool:
        """The server's price, in the server's currency: a payment for anything else is not this place's."""
        return intent.amount_cents == attempt.amountCents and intent.currency.lower() == attempt.currency.lower()

    def _already_registered(self, hold: Hold, email: str) -> RegistrationAccepted | None:
        if hold.status not in DONE_PHASES:
            return None
        if hold.attempt is None or hold.attempt.email != email:
            raise Conflict("This hold has already been used for another registration.")
        if hold.status == HoldPhase.CONFIRMED:
            return RegistrationAccepted(registrationId=hold.registrationId, status="CONFIRMED")
        return RegistrationAccepted(registrationId=hold.registrationId, status="QUEUED")
