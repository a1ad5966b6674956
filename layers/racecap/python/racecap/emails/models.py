"""The email queue's message contract (parsed, or poison) and the rendered email."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from racecap.models import Model, _Record


class EmailMessage(_Record):
    """The body of one message on the Emails queue.

    ``kind`` stays an open string so a producer deployed ahead of this consumer yields a
    ``PoisonMessage`` in the DLQ (redrivable after the deploy), not a parse failure.
    """

    kind: str = Field(min_length=1, max_length=64)
    dedupKey: str = Field(min_length=1, max_length=512)
    to: str = Field(max_length=254, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
    data: dict[str, Any]


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    text: str
    html: str


class PoisonMessage(Exception):
    """A message that would never succeed; it goes to the DLQ without retries."""


# -- the contract (the envelope, EmailMessage, is in racecap.domain) -----------------
class _Data(Model):
    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    amountCents: int = Field(ge=0)
    currency: str = Field(pattern=r"^[A-Za-z]{3}$")

    @field_validator("currency")
    @classmethod
    def _upper(cls, value: str) -> str:
        return value.upper()


class AnswerLine(Model):
    model_config = ConfigDict(frozen=True, extra="ignore")

    label: str = Field(max_length=300)
    text: str = Field(max_length=5000)


class ConfirmationData(_Data):
    lastName: str = Field(min_length=1, max_length=200)
    bib: str = Field(min_length=1, max_length=20)
    raceDate: str = Field(min_length=1, max_length=40)
    answers: list[AnswerLine] = Field(default_factory=list, max_length=60)  # the runner's, to check
    # The signed link to the runner's own registration (registration.links), filled in by the
    # sender as it renders; absent on a message rendered without it (a unit test's).
    manageUrl: str | None = Field(default=None, max_length=4096, pattern=r"^https?://")


class RefundData(_Data):
    # Set when the email goes to a team's payer about a member's refund (their card is refunded).
    payerFirstName: str | None = Field(default=None, min_length=1, max_length=200)
    teamName: str | None = Field(default=None, max_length=200)


class EmailChangeData(Model):
    """A new address asked for a registration: the link that confirms it, to that address."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    confirmUrl: str = Field(max_length=4096, pattern=r"^https?://")


class MovedData(Model):
    """The notice to a registration's old address once it moved to a new one."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)


class TransferOfferData(Model):
    """A place offered to another runner: the link to take it over, to their address."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    fromFirstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    raceDate: str = Field(max_length=20)
    registrationId: str = Field(min_length=1, max_length=100)
    feeCents: int = Field(ge=0)
    currency: str = Field(min_length=3, max_length=3)
    until: str = Field(max_length=20)
    acceptUrl: str = Field(max_length=4096, pattern=r"^https?://")


class SwitchData(Model):
    """A runner moved to another event of the race (ledger.switch): the new event and bib, any refund."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    fromEventName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    bib: int = Field(ge=1)
    registrationId: str = Field(min_length=1, max_length=100)
    refundCents: int = Field(default=0, ge=0)
    currency: str = Field(min_length=3, max_length=3)
    raceDate: str = Field(max_length=20)
    manageUrl: str | None = Field(default=None, max_length=4096, pattern=r"^https?://")  # signed in by LinkMail


class DeferredData(Model):
    """A place deferred to the race's next edition (ledger.deferral): the runner's personal code."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    code: str = Field(min_length=1, max_length=40)
    creditCents: int = Field(ge=0)
    currency: str = Field(min_length=3, max_length=3)


class LinkData(Model):
    """ "Find my registration": the link, to the registered address only (registration.links)."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    raceDate: str = Field(min_length=1, max_length=40)
    cancelled: bool = False
    manageUrl: str = Field(max_length=4096, pattern=r"^https?://")


class WaitlistConfirmData(Model):
    """Joining an event's waitlist: the link confirming the address, to that address (racecap.waitlist)."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    entryId: str = Field(min_length=1, max_length=100)
    confirmUrl: str = Field(max_length=4096, pattern=r"^https?://")


class BallotConfirmData(Model):
    """Applying to an event's ballot: the link confirming the address, to that address (racecap.ballot)."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    applicationId: str = Field(min_length=1, max_length=100)
    confirmUrl: str = Field(max_length=4096, pattern=r"^https?://")
    groupSize: int = Field(default=1, ge=1)
    appliedBy: str | None = Field(default=None, max_length=200)  # a group's applicant, for the others
    closesAt: str = Field(default="", max_length=80)


class WaitlistJoinedData(Model):
    """The address confirmed: "you're on the list at position N", with the link to the entry."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    entryId: str = Field(min_length=1, max_length=100)
    position: int = Field(ge=1)
    manageUrl: str = Field(max_length=4096, pattern=r"^https?://")


class WaitlistOfferData(Model):
    """A freed place offered to the next runner in line: the claim link and its deadline."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    entryId: str = Field(min_length=1, max_length=100)
    claimUrl: str = Field(max_length=4096, pattern=r"^https?://")
    expiresAt: str = Field(min_length=1, max_length=60)
    priceCents: int = Field(ge=0)
    currency: str = Field(min_length=3, max_length=3)
    ballot: bool = False  # the runner's ballot application won (the draw's line): the result email


class BallotResultData(Model):
    """A ballot's result for an application that did not win: its number on the waitlist."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    applicationId: str = Field(min_length=1, max_length=100)
    position: int = Field(ge=1)
    raceUrl: str = Field(max_length=4096, pattern=r"^https?://")


class WaitlistClosedData(Model):
    """The list closed (registration closed, or the organiser closed it): no place will be offered."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    firstName: str = Field(min_length=1, max_length=200)
    raceName: str = Field(min_length=1, max_length=300)
    eventName: str = Field(min_length=1, max_length=300)
    entryId: str = Field(min_length=1, max_length=100)
    offerEnded: bool = False  # a place was offered to them, unclaimed when the list closed


class UnmatchedRefundData(Model):
    """A payment no place could be given for, refunded automatically (names may be unknown)."""

    model_config = ConfigDict(frozen=True, extra="ignore", coerce_numbers_to_str=True)

    raceName: str = Field(default="the race", min_length=1, max_length=300)
    registrationId: str = Field(min_length=1, max_length=100)
    amountCents: int = Field(ge=0)
    currency: str = Field(pattern=r"^[A-Za-z]{3}$")


def parse_message(body: str) -> EmailMessage:
    """The message on the queue, validated; ``PoisonMessage`` if it never can be."""
    try:
        return EmailMessage.model_validate(json.loads(body))
    except (ValueError, TypeError, ValidationError) as exc:
        raise PoisonMessage(f"not a valid email message: {exc}") from exc


def tags_for(message: EmailMessage) -> dict[str, str]:
    """SES message tags: what a bounce or complaint report can be traced back with."""
    tags = {"kind": message.kind}
    registration_id = message.data.get("registrationId")
    if isinstance(registration_id, str) and registration_id:
        tags["registrationId"] = registration_id
    return tags
