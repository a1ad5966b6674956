"""A runner's own entry, reached through the link in their email (issue 39): see it, and cancel it
under the race's refund policy.

Every call starts from the link's token (``registration.links``): the registration it names,
if the link is still that registration's current one. The registration id alone opens nothing.

**Cancelling** goes through the director's cancellation path (``ledger.cancellations``) with the
runner as the actor, so it has every guarantee that one has: the refund reserved in the
ledger's sum before the provider is asked, under a key recorded with the cancellation (10
clicks refund once), the place back in the pool, the email once, the sweeper's backstop when
the provider stalls. What the runner adds is the amount: the policy's quote
(``ledger.policy``), which the runner saw and sends back. If it changed in between (a tier
ended at midnight, the director refunded part meanwhile) the answer is 409 QUOTE_CHANGED with
the new quote, and nothing happened: a runner is never refunded an amount they did not see.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import Literal, Protocol

from pydantic import Field

from racecap.emails.models import AnswerLine
from racecap.errors import Conflict, Forbidden
from racecap.ledger.cancellations import Cancellations, RefundChoice
from racecap.ledger.policy import PolicyQuote, policy_refund
from racecap.ledger.service import Ledger, RefundTooLarge
from racecap.models import Actor, Model, director_kind
from racecap.questions.models import AnswerValue, StoredAnswers
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Race
from racecap.races.rules import today_in
from racecap.registration.edits import may_edit
from racecap.registration.links import RegistrationLinks
from racecap.registration.models import Registration, RegistrationPhase

RUNNER_REASON = "cancelled by the runner"


class CancelNotAllowed(Forbidden):
    code = "CANCEL_NOT_ALLOWED"


class QuoteChanged(Conflict):
    code = "QUOTE_CHANGED"


class RunnerAction(Model):
    action: Literal["cancel", "edit", "transfer", "switch", "defer"]
    until: str = Field(description="YYYY-MM-DD, the last day (in the race's time zone).")
    text: str = Field(description="What it does, in words.")


class CancelQuote(Model):
    allowed: bool = Field(description="Whether the runner may cancel now; `note` says why not.")
    amountCents: int = Field(description="What cancelling now refunds (send it back to cancel).")
    currency: str
    percent: int = Field(description="The policy's tier today (0 after the last).")
    feeCents: int
    paidCents: int = Field(description="The entry payment the policy's percentage is of.")
    leftCents: int = Field(description="What is left of it to refund (after earlier refunds).")
    until: str | None = Field(default=None, description="The last day runners may cancel (race day).")
    note: str = Field(description="What the runner is told before confirming.")


class MyRegistration(Model):
    """A runner's own registration, as the link shows it."""

    registrationId: str
    raceId: str
    raceName: str
    raceDate: str
    timeZone: str
    eventId: str
    eventName: str
    bib: int
    status: Literal["CONFIRMED", "CANCELLING", "CANCELLED"]
    statusText: str = Field(description="The status in words.")
    firstName: str
    lastName: str
    email: str
    dateOfBirth: str
    teamName: str | None = None
    currency: str
    paidCents: int = Field(description="Every payment of the registration together.")
    refundedCents: int = Field(description="Refunds made or on their way.")
    pendingRefundCents: int = Field(description="Of those, what the payment provider has not finished yet.")
    answers: list[AnswerLine] = Field(
        default_factory=list, description="The registration questions' answers, in words."
    )
    answerValues: dict[str, AnswerValue] = Field(
        default_factory=dict,
        description="The same answers as the registration sent them (question id: value), for the form that "
        "corrects them (PATCH /api/my/registration sends every answer).",
    )
    waiverAccepted: bool
    cancelledAt: str | None = None
    cancelledBy: Literal["you", "the organiser", "the payment provider", "Racecap"] | None = None
    actions: list[RunnerAction] = Field(description="What the runner can still do, and until when.")


class MyCancellation(Model):
    registration: MyRegistration
    refundedCents: int = Field(description="What this cancellation refunded.")
    message: str


class Registrations(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...


class AnswersInWords(Protocol):
    def described(
        self, race_id: str, event_id: str, answers: str | None, version: int | None
    ) -> Sequence[AnswerLike]: ...


class AnswerLike(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def text(self) -> str: ...


class OwnEntry:
    def __init__(
        self,
        links: RegistrationLinks,
        registrations: Registrations,
        ledger: Ledger,
        cancellations: Cancellations,
        catalog: RaceDefinitions,
        answers: AnswersInWords | None = None,
        today: Callable[[str], date] | None = None,
    ) -> None:
        self._links = links
        self._regs = registrations
        self._ledger = ledger
        self._cancellations = cancellations
        self._catalog = catalog
        self._answers = answers
        self._today = today or today_in

    # -- reads --------------------------------------------------------------------------------
    def view(self, token: str | None) -> MyRegistration:
        reg = self._reg(token)
        race, _ = self._catalog.definition(reg.raceId)
        return self._view(reg, race)

    def quote(self, token: str | None) -> CancelQuote:
        reg = self._reg(token)
        race, _ = self._catalog.definition(reg.raceId)
        return self._quote(reg, race)

    # -- the runner's cancellation ------------------------------------------------------------
    def cancel(self, token: str | None, amount_cents: int) -> MyCancellation:
        reg = self._reg(token)
        race, _ = self._catalog.definition(reg.raceId)
        runner = Actor.runner(reg.registrationId)
        if reg.status == RegistrationPhase.CONFIRMED:
            quote = self._quote(reg, race)
            if not quote.allowed:
                raise CancelNotAllowed(quote.note)
            if quote.amountCents != amount_cents:
                raise _changed(quote)
            choice: RefundChoice = "AMOUNT" if quote.amountCents else "NONE"
            try:
                self._cancellations.cancel(
                    runner, race, reg.registrationId, RUNNER_REASON, choice, quote.amountCents, reg.linkVersion or 0
                )
            except RefundTooLarge:
                # Between the quote and the reservation, less was left: a director's refund, or
                # one of this runner's own clicks that began the cancellation first.
                again = self._regs.get(reg.registrationId)
                if again is None or again.status == RegistrationPhase.CONFIRMED:
                    raise _changed(self._quote(again or reg, race)) from None
                self._cancellations.cancel(runner, race, reg.registrationId)
        elif reg.status == RegistrationPhase.CANCELLING:
            self._cancellations.cancel(runner, race, reg.registrationId)  # resume under its own key
        done = self._regs.get(reg.registrationId) or reg
        refunded = done.cancelRefundCents or 0
        view = self._view(done, race)
        if done.status == RegistrationPhase.CANCELLING:
            message = "Your cancellation is under way: the refund is being made, and you will get an email."
        elif refunded:
            message = f"Cancelled. {_money(refunded, done.currency)} is refunded to the card that paid."
        else:
            message = "Cancelled. Nothing was refunded."
        return MyCancellation(registration=view, refundedCents=refunded, message=message)

    # -- parts --------------------------------------------------------------------------------
    def _reg(self, token: str | None) -> Registration:
        return self._links.registration(token, self._regs.get)

    def _quote(self, reg: Registration, race: Race) -> CancelQuote:
        policy = race.refundPolicy
        today = self._today(race.timeZone)
        left = max(0, reg.amountCents - (reg.ledgerRefundedCents or 0))
        q: PolicyQuote = policy_refund(policy, reg.amountCents, left, reg.currency, today)
        if reg.transfers and not policy.transferredRefundable:
            # The organiser's rule for places taken over: they may be cancelled, not refunded.
            q = PolicyQuote(q.percent, q.grossCents, q.feeCents, 0, "A place taken over is not refunded: nothing is.")
        reason = _not_allowed(reg, race, today)
        return CancelQuote(
            allowed=reason is None,
            amountCents=q.amountCents if reason is None else 0,
            currency=reg.currency,
            percent=q.percent,
            feeCents=q.feeCents,
            paidCents=reg.amountCents,
            leftCents=left,
            until=race.raceDate if policy.runnersMayCancel else None,
            note=reason or (q.note if reg.amountCents else "A free entry: nothing to refund."),
        )

    def _view(self, reg: Registration, race: Race) -> MyRegistration:
        statement = self._ledger.statement(reg)
        today = self._today(race.timeZone)
        actions = []
        if reg.status == RegistrationPhase.CONFIRMED and may_edit(race, today) is None:
            until = race.refundPolicy.editUntil or race.raceDate
            actions.append(
                RunnerAction(action="edit", until=until, text="Correct your name, date of birth or answers.")
            )
        if _not_allowed(reg, race, today) is None:
            quote = self._quote(reg, race)
            actions.append(RunnerAction(action="cancel", until=race.raceDate, text=quote.note))
        policy = race.refundPolicy
        # What moves the entry, each until the organiser's own day (none: not offered).
        moves: list[tuple[Literal["transfer", "switch", "defer"], str | None, str]] = [
            ("transfer", policy.transfersUntil,
             "Hand your place to someone else: they accept from a link sent to them."),
            ("switch", policy.switchesUntil,
             "Switch to another event of the race: see what it costs or refunds before you confirm."),
            ("defer", policy.deferralsUntil,
             "Defer your place to the race's next edition: what you paid becomes a code there."),
        ]  # fmt: skip
        if reg.status == RegistrationPhase.CONFIRMED:
            actions += [
                RunnerAction(action=action, until=until, text=text)
                for action, until, text in moves
                if until and today <= date.fromisoformat(until)
            ]
        answers: list[AnswerLine] = []
        if self._answers is not None and reg.answers:
            described = self._answers.described(reg.raceId, reg.eventId, reg.answers, reg.questionsVersion)
            answers = [AnswerLine(label=a.label, text=a.text) for a in described]
        return MyRegistration(
            registrationId=reg.registrationId,
            raceId=reg.raceId,
            raceName=race.name,
            raceDate=race.raceDate,
            timeZone=race.timeZone,
            eventId=reg.eventId,
            eventName=reg.eventName,
            bib=reg.bib,
            status=reg.status.value,  # type: ignore[arg-type]
            statusText=_status_text(reg),
            firstName=reg.firstName,
            lastName=reg.lastName,
            email=reg.email,
            dateOfBirth=reg.dateOfBirth,
            teamName=reg.teamName,
            currency=reg.currency,
            paidCents=statement.chargedCents,
            refundedCents=statement.refundedCents,
            pendingRefundCents=statement.pendingCents,
            answers=answers,
            answerValues=stored.answers if (stored := StoredAnswers.of(reg.answers, reg.questionsVersion)) else {},
            waiverAccepted=bool(reg.waiver),
            cancelledAt=reg.cancelledAt,
            cancelledBy=_who(reg.cancelledBy) if reg.cancelledBy else None,
            actions=actions,
        )


def _not_allowed(reg: Registration, race: Race, today: date) -> str | None:
    """Why the runner may not cancel now, or None."""
    if reg.status != RegistrationPhase.CONFIRMED:
        return "This registration is cancelled already."
    if not race.refundPolicy.runnersMayCancel:
        return "The organiser does not let runners cancel their own entry: contact them to cancel."
    if today > date.fromisoformat(race.raceDate):
        return "The race has taken place: a registration cannot be cancelled after race day."
    if reg.disputeId:
        return "The payment is disputed with your bank: the organiser will settle it with you."
    return None


def _changed(quote: CancelQuote) -> QuoteChanged:
    if not quote.allowed:
        return QuoteChanged(quote.note)
    return QuoteChanged(
        f"What cancelling refunds has changed: now {_money(quote.amountCents, quote.currency)}. {quote.note} "
        "Confirm again to cancel."
    )


def _money(cents: int, currency: str) -> str:
    from racecap.money import decimals, in_units

    return f"{in_units(cents, currency):.{decimals(currency)}f} {currency.upper()}"


def _status_text(reg: Registration) -> str:
    if reg.status == RegistrationPhase.CONFIRMED:
        return "You are registered."
    if reg.status == RegistrationPhase.CANCELLING:
        return "Your registration is being cancelled; its refund is on its way."
    return "This registration is cancelled; the place went back to the race."


def _who(cancelled_by: str) -> Literal["you", "the organiser", "the payment provider", "Racecap"]:
    kind = director_kind(cancelled_by)
    if kind == "runner":
        return "you"
    if kind == "provider":
        return "the payment provider"
    if kind == "system":
        return "Racecap"
    return "the organiser"
