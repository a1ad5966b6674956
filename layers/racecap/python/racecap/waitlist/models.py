"""The waitlist's records and API shapes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import ConfigDict, Field, field_validator

from racecap.models import EMAIL_PATTERN, JsonInt, Model, _Record, normalize_email
from racecap.races.models import WaitlistSettings

# PENDING: joined, address not confirmed yet (it does not count: no number, not in the length);
# WAITING: confirmed, in line with a join number; LEFT: the runner left (their data dropped);
# REMOVED: the director took them off (kept until the purge, so the same address cannot rejoin);
# OFFERED: the line reached them and a place was offered (its OFFER item says how that went).
EntryState = Literal["PENDING", "WAITING", "LEFT", "REMOVED", "OFFERED"]
# An offer: OFFERED (out, waiting for its runner), CLAIMED (the runner took it: a hold of theirs),
# then ended: EXPIRED (its window passed), DECLINED, USELESS (the runner registered another way),
# CLOSED (the list closed before it was claimed). Every ended one's place went back to the pool.
OfferState = Literal["OFFERED", "CLAIMED", "EXPIRED", "DECLINED", "USELESS", "CLOSED"]


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
    # An entry a ballot's draw wrote (racecap.ballot): its application, and the group drawn with it.
    ballotApplicationId: str | None = None
    groupId: str | None = None


@dataclass(frozen=True)
class Line:
    """An event's line counters (one item): numbers given, how far offers have got, how many wait;
    the places kept for the line (``pool``, per shard in ``pool_by_shard``), the offers out, and
    the offers' tallies (made, claimed, expired, declined) for the director's figures."""

    seq: int = 0
    head: int = 0
    waiting: int = 0
    exists: bool = False
    pool: int = 0
    offered: int = 0
    closed: bool = False
    pool_by_shard: dict[str, int] = field(default_factory=dict)
    made: int = 0
    claimed: int = 0
    expired: int = 0
    declined: int = 0


class Offer(_Record):
    """A freed place offered to one entry (``OFFER#<entryId>``, beside it): at most one per entry."""

    entryId: str
    raceId: str
    eventId: str
    state: OfferState
    seq: int  # the entry's join number (the line's head moved to it)
    shard: str  # the shard that counts the place (``places.returns``)
    email: str
    firstName: str = ""
    offeredAt: str
    expiresAt: str  # min(offered + the event's offer window, registration's close)
    priceCents: int  # the tier current when offered (the claim fixes the tier in force then)
    holdId: str | None = None  # once claimed
    endedAt: str | None = None


class OfferToken(Model):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=2048, description="The token in the offer email's link.")


class OfferView(Model):
    """An offered place, as its link shows it."""

    raceId: str
    eventId: str
    raceName: str
    eventName: str
    state: OfferState
    expiresAt: str = Field(description="Claim it before then (never past registration's close).")
    priceCents: int = Field(description="The price in force now: claiming fixes it.")
    currency: str
    holdId: str | None = Field(default=None, description="Once claimed: the hold to register and pay with.")
    message: str


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


class WaitlistRelease(Model):
    model_config = ConfigDict(extra="forbid")

    places: JsonInt = Field(
        ge=1, le=10_000, description="Places to add to the event for its waitlist: the cap goes up by this many."
    )


class AdminWaitlistView(Model):
    raceId: str
    eventId: str
    settings: WaitlistSettings
    length: int = Field(description="Confirmed runners waiting (what the length cap counts).")
    joined: int = Field(description="Join numbers given so far.")
    head: int = Field(description="How far offers have got: a waiting runner's position is their number minus this.")
    pooled: int = Field(default=0, description="Freed places kept for the line, not offered yet.")
    offersOut: int = Field(default=0, description="Offers waiting for their runner.")
    offersMade: int = Field(default=0, description="Offers made so far.")
    accepted: int = Field(default=0, description="Offers claimed (each became its runner's hold).")
    expired: int = Field(default=0, description="Offers whose window ran out (each passed on).")
    declined: int = Field(default=0, description="Offers passed on by their runner.")
    closed: bool = Field(default=False, description="The list is closed: no more offers.")
    entries: list[AdminWaitlistEntry] = Field(
        description="Waiting runners in line order, then those still to confirm, then those who left or were removed."
    )
