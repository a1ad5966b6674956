"""The domain's records and the API's shapes (pydantic, so they document themselves)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

RegistrationState = Literal["SCHEDULED", "OPEN", "CLOSED"]
PublicRaceStatus = Literal["NOT_YET_OPEN", "OPEN", "CLOSED"]
PublicEventStatus = Literal["NOT_YET_OPEN", "OPEN", "SOLD_OUT", "CLOSED"]


class Race(BaseModel):
    """A race as stored: a director's edit bumps ``version``."""

    raceId: str
    ownerId: str
    name: str
    location: str = ""
    raceDate: str  # YYYY-MM-DD, local to the race
    description: str = ""
    currency: str = "USD"
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    registrationState: RegistrationState = "SCHEDULED"
    holdMinutes: int = 10
    published: bool = True
    version: int = 1


class Event(BaseModel):
    raceId: str
    eventId: str
    name: str
    cap: int
    priceCents: int
    currency: str = "USD"
    shards: int = 1


class EventView(BaseModel):
    eventId: str
    name: str
    cap: int
    spotsLeft: int = Field(description="Places left; may be a few seconds stale (cached), never used to decide a hold.")
    priceCents: int
    currency: str
    status: PublicEventStatus


class RaceSummaryView(BaseModel):
    raceId: str
    name: str
    location: str
    raceDate: str
    status: PublicRaceStatus
    registrationOpensAt: datetime
    registrationClosesAt: datetime


class RaceView(RaceSummaryView):
    description: str
    currency: str
    holdMinutes: int
    events: list[EventView]


class RaceList(BaseModel):
    races: list[RaceSummaryView]


# -- holds and registrations -----------------------------------------------------------
class HoldCreated(BaseModel):
    holdId: str
    expiresAt: datetime
    raceId: str
    eventId: str


class RegistrationAccepted(BaseModel):
    registrationId: str
    status: Literal["QUEUED", "CONFIRMED"]


class RegistrationStatus(BaseModel):
    registrationId: str
    status: Literal["QUEUED", "CONFIRMED", "FAILED"]
    raceId: str
    eventId: str
    bib: int | None = None
    firstName: str | None = None
    lastName: str | None = None
    eventName: str | None = None
    raceName: str | None = None
    confirmedAt: datetime | None = None
    message: str | None = None
