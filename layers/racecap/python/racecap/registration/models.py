"""What a runner's registration must contain. The site's inline checks mirror these.

Whether the runner may enter the event (its age rule, on race day) is the event's to say:
``races.rules``, checked once the hold's race is known."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, TypedDict, cast

from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from racecap.errors import ValidationFailed
from racecap.models import Model, _Record, normalize_email
from racecap.questions.models import Answers, WaiverAcceptance
from racecap.races.rules import MAX_TEAM_SIZE, MIN_TEAM_SIZE, BirthDate


class RegistrationPhase(StrEnum):
    CONFIRMED = "CONFIRMED"
    CANCELLING = "CANCELLING"  # the director's decision is recorded; the refund may be in flight
    CANCELLED = "CANCELLED"
    # The record of an entry a runner switched to another event (registration.switch): its bib
    # stays counted in its event (bibs are never given twice); the runner's registration lives on.
    SWITCHED = "SWITCHED"


class PaidRegistration(_Record):
    """The message on the Registrations queue: what the writer needs, without reading anything."""

    registrationId: str
    holdId: str
    raceId: str
    eventId: str
    email: str
    firstName: str
    lastName: str
    dateOfBirth: str
    amountCents: int
    currency: str
    chargeId: str  # the provider's payment (intent) id
    raceName: str
    raceDate: str
    eventName: str
    paidAt: str
    # As on the attempt: the answers (JSON) and the version of the questions they answered.
    answers: str | None = None
    questionsVersion: int | None = None
    waiver: str | None = None  # as on the attempt
    # The discount code it was held with (racecap.codes) and what it took off the price:
    # ``amountCents`` is what was charged. Absent without a code (no bytes on the item).
    code: str | None = None
    discountCents: int | None = None
    # A team member's (absent otherwise): the team's name, every member's registration id (the
    # captain first: what the team's one payment covers, for refunds and the audit) and the
    # cap shard this member's place came from (a cancellation gives it back there).
    teamName: str | None = None
    teamMembers: list[str] | None = None
    shard: str | None = None


class PaidTeam(_Record):
    """A team's message on the Registrations queue: every member's registration, confirmed
    together by the writer (one transaction: a team is complete or absent)."""

    members: list[PaidRegistration]


class Registration(PaidRegistration):
    """A confirmed registration (Registrations ``REG#<registrationId>``)."""

    bib: int
    status: RegistrationPhase
    confirmedAt: str
    cancelRequestedAt: str | None = None
    cancelledBy: str | None = None
    cancelledAt: str | None = None
    refundId: str | None = None
    # The director's refund choice when cancelling (FULL, NONE, AMOUNT), what it refunds and its
    # ledger key; None on a cancellation begun before the choice existed (it refunded in full).
    cancelRefund: str | None = None
    cancelRefundCents: int | None = None
    cancelRefundKey: str | None = None
    # The ledger (racecap.ledger): the sum of its refunds, reserved or made, and how many of
    # them were made outside Racecap (the provider's dashboard) — flagged to the director.
    # None (absent) until the first: the writer writes the record whole, and two attributes
    # more on every registration item would be bytes on the hot path's writes.
    ledgerRefundedCents: int | None = None
    ledgerPending: int | None = None  # refunds reserved, the provider's answer not recorded yet
    outsideRefunds: int | None = None
    refundFailures: int | None = None  # refunds the provider failed after the fact: flagged to the director
    ledgerExtraCents: int | None = None  # payments beyond the entry payment (an upgrade, a fee): their sum
    # A cardholder's dispute, from the provider's ``charge.dispute.created``: the director sees it.
    disputeId: str | None = None
    disputedAt: str | None = None
    # Once the race's retention period is over (retention.service): email, dateOfBirth
    # and chargeId are "" and the age on race day is kept instead of the date of birth.
    purgedAt: str | None = None
    ageOnRaceDay: int | None = None
    # The runner's link (registration.links) names this version: bumping it revokes every link
    # sent before. Absent (0) until the first revocation: no bytes on the writer's items.
    linkVersion: int | None = None
    emailChangedAt: str | None = None  # the runner's last change of address (registration.email_change)
    # A place being handed to another runner (registration.transfer): the pending offer (its
    # number, the address it went to, when; once accepted with a fee to pay, the new runner's
    # details and the fee's intent). Absent otherwise, and removed when it completes.
    transferOffer: dict[str, Any] | None = None
    transfers: int | None = None  # how many times the place changed hands
    transferredAt: str | None = None
    lastTransfer: int | None = None  # the number of the offer that moved it last (a repeat answers "done")
    offersMade: int | None = None  # offers numbered from it: a withdrawn offer's link never opens a later one
    # A switch to another event under way (registration.switch): the target's hold, event and
    # number, and the upgrade's intent once one is made. Removed when it completes or is given up.
    pendingSwitch: dict[str, Any] | None = None
    switches: int | None = None  # how many times the runner switched event (numbers each switch)
    switchedAt: str | None = None
    # On a SWITCHED record: the registration that lives on in the other event.
    switchedTo: str | None = None
    # Deferred to the race's next edition (ledger.deferral): cancelled here with no refund, what
    # was paid (less the policy's fee) a personal code there. The money stays in this ledger.
    deferredTo: str | None = None
    deferralCode: str | None = None
    deferralCreditCents: int | None = None


class RegistrationRowData(TypedDict, total=False):
    """What directors see of a registration (lists, search, CSV): read by projection, as
    plain values, because 50,000 of them must stream fast; ``RegistrationRow`` validates
    the ones an API page returns."""

    registrationId: str
    eventId: str
    eventName: str
    bib: int
    status: str
    firstName: str
    lastName: str
    email: str
    dateOfBirth: str
    amountCents: int
    currency: str
    confirmedAt: str
    cancelledAt: str
    cancelledBy: str  # who cancelled: a director's id, "runner", "payment-provider", a job's (models.director_kind)
    transfers: int  # places handed over (registration.transfer)
    transferredAt: str
    switches: int  # switches to another event (registration.switch)
    switchedTo: str  # on a SWITCHED record: the registration that lives on
    deferredTo: str  # deferred: the next edition's race id (ledger.deferral)
    deferralCreditCents: int
    refundId: str
    disputeId: str
    purgedAt: str
    ledgerRefundedCents: int
    ledgerPending: int
    outsideRefunds: int
    refundFailures: int
    cancelRefund: str
    cancelRefundCents: int
    ageOnRaceDay: int  # results' age groups, once the date of birth is deleted
    answers: str  # the answers to the event's questions (JSON), with the version they answered
    questionsVersion: int
    waiver: str  # the waiver's acceptance (JSON)
    code: str
    discountCents: int
    teamName: str


ROW_FIELDS: tuple[str, ...] = tuple(RegistrationRowData.__annotations__)


class RegistrationAccepted(Model):
    registrationId: str
    status: Literal["PAYMENT_REQUIRED", "REQUIRES_ACTION", "PROCESSING", "QUEUED", "CONFIRMED"] = Field(
        description="PAYMENT_REQUIRED / REQUIRES_ACTION / PROCESSING: confirm the payment in the browser "
        "with `clientSecret` (Stripe.js), then call the hold's payment/confirm; QUEUED / CONFIRMED: paid "
        "(or free: `amountCents` 0, no card step)."
    )
    clientSecret: str | None = Field(
        default=None, description="The hold's PaymentIntent client secret (Stripe.js), while unpaid."
    )
    amountCents: int | None = Field(default=None, description="What the card is charged: the server's price.")
    currency: str | None = None
    publishableKey: str | None = Field(default=None, description="For `Stripe(publishableKey)`, while unpaid.")
    paymentsScript: str | None = Field(default=None, description="Where Stripe.js is loaded from, while unpaid.")


class RegistrationStatus(Model):
    registrationId: str
    status: Literal["QUEUED", "CONFIRMED", "FAILED", "CANCELLING", "CANCELLED", "SWITCHED"] = Field(
        description="QUEUED: paid, being confirmed (poll again after Retry-After); CONFIRMED: the place is the "
        "runner's; FAILED: not registered and no payment kept; CANCELLING: a cancellation is under way (its "
        "refund is being made; it finishes by itself); CANCELLED: the registration was cancelled, the place "
        "given back (`message` says what was refunded); SWITCHED: the record of an entry its runner moved to "
        "another event (their registration lives on there)."
    )
    raceId: str
    eventId: str
    bib: int | None = None
    firstName: str | None = None
    lastName: str | None = None
    eventName: str | None = None
    raceName: str | None = None
    confirmedAt: datetime | None = None
    cancelledAt: datetime | None = None
    message: str | None = None


class RegistrationRow(Model):
    registrationId: str
    eventId: str
    eventName: str
    bib: int
    status: Literal["CONFIRMED", "CANCELLING", "CANCELLED", "SWITCHED"]
    firstName: str
    lastName: str
    email: str
    dateOfBirth: str
    amountCents: int
    currency: str
    confirmedAt: str
    cancelledAt: str | None = None
    refundId: str | None = None
    disputeId: str | None = Field(default=None, description="Set when the runner's card issuer opened a dispute.")
    purgedAt: str | None = Field(
        default=None,
        description="Set once the race's retention period ended: email and dateOfBirth are then empty.",
    )
    code: str | None = Field(default=None, description="The discount code the place was held with.")
    discountCents: int | None = Field(default=None, description="What the code took off; amountCents is what was paid.")
    teamName: str | None = Field(default=None, description="A team entry's team; amountCents is this member's share.")
    switchedTo: str | None = Field(
        default=None, description="SWITCHED: the runner's registration in the event they switched to."
    )
    deferredTo: str | None = Field(default=None, description="Deferred: the next edition's race id.")
    deferralCreditCents: int | None = Field(
        default=None, description="Deferred: the credit, a personal code there (the payment stays in this race)."
    )


class RegistrationPage(Model):
    registrations: list[RegistrationRow]
    nextCursor: str | None = Field(
        description="Pass as `cursor` for more; a search may return fewer than `limit` rows with a cursor."
    )


class TeamRegistrationRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    teamName: str = Field(min_length=1, max_length=80, pattern=r"\S")
    members: list[RunnerDetails] = Field(
        min_length=MIN_TEAM_SIZE,
        max_length=MAX_TEAM_SIZE,
        description="Every member's details, the captain first: as many as the places held.",
    )
    paymentMethod: PaymentMethodId | None = Field(
        default=None, description="As on a single registration: confirm the team's one payment on the server."
    )


@contextmanager
def member_fields(index: int) -> Iterator[None]:
    """A runner's check run for one team member: its 400 names the member's fields
    (``members.<i>.dateOfBirth``) and the member, so the captain knows whose to fix."""
    try:
        yield
    except ValidationFailed as exc:
        fields = {f"members.{index}.{k}": v for k, v in (exc.fields or {}).items()}
        raise type(exc)(f"Member {index + 1}: {exc.message}", fields=fields or None) from exc


def _row(reg: Registration) -> RegistrationRowData:
    return cast(RegistrationRowData, reg.model_dump(mode="json", include=set(ROW_FIELDS), exclude_none=True))


def registration_row(reg: Registration) -> RegistrationRow:
    """One registration as the list shows it (the runner's detail starts from the same row)."""
    return RegistrationRow.model_validate(_row(reg))


# Deliberately permissive (RFC 5322 is not what runners type); the confirmation email
# is the real proof. One @, a dot in the domain, no spaces, at most 254 characters.
EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}$")


# A plausibility check only (a mistyped year), measured today; the event's own rule decides.


# Optional: a PaymentMethod id (``pm_…``) to confirm on the server (load generators, Stripe's
# "finalize on the server" flow). Without it the answer carries the intent's client secret and
# the browser confirms with Stripe.js. Never card numbers.
PaymentMethodId = Annotated[str, StringConstraints(min_length=4, max_length=200, pattern=r"^pm_[A-Za-z0-9_]+$")]


class PersonDetails(Model):
    """Who runs: a registration's runner without the address (a transfer's new runner, whose
    address is the offer's)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    firstName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    lastName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    dateOfBirth: BirthDate
    # The answers to the event's registration questions (GET /api/races/{raceId}/events/{eventId}/questions),
    # by question id; checked against the questions as they stand (racecap.questions).
    answers: Answers | None = Field(default=None, max_length=60)
    # The event's waiver accepted (and, for a runner under 18 on race day, by a parent or guardian).
    waiver: WaiverAcceptance | None = None


class RunnerDetails(PersonDetails):
    """One runner's details: a registration's, or a team member's (``racecap.teams``)."""

    # The patterns say in the document what the validators check (names are trimmed first).
    email: str = Field(min_length=3, max_length=254, pattern=r"^\s*[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}\s*$")

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        v = normalize_email(v)
        if not EMAIL_RE.match(v):
            raise ValueError("Enter an email address like name@example.com.")
        return v


class RegistrationRequest(RunnerDetails):
    paymentMethod: PaymentMethodId | None = None


def refunded_by_cancel(reg: Registration) -> int:
    """What the registration's cancellation refunds: its choice's amount, or the whole charge
    for a cancellation begun before the refund choice."""
    return reg.amountCents if reg.cancelRefund is None else reg.cancelRefundCents or 0
