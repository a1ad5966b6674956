"""The waitlist's records and API shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from racecap.models import EMAIL_PATTERN, Model, _Record, normalize_email
from racecap.races.models import WaitlistSettings

# PENDING: joined, address not confirmed yet (it does not count: no number, not in the length);
# WAITING: confirmed, in line with a join number; LEFT: the runner left (their data dropped);
# REMOVED: the director took them off (kept until the purge, so the same address cannot rejoin).
EntryState = Literal["PENDING", "WAITING", "LEFT", "REMOVED"]


class WaitlistEntry(_Record):
    """One address's entry on one event's waitlist, as stored."""

    entryId: str
    raceId: str
    eventId: str
    state: EntryState
    email: str = ""  # "" once the runner left
    firstName: str = ""
    lastName: str = ""
    seq: int | None = None  # the join number, given at confirmation
    joinedAt: str
    confirmedAt: str | None = None
    leftAt: str | None = None
    removedAt: str | None = None
    ttl: int | None = None  # a PENDING entry is deleted by TTL if never confirmed


@dataclass(frozen=True)
class Line:
    """An event's line counters (one item): numbers given, how far offers have got, how many wait."""

    seq: int = 0
    head: int = 0
    waiting: int = 0
    exists: bool = False


class WaitlistJoin(Model):
    """Joining a sold-out event's waitlist: who, and the solved proof-of-work challenge."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    email: str = Field(
        min_length=3, max_length=254, pattern=EMAIL_PATTERN, description="A link to confirm it goes there."
    )
    firstName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    lastName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    challenge: str | None = Field(
        default=None,
        max_length=2048,
        description="A challenge from POST /api/races/{raceId}/queue/challenge (the opening queue's), solved.",
    )
    nonce: str | None = Field(default=None, max_length=64, description="The challenge's solution.")

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return normalize_email(v)


class WaitlistJoined(Model):
    message: str


class WaitlistConfirm(Model):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(
        min_length=1, max_length=2048, description="The token in the emailed link (`#/waitlist/<token>`)."
    )


class MyWaitlistEntry(Model):
    """A runner's own entry, as the link shows it."""

    raceId: str
    eventId: str
    raceName: str
    eventName: str
    state: EntryState
    position: int | None = Field(
        description="Your place in line (1: next to be offered a place), while WAITING. It is your join number "
        "minus how far offers have got, so runners ahead of you who leave still count until the line passes them: "
        "your place is never worse than shown."
    )
    number: int | None = Field(description="Your join number (given when you confirmed your address).")
    firstName: str | None = None
    waitlistToken: str = Field(description="Send it as X-Racecap-Waitlist to see your place again or to leave.")
    message: str


class AdminWaitlistEntry(Model):
    entryId: str
    state: EntryState
    number: int | None = Field(description="The join number, once confirmed.")
    position: int | None = Field(description="seq - head, while WAITING.")
    email: str
    firstName: str
    lastName: str
    joinedAt: str
    confirmedAt: str | None
    leftAt: str | None = None
    removedAt: str | None = None


class AdminWaitlistView(Model):
    raceId: str
    eventId: str
    settings: WaitlistSettings
    length: int = Field(description="Confirmed runners waiting (what the length cap counts).")
    joined: int = Field(description="Join numbers given so far.")
    head: int = Field(description="How far offers have got: a waiting runner's position is their number minus this.")
    entries: list[AdminWaitlistEntry] = Field(
        description="Waiting runners in line order, then those still to confirm, then those who left or were removed."
    )
