"""What the ballot's API takes and answers, and an application as stored."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from racecap.models import EMAIL_PATTERN, JsonInt, Model, _Record, normalize_email
from racecap.questions.models import Answers, AnswerView
from racecap.races.models import DEFAULT_PAY_DAYS, MAX_PAY_DAYS, BallotPhase, BallotSettings
from racecap.races.rules import BirthDate

ApplicationState = Literal["PENDING", "CONFIRMED", "WITHDRAWN"]
# A group applies in one request: the applicant and up to this many others (the event's team
# size bounds it further; a DynamoDB transaction of two items per member bounds it here).
MAX_PARTNERS = 24


class BallotFields(Model):
    """An event's ballot as a director sends it. Times without an offset are the race's local times."""

    model_config = ConfigDict(extra="forbid")

    opensAt: datetime = Field(description="Applications are taken from then (after the commitment is published).")
    closesAt: datetime = Field(description="…until then.")
    drawAt: datetime = Field(description="The draw runs then (at or after the close).")
    keptPlaces: JsonInt = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="Places kept out of the draw for guaranteed entries (charity, qualifiers, deferrals), which use "
        "codes or the admin API.",
    )
    payDays: JsonInt = Field(
        default=DEFAULT_PAY_DAYS, ge=1, le=MAX_PAY_DAYS, description="Days a winner has to register and pay."
    )


class Applicant(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    email: str = Field(
        min_length=3, max_length=254, pattern=EMAIL_PATTERN, description="A link to confirm it goes there."
    )
    firstName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    lastName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    dateOfBirth: BirthDate = Field(description="YYYY-MM-DD: the event's age rule applies on race day.")
    answers: Answers | None = Field(
        default=None,
        max_length=60,
        description="The event's questions (GET /api/races/{raceId}/events/{eventId}/questions) by question id, "
        "checked as at registration; an option's stock is taken at registration, the waiver accepted then.",
    )

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return normalize_email(v)


class BallotApply(Applicant):
    """An application: the applicant, and the group applying with them (drawn together or not at all)."""

    partners: list[Applicant] = Field(
        default=[],
        max_length=MAX_PARTNERS,
        description="The others in the group, each with their own address (each confirms it). Up to the event's "
        "largest team less one; none for an event without teams.",
    )
    challenge: str | None = Field(
        default=None,
        max_length=2048,
        description="A challenge from POST /api/races/{raceId}/queue/challenge (the opening queue's), solved.",
    )
    nonce: str | None = Field(default=None, max_length=64, description="The challenge's solution.")


class BallotApplied(Model):
    message: str


class BallotLink(Model):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=2048, description="The token in the emailed link (`#/ballot/<token>`).")


class Application(_Record):
    """One runner's application as stored (a group's members each have one, with the group's id)."""

    applicationId: str
    raceId: str
    eventId: str
    state: ApplicationState
    email: str = ""  # "" once withdrawn (the personal data goes at once)
    firstName: str = ""
    lastName: str = ""
    dateOfBirth: str = ""
    groupId: str | None = None
    groupSize: int = 1  # as applied (members may withdraw; the draw counts those confirmed)
    # The answers to the event's questions (JSON) and the version they answered; absent without questions.
    answers: str | None = None
    questionsVersion: int | None = None
    appliedAt: str
    confirmedAt: str | None = None
    withdrawnAt: str | None = None
    ttl: int | None = None  # a PENDING application is deleted by TTL if never confirmed


DrawResult = Literal["WON", "WAITLIST"]


class MyApplication(Model):
    raceId: str
    eventId: str
    raceName: str
    eventName: str
    applicationId: str
    state: ApplicationState
    ballot: BallotPhase
    firstName: str | None
    groupId: str | None = Field(description="The group drawn as one with this application; null: alone.")
    groupSize: int
    closesAt: datetime | None = Field(description="Applications may be withdrawn until then.")
    drawAt: datetime | None
    ballotToken: str = Field(description="Send it as X-Racecap-Ballot to see or withdraw this application.")
    answers: list[AnswerView] = Field(default=[], description="The runner's answers to the event's questions.")
    result: DrawResult | None = Field(
        default=None,
        description="After the draw: a place won (the offer email has the link), or a number on the waitlist.",
    )
    waitlistNumber: int | None = Field(default=None, description="With WAITLIST: the number in line after the winners.")
    message: str


class BallotDay(Model):
    day: str = Field(description="YYYY-MM-DD in the race's zone.")
    applications: int = Field(description="Applications confirmed that day and not withdrawn since.")


class BallotAdminView(Model):
    raceId: str
    eventId: str
    settings: BallotSettings
    phase: BallotPhase
    places: int = Field(description="Places drawn: the cap less the places kept.")
    confirmed: int = Field(description="Applications that count (confirmed, not withdrawn).")
    withdrawn: int
    byDay: list[BallotDay] = Field(description="Confirmations per day in the race's zone.")


DrawState = Literal["ORDERED", "LINED", "DONE"]


class DrawRecord(_Record):
    """A ballot's draw as stored: what the race page publishes, and how far the job got (a run
    that stops before its deadline goes on from here; every step is safe to repeat)."""

    raceId: str
    eventId: str
    state: DrawState
    seed: str  # revealed: the commitment's preimage
    commitment: str
    places: int  # drawn for
    applications: int  # confirmed applications drawn
    tickets: int  # applications and groups, each one chance
    winners: int  # places the winners fill (groups counted by size)
    winningTickets: int
    pages: int  # of the line (ORDER#) and of the list (LIST#): PAGE_SIZE rows each
    listPages: int
    lined: int = 0  # line pages written as waitlist entries, their runners sent their result
    drawnAt: str
    doneAt: str | None = None


class DrawView(Model):
    """The draw as the race page publishes it, with what anyone needs to check it."""

    raceId: str
    eventId: str
    commitment: str
    seed: str = Field(description="The seed revealed at the draw: its SHA-256 is the commitment published before.")
    places: int
    applications: int
    tickets: int = Field(description="One per application alone and one per group: each one chance.")
    winners: int = Field(description="Places the winners fill (groups counted by size).")
    winningTickets: int
    listPages: int = Field(description="Pages of the published list (GET …/ballot/list?page=N, from 0), as CSV.")
    drawnAt: str
    verify: str = Field(description="How to re-compute the order and the winners from the seed and the list.")
