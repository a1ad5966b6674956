"""What a runner sends and gets back about their own entry (MyRegistrationApi): the link to it,
an email change, details edits, a transfer, a switch. Apart from ``models`` so that the
registering function (RegistrationApi) does not build these classes at cold start."""

from __future__ import annotations

import re
from datetime import date
from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
)

from racecap.models import EMAIL_PATTERN, Model, normalize_email
from racecap.questions.models import Answers, WaiverAcceptance
from racecap.races.rules import MAX_TEAM_SIZE
from racecap.registration.models import PaymentMethodId, PersonDetails


class LinkRequest(Model):
    """Find my registration: the address the runner registered with."""

    model_config = ConfigDict(extra="forbid")

    email: str = Field(min_length=3, max_length=254, pattern=EMAIL_PATTERN)

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        # Checked by the pattern as documented; compared as every claim is (trimmed, lower-cased).
        return normalize_email(v)


class LinkAnswer(Model):
    message: str


class EmailChangeRequest(LinkRequest):
    """A runner's new address: a link to confirm it goes there first (the same one field)."""


class EmailChangeConfirmation(Model):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(
        min_length=1,
        max_length=2048,
        description="The token in the link sent to the new address (`#/my/email/<token>`).",
    )


class EmailChanged(Model):
    registrationId: str
    email: str = Field(description="The registration's address now.")
    linkToken: str = Field(
        description="The registration's new link token (earlier links are revoked): send it as X-Racecap-Registration."
    )
    message: str


class DetailsEdit(Model):
    """What a runner corrects (every field optional: only what is sent changes)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    firstName: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"\S")
    lastName: str | None = Field(default=None, min_length=1, max_length=100, pattern=r"\S")
    dateOfBirth: date | None = None
    answers: Answers | None = Field(
        default=None,
        max_length=60,
        description="Every answer, as when registering (the event's questions as they stand).",
    )

    @field_validator("dateOfBirth", mode="before")
    @classmethod
    def _strict_date(cls, v: object) -> object:
        if v is not None and (not isinstance(v, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v)):
            raise ValueError("Use the form YYYY-MM-DD.")
        return v


# -- a place handed to another runner (registration.transfer) ------------------------------------
class TransferQuote(Model):
    allowed: bool = Field(description="Whether the place may be handed over now; `note` says why not.")
    until: str | None = Field(default=None, description="YYYY-MM-DD: the last day (race's time zone).")
    feeCents: int = Field(description="What the new runner pays to take the place over (0: nothing).")
    currency: str
    refundable: bool = Field(description="Whether the new runner may still cancel with a refund under the policy.")
    pendingTo: str | None = Field(default=None, description="The pending offer's address, partly hidden.")
    pendingSince: str | None = None
    note: str


class TransferOfferView(Model):
    """What the new runner sees before accepting."""

    raceId: str
    raceName: str
    raceDate: str
    eventId: str
    eventName: str
    email: str = Field(description="The address the offer went to: the registration will use it.")
    fromFirstName: str = Field(description="Who offers the place (their first name).")
    feeCents: int
    currency: str
    until: str
    refundable: bool
    note: str


class TransferAcceptance(PersonDetails):
    """The new runner's details, as a registration asks them (the address is the offer's)."""

    token: str = Field(
        min_length=1, max_length=2048, description="The token in the offer's link (`#/transfer/<token>`)."
    )
    paymentMethod: PaymentMethodId | None = Field(
        default=None, description="As on a registration: confirm the transfer fee on the server."
    )


class TransferToken(Model):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=2048)


class TransferAnswer(Model):
    registrationId: str
    status: Literal["TRANSFERRED", "PAYMENT_REQUIRED", "REQUIRES_ACTION", "PROCESSING"] = Field(
        description="TRANSFERRED: the place is the new runner's (`linkToken` opens it); else pay the fee in the "
        "browser with `clientSecret`, then call /api/transfers/confirm."
    )
    bib: int | None = None
    linkToken: str | None = Field(default=None, description="The registration's new link token, once transferred.")
    clientSecret: str | None = None
    amountCents: int | None = None
    currency: str | None = None
    publishableKey: str | None = None
    paymentsScript: str | None = None
    message: str


# -- a switch to another event of the race (ledger.switch) ----------------------------------------
class SwitchTarget(Model):
    """One event the runner may switch to, priced now (its tier today, the code if it covers it)."""

    eventId: str
    eventName: str
    priceCents: int = Field(description="The event's price for this runner now (with their code if it applies).")
    payCents: int = Field(description="What the switch charges: the difference, when dearer by at least the minimum.")
    refundCents: int = Field(
        description="What the switch refunds: the difference, when cheaper by at least the minimum."
    )
    currency: str
    available: bool = Field(description="False: sold out now, or its waitlist has runners waiting (they go first).")
    note: str = Field(description="What the switch would do, in words: the money, the code, why not.")


class SwitchTeamMember(Model):
    """A member a captain's switch moves, in the order the answers are given (the captain first)."""

    registrationId: str
    firstName: str
    lastName: str
    ageOnRaceDay: int | None = Field(
        default=None, description="Their age on race day (a waiver asks a guardian under the event's adult age)."
    )


class SwitchQuote(Model):
    allowed: bool = Field(description="Whether this registration may switch now; `note` says why not.")
    until: str | None = Field(default=None, description="YYYY-MM-DD: the last day (race's time zone).")
    currentEventId: str
    pendingEventId: str | None = Field(default=None, description="A switch begun and not finished (held, unpaid).")
    targets: list[SwitchTarget]
    note: str
    team: list[SwitchTeamMember] | None = Field(
        default=None,
        description="A captain's: the whole team moves together (a team runs in one event). The targets' prices "
        "are then the team's, and each member's answers for the new event go in `members`, in this order.",
    )


class SwitchMemberAnswers(Model):
    """One team member's answers for the new event (its questions and waiver), in the quote's order."""

    model_config = ConfigDict(extra="forbid")

    answers: Answers | None = None
    waiver: WaiverAcceptance | None = None


class SwitchRequest(Model):
    """The event to switch to, with its questions and waiver answered again (a new event asks its own)."""

    model_config = ConfigDict(extra="forbid")

    eventId: str = Field(min_length=1, max_length=64)
    answers: Answers | None = None
    waiver: WaiverAcceptance | None = None
    members: list[SwitchMemberAnswers] | None = Field(
        default=None,
        max_length=MAX_TEAM_SIZE,
        description="A captain's switch of the whole team: every member's answers, in the quote's `team` order "
        "(the captain's own first; `answers` and `waiver` above are then not read).",
    )
    paymentMethod: PaymentMethodId | None = Field(
        default=None, description="As on a registration: confirm the difference's payment on the server."
    )


class SwitchAnswer(Model):
    registrationId: str
    status: Literal["SWITCHED", "PAYMENT_REQUIRED", "REQUIRES_ACTION", "PROCESSING"] = Field(
        description="SWITCHED: the runner is in the new event (new bib); else pay the difference in the browser with "
        "`clientSecret`, then call /api/my/registration/switch/confirm. The place stays held meanwhile."
    )
    eventId: str
    bib: int | None = None
    clientSecret: str | None = None
    amountCents: int | None = Field(default=None, description="The difference to pay.")
    refundCents: int | None = Field(default=None, description="The difference refunded to the card that paid.")
    currency: str | None = None
    publishableKey: str | None = None
    paymentsScript: str | None = None
    message: str
