"""Registering and paying for a held place, and asking how it went.

One PaymentIntent per hold; the browser confirms it (Stripe.js, 3-D Secure when the card
asks), the server decides. The order of steps is what makes the non-negotiables hold under
crashes:

1. claim the email for the race and mark the hold PAYING with this attempt — one
   transaction, so two runners can't both get one email, and the loser of an email race
   is never even offered the card form;
2. create the hold's PaymentIntent with an idempotency key derived from the hold alone
   (``intent-<holdId>``): a second tab, a retry after a lost answer or after a decline all
   get the same intent, so one hold can never be charged twice; amount and currency are
   the price fixed on the hold when the place was taken (a director's later price edit
   changes new holds only); the intent's id is recorded on the hold;
3. once the intent has succeeded — told by the runner's confirm call, the
   ``payment_intent.succeeded`` webhook or the sweeper, whichever comes first — put the
   paid registration on the queue, then mark the hold QUEUED. The writer keys on the
   registration id, so a second message changes nothing.

The call itself needs no idempotency record: a repeat of step 1 with the same attempt (same
hold, same email) is allowed, step 2 replays the same intent, and while the first call is
still creating it the hold says so (``busyUntil``), so a duplicate is told "already being
processed" instead of racing it. One registration and one charge either way.

A crash after 2 or 3 leaves the hold PAYING; the next confirm, the webhook (retried by the
provider for days), the sweeper at expiry and the reconciliation all finish it. A message
lost after the queue took it (the hold QUEUED, the writer never told) is sent again by the
sweeper once the hold has waited ``REQUEUE_AFTER`` unconfirmed. So no paid registration is
ever lost.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from racecap.aws.keys import stock_entry
from racecap.aws.queues import MessageQueue
from racecap.errors import (
    Conflict,
    EmailAlreadyRegistered,
    HoldExpired,
    HoldNotFound,
    OptionSoldOut,
    PaymentDeclined,
    PaymentNotStarted,
    PaymentPending,
    PaymentRefused,
    RegistrationNotFound,
    ValidationFailed,
)
from racecap.holds.models import (
    DONE_PHASES,
    GONE_PHASES,
    PAID_PHASES,
    SETTLED_PHASES,
    TRANSACTION_ITEMS,
    Attempt,
    BeginOutcome,
    Hold,
    HoldPhase,
    TeamMember,
)
from racecap.holds.service import hold_id_for
from racecap.observability import logger, metrics
from racecap.payments.calls import provider_call
from racecap.payments.port import (
    IntentStatus,
    NewIntent,
    PaymentIntent,
    PaymentProvider,
    PaymentRejected,
)
from racecap.questions.models import StockedChoice, StoredAnswers, WaiverAcceptance
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event, Race
from racecap.races.rules import age_on, check_age
from racecap.registration import status as backlog
from racecap.registration.attempts import Attempts, MemberEmailTaken, OptionShardFull
from racecap.registration.messages import registration_message
from racecap.registration.models import (
    RegistrationAccepted,
    RegistrationRequest,
    RegistrationStatus,
    RunnerDetails,
    TeamRegistrationRequest,
    member_fields,
)
from racecap.registration.payment import already_applied, attempt_key, intent_key, payment_metadata
from racecap.registration.status import Backlog, WriterPace
from racecap.registration.store import RegistrationStore

# The default wait before a queued, unconfirmed registration is re-sent (the deployed value is
# the REQUEUE_UNCONFIRMED_AFTER_SECONDS setting).
REQUEUE_AFTER = timedelta(minutes=5)


CONFIRMABLE = frozenset({IntentStatus.REQUIRES_PAYMENT_METHOD, IntentStatus.REQUIRES_CONFIRMATION})


# What the runner sees of an unpaid intent (``RegistrationAccepted.status``).
UNPAID_STATUS = {
    IntentStatus.REQUIRES_PAYMENT_METHOD: "PAYMENT_REQUIRED",
    IntentStatus.REQUIRES_CONFIRMATION: "PAYMENT_REQUIRED",
    IntentStatus.REQUIRES_ACTION: "REQUIRES_ACTION",
    IntentStatus.PROCESSING: "PROCESSING",
}


class AnswerCheck(Protocol):
    """The event's registration questions (``racecap.questions.service.Questions``)."""

    def check(self, race_id: str, event_id: str, answers: Mapping[str, Any] | None) -> StoredAnswers | None: ...

    def stocked(self, race_id: str, event_id: str, answered: StoredAnswers) -> list[StockedChoice]: ...

    def accept_waiver(
        self, race_id: str, event_id: str, version: int | None, given: WaiverAcceptance | None, age: int, now: datetime
    ) -> str | None: ...


def _stock_by_member(attempt: Attempt) -> list[tuple[int, str]]:
    """The units an attempt took, each with its member (0 for a single runner's)."""
    if attempt.members:
        return [(i, e) for i, m in enumerate(attempt.members) for e in m.get("stock") or ()]
    return [(0, e) for e in attempt.stock or ()]


def _answers_of(attempt: Attempt, member: int) -> dict[str, Any]:
    """One runner's answers on an attempt (a team's member's own, or the single runner's)."""
    if attempt.members:
        raw = attempt.members[member].get("answers") if member < len(attempt.members) else None
    else:
        raw = attempt.answers
    return dict(json.loads(raw or "{}"))


def _stocked_answers_changed(previous: Attempt, attempt: Attempt, stocked: list[tuple[int, StockedChoice]]) -> bool:
    """Whether a re-sent attempt answers differently a question whose option has stock, now
    (``stocked``) or when the first send took its units (``previous``'s stock), for any runner."""
    asked = {(m, c.question_id) for m, c in stocked} | {(m, e.split("#", 1)[0]) for m, e in _stock_by_member(previous)}
    return any(_answers_of(previous, m).get(qid) != _answers_of(attempt, m).get(qid) for m, qid in asked)


class RegistrationService:
    def __init__(
        self,
        catalog: RaceDefinitions,
        holds: Attempts,
        registrations: RegistrationStore,
        payments: PaymentProvider,
        queue: MessageQueue,
        requeue_after: timedelta = REQUEUE_AFTER,
        pace: WriterPace | None = None,
        questions: AnswerCheck | None = None,
    ) -> None:
        self._catalog = catalog
        self._holds = holds
        self._registrations = registrations
        self._payments = payments
        self._queue = queue
        self._requeue_after = requeue_after
        self._pace = pace
        self._questions = questions

    def register(self, hold_id: str, request: RegistrationRequest, now: datetime | None = None) -> RegistrationAccepted:
        """The runner's details: claim the email, then the hold's intent (and, given a
        PaymentMethod, confirm it here). Answers with the intent's client secret while unpaid."""
        now = now or datetime.now(UTC)
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if hold.is_team:
            raise Conflict("This hold is a team's: send every member's details to its team registration.")
        already = self._already_registered(hold, request.email)
        if already is not None:
            return already
        if hold.status in GONE_PHASES or (hold.status == HoldPhase.HELD and hold.expired(now)):
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")

        race, event = self._race_event(hold)
        check_age(race, event, request.dateOfBirth)  # before anything is claimed or charged
        answered = self._check_answers(hold, request)
        waiver = self._accept_waiver(hold, race, request, answered, now)
        attempt = Attempt(
            key=attempt_key(hold_id, request.email),
            email=request.email,
            firstName=request.firstName,
            lastName=request.lastName,
            dateOfBirth=request.dateOfBirth.isoformat(),
            amountCents=event.price_at(hold.createdAt) if hold.amountCents is None else hold.amountCents,
            currency=hold.currency or event.currency,
            startedAt=now.isoformat(),
            answers=answered.to_json() if answered else None,
            questionsVersion=answered.questionsVersion if answered else None,
            waiver=waiver,
        )
        outcome, attempt = self._begin(hold, attempt, answered, now)
        if outcome == BeginOutcome.EMAIL_TAKEN:
            metrics.add_metric(name="EmailAlreadyRegistered", unit="Count", value=1)
            raise EmailAlreadyRegistered(f"{request.email} is already registered for {race.name}.")
        if outcome == BeginOutcome.HOLD_GONE:
            return self._explain_hold_gone(hold_id, attempt)
        hold = hold.model_copy(update={"status": HoldPhase.PAYING, "attempt": attempt})
        return self._pay(hold, attempt, race, event, request.paymentMethod, now)

    def _pay(
        self, hold: Hold, attempt: Attempt, race: Race, event: Event, payment_method: str | None, now: datetime
    ) -> RegistrationAccepted:
        """A hold now PAYING with ``attempt``: free, queued at once; else its one intent (and,
        given a PaymentMethod, confirmed here), answered with the client secret while unpaid."""
        if attempt.amountCents == 0:
            return self._register_free(hold, attempt, race, event, now)
        try:
            intent = self._hold_intent(hold, attempt, race, event)
        except Exception:
            if hold.intentId is None:  # this call had the hold to itself: the retry may begin now
                self._holds.end_call(hold, attempt)
            raise
        confirming = bool(payment_method) and intent.status in CONFIRMABLE
        if confirming and payment_method:
            intent = self._confirm_on_server(hold, intent, payment_method)
        # A decline is news only to the call that confirmed; re-sending the details (a second
        # tab, a reload after a declined card) gets the client secret to try another card.
        return self._settle(hold, attempt, intent, race, event, now, report_decline=confirming)

    def register_team(
        self, hold_id: str, request: TeamRegistrationRequest, now: datetime | None = None
    ) -> RegistrationAccepted:
        """A captain's details for every member of a team hold: each checked as a runner's (the
        event's age rule, questions and waiver; 400 naming ``members.<i>.<field>``), then every
        email claimed with the payment's start in one transaction (one taken: a 409 naming the
        member, nothing charged, the team keeping its places), then the team's one intent."""
        now = now or datetime.now(UTC)
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if not hold.is_team:
            raise Conflict("This hold is for one place: send one runner's details to its registration.")
        if len(request.members) != hold.places:
            raise ValidationFailed(
                f"This team holds {hold.places} places: send {hold.places} members, the captain first.",
                fields={"members": f"Exactly {hold.places} members."},
            )
        seen: dict[str, int] = {}
        for i, member in enumerate(request.members):
            if member.email in seen:
                raise ValidationFailed(
                    f"Members {seen[member.email] + 1} and {i + 1} share an email; each member needs their own.",
                    fields={f"members.{i}.email": "Each member needs their own email."},
                )
            seen[member.email] = i
        captain = request.members[0]
        already = self._already_registered(hold, captain.email)
        if already is not None:
            return already
        if hold.status in GONE_PHASES or (hold.status == HoldPhase.HELD and hold.expired(now)):
            raise HoldExpired("Your hold on these places has expired; please hold them again.")

        race, event = self._race_event(hold)
        price = event.price_at(hold.createdAt) if hold.amountCents is None else hold.amountCents
        shards = hold.member_shards()
        members: list[TeamMember] = []
        answers: list[StoredAnswers | None] = []
        for i, details in enumerate(request.members):
            with member_fields(i):
                check_age(race, event, details.dateOfBirth)
                answered = self._check_answers(hold, details)
                waiver = self._accept_waiver(hold, race, details, answered, now)
            answers.append(answered)
            members.append(
                TeamMember(
                    registrationId=hold.memberIds[i],
                    email=details.email,
                    firstName=details.firstName,
                    lastName=details.lastName,
                    dateOfBirth=details.dateOfBirth.isoformat(),
                    amountCents=price,  # an equal share of the team's one payment
                    shard=shards[i],
                    answers=answered.to_json() if answered else None,
                    questionsVersion=answered.questionsVersion if answered else None,
                    waiver=waiver,
                )
            )
        attempt = Attempt(
            key=attempt_key(hold_id, "|".join(m.email for m in request.members)),
            email=captain.email,
            firstName=captain.firstName,
            lastName=captain.lastName,
            dateOfBirth=captain.dateOfBirth.isoformat(),
            amountCents=price * hold.places,
            currency=hold.currency or event.currency,
            startedAt=now.isoformat(),
            teamName=request.teamName,
            members=[m.model_dump(exclude_none=True) for m in members],
        )
        stocked = [
            (i, choice)
            for i, answered in enumerate(answers)
            if answered and self._questions
            for choice in self._questions.stocked(hold.raceId, hold.eventId, answered)
        ]
        if 1 + hold.places + len(stocked) > TRANSACTION_ITEMS:
            raise ValidationFailed(
                f"A team this size may take at most {TRANSACTION_ITEMS - 1 - hold.places} options with stock.",
                fields={"members": "Too many options with stock for one team."},
            )
        try:
            outcome, attempt = self._begin_stocked(hold, attempt, stocked, now)
        except MemberEmailTaken as exc:
            email = request.members[exc.index].email
            metrics.add_metric(name="EmailAlreadyRegistered", unit="Count", value=1)
            raise EmailAlreadyRegistered(
                f"Member {exc.index + 1} ({email}) is already registered for {race.name}; nothing was charged "
                "and the team keeps its places: change that member and send the team again.",
                fields={f"members.{exc.index}.email": "Already registered for this race."},
            ) from exc
        if outcome == BeginOutcome.HOLD_GONE:
            return self._explain_hold_gone(hold_id, attempt)
        return self._pay(hold.model_copy(update={"status": HoldPhase.PAYING, "attempt": attempt}), attempt,
                         race, event, request.paymentMethod, now)  # fmt: skip

    def _register_free(
        self, hold: Hold, attempt: Attempt, race: Race, event: Event, now: datetime
    ) -> RegistrationAccepted:
        """A free entry (price 0): nothing to pay, so no intent and no card step — queued as soon
        as the details are valid and the email is claimed, with no payment id. The hold limits
        and the opening queue were passed when the place was taken, as for a paid entry."""
        self.enqueue_paid(hold, attempt, "", race, event, now)
        metrics.add_metric(name="FreeRegistrationQueued", unit="Count", value=1)
        return RegistrationAccepted(
            registrationId=hold.registrationId, status="QUEUED", amountCents=0, currency=attempt.currency
        )

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
        hold = self._paying_hold(hold_id, now, by_clock=by_clock)
        if isinstance(hold, RegistrationAccepted):
            return hold, None
        assert hold.attempt is not None  # _paying_hold's promise
        intent = provider_call(lambda: self._payments.retrieve_intent(str(hold.intentId)), hold_id)
        race, event = self._race_event(hold)
        return self._settle(hold, hold.attempt, intent, race, event, now, report_decline=report_decline), intent

    def _paying_hold(self, hold_id: str, now: datetime, *, by_clock: bool) -> Hold | RegistrationAccepted:
        """The hold a payment call is about, PAYING with its details and intent, or the answer
        for one already paid; HoldNotFound, HoldExpired (by its phase, and with ``by_clock`` by
        its expiry too) or PaymentNotStarted otherwise."""
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if hold.status in DONE_PHASES:
            return RegistrationAccepted(
                registrationId=hold.registrationId,
                status="CONFIRMED" if hold.status == HoldPhase.CONFIRMED else "QUEUED",
            )
        if hold.status in GONE_PHASES or hold.status == HoldPhase.CANCELLED or (by_clock and hold.expired(now)):
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")
        if hold.status != HoldPhase.PAYING or hold.attempt is None or hold.intentId is None:
            raise PaymentNotStarted("Send the runner's details first; no payment has started for this hold.")
        return hold

    def payment_succeeded(self, intent: PaymentIntent, now: datetime | None = None) -> str:
        """A succeeded intent, however we learnt of it (webhook, reconciliation): queue the
        registration once. Answers "queued", "already" (nothing to do) or "orphan" (no hold
        is entitled to this payment: the caller refunds it)."""
        now = now or datetime.now(UTC)
        hold_id = intent.metadata.get("holdId", "")
        hold = self._holds.get(hold_id) if hold_id else None
        if hold is None:
            return self._registered_by(intent)
        if hold.status in SETTLED_PHASES:
            return "already" if already_applied(hold, intent) else "orphan"
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
    ) -> None:
        self._queue.send(registration_message(hold, attempt, payment_id, race, event, datetime.now(UTC)))
        self._holds.mark_queued(hold, attempt, payment_id, now, requeue_at=now + self._requeue_after)

    def resend_unconfirmed(self, hold: Hold, now: datetime) -> bool:
        """The backstop for a lost message: a hold paid and queued ``requeue_after`` ago that
        the writer has not confirmed gets its registration message again (the writer keys on
        the registration id, so if the first one was only late, the second changes nothing).
        The claim comes first, so of concurrent sweepers exactly one sends; each later re-send
        waits twice as long, so a long backlog is not flooded with copies. True: sent."""
        if hold.status != HoldPhase.QUEUED or hold.attempt is None or hold.chargeId is None:
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

    # -- steps ---------------------------------------------------------------------------------
    def _begin(
        self, hold: Hold, attempt: Attempt, answered: StoredAnswers | None, now: datetime
    ) -> tuple[BeginOutcome, Attempt]:
        """``begin_payment`` with the answers' options with stock (see ``_begin_stocked``)."""
        stocked = self._questions.stocked(hold.raceId, hold.eventId, answered) if self._questions and answered else []
        return self._begin_stocked(hold, attempt, [(0, c) for c in stocked], now)

    def _begin_stocked(
        self, hold: Hold, attempt: Attempt, stocked: list[tuple[int, StockedChoice]], now: datetime
    ) -> tuple[BeginOutcome, Attempt]:
        """``begin_payment``, taking the options with stock the answers chose (a T-shirt size;
        per member of a team: ``(member, choice)``) in the same transaction: a random shard of
        each with a unit left, the next one when it is full, ``OptionSoldOut`` naming the
        answer when every shard is. An attempt already paying (a retry, a second tab) keeps
        the units it took and takes none again."""
        previous = hold.attempt
        paying = hold.status == HoldPhase.PAYING and previous is not None and previous.key == attempt.key
        if paying and previous is not None and (stocked or _stock_by_member(previous)):
            # The re-send keeps what the first send took, judged by the runner's answers, not by
            # which options have stock now: a director may have given an option a quantity,
            # changed it or removed it meanwhile, and the runner's choice is the same.
            if _stocked_answers_changed(previous, attempt, stocked):
                raise Conflict("A payment for this hold is already in progress with other answers.", retry_after=2)
            attempt = replace(
                attempt, stock=previous.stock, members=previous.members if hold.is_team else attempt.members
            )
            return self._holds.begin_payment(hold, attempt, now, turn=True, take_stock=False), attempt
        if not stocked:
            return self._holds.begin_payment(hold, attempt, now, turn=True), attempt
        full: set[str] = set()
        while True:
            picks: list[tuple[int, str]] = []
            for member, choice in stocked:
                left = [s for s in choice.shards if stock_entry(choice.question_id, choice.option_id, s) not in full]
                if not left:
                    metrics.add_metric(name="OptionSoldOut", unit="Count", value=1)
                    field = f"answers.{choice.question_id}"
                    raise OptionSoldOut(
                        f"{choice.label} is sold out; please choose another.",
                        fields={f"members.{member}.{field}" if hold.is_team else field: f"{choice.label} is sold out."},
                    )
                picks.append((member, stock_entry(choice.question_id, choice.option_id, random.choice(left))))
            attempt = replace(attempt, stock=[entry for _, entry in picks])
            if hold.is_team:  # each member's own units too: a member's cancellation gives back theirs
                attempt = replace(
                    attempt,
                    members=[
                        {**m, "stock": [e for who, e in picks if who == i] or None}
                        for i, m in enumerate(attempt.members or [])
                    ],
                )
            try:
                return self._holds.begin_payment(hold, attempt, now, turn=True), attempt
            except OptionShardFull as exc:
                full.add(exc.entry)  # nothing was written: try the option's other shards

    def _accept_waiver(
        self, hold: Hold, race: Race, request: RunnerDetails, answered: StoredAnswers | None, now: datetime
    ) -> str | None:
        """The waiver's acceptance as kept (400 naming ``waiver.…`` when missing, or a minor's
        guardian is); the age that decides it is on race day, as the event's age rule's."""
        if self._questions is None:
            if request.waiver is not None:
                raise ValidationFailed("This event has no waiver to accept.", fields={"waiver": "Not asked."})
            return None
        age = age_on(request.dateOfBirth, date.fromisoformat(race.raceDate))
        version = answered.questionsVersion if answered else None
        return self._questions.accept_waiver(hold.raceId, hold.eventId, version, request.waiver, age, now)

    def _check_answers(self, hold: Hold, request: RunnerDetails) -> StoredAnswers | None:
        """The answers as checked against the event's questions now (400 naming
        ``answers.<id>`` before anything is claimed or charged); None: the event asks none."""
        if self._questions is None:
            if request.answers:
                raise ValidationFailed("This event asks no questions.", fields={"answers": "Not asked."})
            return None
        return self._questions.check(hold.raceId, hold.eventId, request.answers)

    def _race_event(self, hold: Hold) -> tuple[Race, Event]:
        race, events = self._catalog.definition(hold.raceId)
        return race, next(e for e in events if e.eventId == hold.eventId)

    def _hold_intent(self, hold: Hold, attempt: Attempt, race: Race, event: Event) -> PaymentIntent:
        """The hold's one intent: recorded already, or created now (the same key replays it)."""
        try:
            if hold.intentId is not None:
                intent_id = hold.intentId
                return provider_call(lambda: self._payments.retrieve_intent(intent_id), hold.holdId)
            intent = provider_call(
                lambda: self._payments.create_intent(
                    NewIntent(
                        amount_cents=attempt.amountCents,
                        currency=attempt.currency,
                        metadata=payment_metadata(hold, attempt),
                        description=f"{race.name} — {event.name}",
                    ),
                    idempotency_key=intent_key(hold.holdId),
                ),
                hold.holdId,
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
        if not self._holds.set_intent(hold, attempt, intent.id):
            # Moved on meanwhile (expired and swept, or queued by a webhook): say what it is now.
            return self._explain_moved(hold.holdId, attempt.email, intent)
        return intent

    def _explain_moved(self, hold_id: str, email: str, intent: PaymentIntent) -> PaymentIntent:
        now_hold = self._holds.get(hold_id)
        if now_hold is not None and now_hold.status == HoldPhase.PAYING and now_hold.intentId == intent.id:
            return intent
        if now_hold is not None and self._already_registered(now_hold, email) is not None:
            return intent
        raise HoldExpired("Your hold on this place has expired; please hold a new place.")

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

    def _explain_hold_gone(self, hold_id: str, attempt: Attempt) -> RegistrationAccepted:
        hold = self._holds.get(hold_id)
        done = self._already_registered(hold, attempt.email) if hold else None
        if done is not None:
            return done
        if hold is not None and hold.status == HoldPhase.PAYING:
            if hold.attempt is not None and hold.attempt.key == attempt.key:
                # A double click or a retry while the first call still creates the intent.
                raise Conflict("This registration is already being processed.", retry_after=2)
            raise Conflict("A payment for this hold is already in progress with other details.", retry_after=2)
        if hold is not None and hold.status == HoldPhase.HELD and not hold.expired(datetime.now(UTC)):
            # Still held: a discount code was applied or removed between reading and paying.
            raise Conflict("Your price changed meanwhile (a discount code); please send your details again.")
        raise HoldExpired("Your hold on this place has expired; please hold a new place.")

    # -- the waiting screen -----------------------------------------------------------------
    def first_wait(self) -> int:
        """Seconds until a registration queued now is likely confirmed: the waiting screen's
        first check (the queued answer's ``Retry-After``)."""
        return backlog.wait_s(0.0, self._backlog())

    def _backlog(self) -> Backlog | None:
        if self._pace is None:
            return None
        try:
            return self._pace.backlog()
        except Exception:
            # Only the wait's estimate is lost: the paper's schedule answers instead.
            logger.warning("writer backlog unavailable", exc_info=True)
            return None

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
        if hold is None or registration_id not in (hold.registrationId, *hold.memberIds) or hold.attempt is None:
            raise RegistrationNotFound(f"No registration with id {registration_id}.")
        base = RegistrationStatus(
            registrationId=registration_id, status="QUEUED", raceId=hold.raceId, eventId=hold.eventId
        )
        if hold.status in PAID_PHASES:
            since = hold.queuedAt or datetime.fromisoformat(hold.attempt.startedAt)
            return base, backlog.wait_s((now - since).total_seconds(), self._backlog())
        base.status = "FAILED"
        base.message = "The registration could not be completed and no payment was kept."
        return base, None
