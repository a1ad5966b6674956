"""Registering and paying for a held place, and asking how it went.

One PaymentIntent recorded per hold; the browser confirms it (Stripe.js, 3-D Secure when the
card asks), the server decides. The order of steps is what makes the non-negotiables hold
under crashes:

1. the hold's PaymentIntent: the one recorded on the hold, or created with an idempotency
   key derived from the hold and the request (``payment.intent_key``), so a second tab or a
   retry after a lost answer gets the same intent; amount and currency are the price fixed
   on the hold when the place was taken (a director's later price edit changes new holds
   only). Nothing is written yet: a provider that refuses or does not answer leaves the
   hold as it was, and a runner who retries starts again;
2. claim the email for the race and mark the hold PAYING with this attempt and that intent —
   one transaction, so two runners can't both get one email, and a hold records one intent
   (one naming another is refused): the loser of an email race, or of a hold, is never
   handed a client secret, and an intent no hold records is never handed out, so no one
   can pay it;
3. once the intent has succeeded — told by the runner's confirm call, the
   ``payment_intent.succeeded`` webhook or the sweeper, whichever comes first — put the
   paid registration on the queue, then mark the hold QUEUED. The writer keys on the
   registration id, so a second message changes nothing.

The call itself needs no idempotency record: a repeat of step 1 with the same attempt (same
hold, same email, same price) replays the same intent, and step 2 with the same attempt is
allowed again. One registration and one charge either way. (Until issue 38 the intent came
second and was recorded by a write of its own, with a turn marked on the hold so a duplicate
call would not race it to the provider: one write and one round trip more per registration.)

A crash after 2 or 3 leaves the hold PAYING; the next confirm, the webhook (retried by the
provider for days), the sweeper at expiry and the reconciliation all finish it. A message
lost after the queue took it (the hold QUEUED, the writer never told) is sent again by the
sweeper once the hold has waited ``REQUEUE_AFTER`` unconfirmed and its expiry has come. So
no paid registration is ever lost.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from racecap.aws.keys import stock_entry
from racecap.aws.queues import MessageQueue
from racecap.cache import Flags
from racecap.errors import (
    Conflict,
    EmailAlreadyRegistered,
    HoldExpired,
    HoldNotFound,
    OptionSoldOut,
    ValidationFailed,
)
from racecap.holds.models import (
    GONE_PHASES,
    TRANSACTION_ITEMS,
    Attempt,
    BeginOutcome,
    Hold,
    HoldPhase,
    TeamMember,
)
from racecap.holds.snapshots import HoldSnapshots
from racecap.observability import metrics
from racecap.payments.calls import provider_call
from racecap.payments.port import (
    IntentStatus,
    PaymentIntent,
    PaymentProvider,
)
from racecap.pulse import THREE_DS, pulse
from racecap.questions.models import StockedChoice, StoredAnswers
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event, Race
from racecap.races.rules import age_on, check_age
from racecap.registration.attempts import Attempts, MemberEmailTaken, OptionShardFull
from racecap.registration.models import (
    RegistrationAccepted,
    RegistrationRequest,
    RunnerDetails,
    TeamRegistrationRequest,
    member_fields,
)
from racecap.registration.payment import PaymentStep, attempt_key
from racecap.registration.status import StatusReads, StatusSnapshots, WriterPace
from racecap.registration.store import RegistrationStore

if TYPE_CHECKING:
    from racecap.questions.service import Questions  # the answers' one implementation

# The default wait before a queued, unconfirmed registration is re-sent (the deployed value is
# the REQUEUE_UNCONFIRMED_AFTER_SECONDS setting).
REQUEUE_AFTER = timedelta(minutes=5)


CONFIRMABLE = frozenset({IntentStatus.REQUIRES_PAYMENT_METHOD, IntentStatus.REQUIRES_CONFIRMATION})


def _id(intent: PaymentIntent | None) -> str | None:
    return intent.id if intent is not None else None


def _paying(hold: Hold, attempt: Attempt, intent: PaymentIntent | None) -> Hold:
    """The hold as ``begin_payment`` left it."""
    return hold.model_copy(
        update={"status": HoldPhase.PAYING, "attempt": attempt, "intentId": _id(intent) or hold.intentId}
    )


class _SnapshotBehind(Exception):
    """A send begun from the hold's snapshot found the hold moved on (nothing was written)."""


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


class RegistrationService(PaymentStep, StatusReads):
    def __init__(
        self,
        catalog: RaceDefinitions,
        holds: Attempts,
        registrations: RegistrationStore,
        payments: PaymentProvider,
        queue: MessageQueue,
        requeue_after: timedelta = REQUEUE_AFTER,
        pace: WriterPace | None = None,
        questions: Questions | None = None,
        marks: Flags | None = None,
        snapshots: StatusSnapshots | None = None,
        hold_hints: HoldSnapshots | None = None,
    ) -> None:
        self._catalog = catalog
        self._holds = holds
        self._registrations = registrations
        self._payments = payments
        self._queue = queue
        self._requeue_after = requeue_after
        self._pace = pace
        self._questions = questions
        self._marks = marks  # "this intent queued its hold": the webhook's answer without a read
        self._snapshots = snapshots
        self._hold_hints = hold_hints  # the hold as its last step wrote it (``holds.snapshots``)

    def register(self, hold_id: str, request: RegistrationRequest, now: datetime | None = None) -> RegistrationAccepted:
        """The runner's details: the hold's intent, then the email claimed with it recorded (and,
        given a PaymentMethod, the intent confirmed here). Answers with the intent's client
        secret while unpaid."""
        now = now or datetime.now(UTC)
        hinted = self._hinted(hold_id, now)
        if hinted is not None:
            try:
                return self._register(hinted, request, now, hinted=True)
            except _SnapshotBehind:
                # The hold moved on since the hold call (an earlier send of this attempt left it
                # PAYING, a code changed its price, another send recorded its intent):
                # begin_payment wrote nothing, and the table decides, as without snapshots.
                # Explaining HOLD_GONE from the table alone would answer "already being
                # processed" to a retry that may go on.
                pass
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        return self._register(hold, request, now, hinted=False)

    def _register(
        self, hold: Hold, request: RegistrationRequest, now: datetime, *, hinted: bool
    ) -> RegistrationAccepted:
        hold_id = hold.holdId
        if hold.is_team:
            raise Conflict("This hold is a team's: send every member's details to its team registration.")
        if hold.offerEmail and request.email != hold.offerEmail:
            # A waitlist offer is one runner's place in line, not a coupon to pass on.
            message = "This place was offered to the address on the waitlist: register with that address."
            raise ValidationFailed(message, fields={"email": message})
        if hold.codeEmail and request.email != hold.codeEmail:
            # A deferral's credit is its runner's: one registration of their address.
            message = f"Code {hold.code} is for another runner's address: register with it, or remove the code."
            raise ValidationFailed(message, fields={"email": message})
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
        # The provider's budget first: refused (an opening's peak), the 429 has written nothing,
        # so a runner's retries cost no write each (a begun payment ended again did: two). Then
        # the intent, before anything is written (a failure there leaves the hold as it was),
        # recorded by the payment's begin.
        intent = self._send_intent(hold, attempt, race, event)
        outcome, attempt = self._begin(hold, attempt, answered, now, intent)
        if outcome == BeginOutcome.EMAIL_TAKEN:
            metrics.add_metric(name="EmailAlreadyRegistered", unit="Count", value=1)
            raise EmailAlreadyRegistered(f"{request.email} is already registered for {race.name}.")
        if outcome == BeginOutcome.HOLD_GONE:
            if hinted:
                raise _SnapshotBehind
            return self._explain_hold_gone(hold_id, attempt)
        return self._pay(_paying(hold, attempt, intent), attempt, race, event, request.paymentMethod, now, intent)

    def _send_intent(self, hold: Hold, attempt: Attempt, race: Race, event: Event) -> PaymentIntent | None:
        """The send's intent (``_intent_for``), its first provider call in the budget's room
        taken first; None for a free entry, which asks the provider nothing."""
        if attempt.amountCents == 0:
            return None
        return self._intent_for(hold, attempt, race, event, self._admitted(hold, attempt))

    def _admitted(self, hold: Hold, attempt: Attempt) -> PaymentProvider:
        """Room for the send's first provider call (its intent's creation, or a retry's look at
        it), taken now: ``Busy`` (429 + Retry-After) before anything is written when the budget
        is spent."""
        first = "create_intent" if hold.intentId is None else "retrieve_intent"
        return provider_call(lambda: self._payments.admitted(first), hold.holdId, hold.raceId, hold.eventId)

    def _pay(
        self,
        hold: Hold,
        attempt: Attempt,
        race: Race,
        event: Event,
        payment_method: str | None,
        now: datetime,
        intent: PaymentIntent | None,
    ) -> RegistrationAccepted:
        """A hold now PAYING with ``attempt`` and its recorded ``intent``: free (no intent),
        queued at once; else (given a PaymentMethod) confirmed here, answered with the client
        secret while unpaid."""
        if intent is None:
            return self._register_free(hold, attempt, race, event, now)
        if self._hold_hints is not None:  # for the confirm call, a moment from now
            self._hold_hints.keep(hold)
        confirming = bool(payment_method) and intent.status in CONFIRMABLE
        if confirming and payment_method:
            intent = self._confirm_on_server(hold, intent, payment_method)
            if intent.status == IntentStatus.REQUIRES_ACTION:  # the bank asks for 3-D Secure
                pulse.count(hold.raceId, THREE_DS, hold.eventId, n=hold.places)
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
        # As a runner's send: the budget's room, then the intent, before anything is written.
        intent = self._send_intent(hold, attempt, race, event)
        try:
            outcome, attempt = self._begin_stocked(hold, attempt, stocked, now, intent)
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
        return self._pay(_paying(hold, attempt, intent), attempt, race, event, request.paymentMethod, now, intent)

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

    # -- steps ---------------------------------------------------------------------------------
    def _begin(
        self, hold: Hold, attempt: Attempt, answered: StoredAnswers | None, now: datetime, intent: PaymentIntent | None
    ) -> tuple[BeginOutcome, Attempt]:
        """``begin_payment`` with the answers' options with stock (see ``_begin_stocked``)."""
        stocked = self._questions.stocked(hold.raceId, hold.eventId, answered) if self._questions and answered else []
        return self._begin_stocked(hold, attempt, [(0, c) for c in stocked], now, intent)

    def _begin_stocked(
        self,
        hold: Hold,
        attempt: Attempt,
        stocked: list[tuple[int, StockedChoice]],
        now: datetime,
        intent: PaymentIntent | None,
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
            return self._holds.begin_payment(hold, attempt, now, intent_id=_id(intent), take_stock=False), attempt
        if not stocked:
            return self._holds.begin_payment(hold, attempt, now, intent_id=_id(intent)), attempt
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
                return self._holds.begin_payment(hold, attempt, now, intent_id=_id(intent)), attempt
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

    def _hinted(self, hold_id: str, now: datetime) -> Hold | None:
        """The hold as the hold call wrote it, while it is HELD and unexpired: ``begin_payment``
        is conditioned on the hold as it really is (HELD, unexpired, the same code; or PAYING
        this very attempt, which takes no stock again), so a snapshot out of date answers
        HOLD_GONE and ``_explain_hold_gone`` reads the table. A snapshot of a paying hold is the
        confirm call's, not this one's: a declined card puts the hold back to HELD with its
        options' stock given back, and only the table says so."""
        known = self._hold_hints.get(hold_id) if self._hold_hints is not None else None
        if known is None or known.is_team or known.status != HoldPhase.HELD or known.expired(now):
            return None
        return known

    def _explain_hold_gone(self, hold_id: str, attempt: Attempt) -> RegistrationAccepted:
        hold = self._holds.get(hold_id)
        done = self._already_registered(hold, attempt.email) if hold else None
        if done is not None:
            return done
        if hold is not None and hold.status == HoldPhase.PAYING:
            if hold.attempt is not None and hold.attempt.key == attempt.key:
                # This runner's payment began with another intent (a code changed the price
                # meanwhile) or a code change is under way: the retry reads the hold again.
                raise Conflict("This registration is already being processed.", retry_after=2)
            raise Conflict("A payment for this hold is already in progress with other details.", retry_after=2)
        if hold is not None and hold.status == HoldPhase.HELD and not hold.expired(datetime.now(UTC)):
            # Still held: a discount code was applied or removed between reading and paying.
            raise Conflict("Your price changed meanwhile (a discount code); please send your details again.")
        raise HoldExpired("Your hold on this place has expired; please hold a new place.")
