"""What race directors do to their races. The admin API and the demo seed both go here."""

from __future__ import annotations

import math
import secrets
from datetime import datetime

from pydantic import BaseModel, Field, field_validator, model_validator

from racecap.dal.inventory import DynamoInventory
from racecap.dal.races import RaceStore
from racecap.models import Event, Race

# One DynamoDB item sustains ~1,000 writes/s. A hold is one write to one shard, so an
# event with S shards takes ~S x 1,000 holds/s; 8 shards clears RunSignUp's peak 1,500
# registrations/s with five-fold headroom. Small caps get fewer shards (>= 1 place each)
# so the last places of a small event aren't scattered across mostly-full shards.
MAX_SHARDS = 8
PLACES_PER_SHARD_MIN = 25

KNOWN_CURRENCIES = frozenset({"USD", "EUR", "GBP", "CAD", "AUD", "NZD", "CHF", "SEK", "NOK", "DKK", "JPY"})


def shards_for(cap: int) -> int:
    return max(1, min(MAX_SHARDS, math.ceil(cap / PLACES_PER_SHARD_MIN)))


def new_id(prefix: str) -> str:
    """Unguessable ids (~128 bits), readable prefix for support staff."""
    return f"{prefix}_{secrets.token_urlsafe(16)}"


class EventDraft(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    cap: int = Field(gt=0, le=1_000_000)
    priceCents: int = Field(gt=0, le=10_000_000)


class RaceDraft(BaseModel):
    name: str = Field(min_length=1, max_length=150)
    location: str = Field(default="", max_length=150)
    raceDate: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    description: str = Field(default="", max_length=5000)
    currency: str = "USD"
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    holdMinutes: int = Field(default=10, ge=1, le=60)
    events: list[EventDraft] = Field(min_length=1, max_length=50)

    @field_validator("currency")
    @classmethod
    def _currency(cls, v: str) -> str:
        if v.upper() not in KNOWN_CURRENCIES:
            raise ValueError(f"Unknown currency {v!r}.")
        return v.upper()

    @field_validator("registrationOpensAt", "registrationClosesAt")
    @classmethod
    def _aware(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("Give a time zone, e.g. 2026-05-01T09:00:00Z.")
        return v

    @model_validator(mode="after")
    def _window(self) -> RaceDraft:
        if self.registrationClosesAt <= self.registrationOpensAt:
            raise ValueError("registrationClosesAt must be after registrationOpensAt.")
        return self


class RaceAdmin:
    def __init__(self, store: RaceStore, inventory: DynamoInventory) -> None:
        self._store = store
        self._inventory = inventory

    def create_race(self, owner_id: str, draft: RaceDraft, *, open_now: bool = False) -> Race:
        race = Race(
            raceId=new_id("race"),
            ownerId=owner_id,
            name=draft.name,
            location=draft.location,
            raceDate=draft.raceDate,
            description=draft.description,
            currency=draft.currency,
            registrationOpensAt=draft.registrationOpensAt,
            registrationClosesAt=draft.registrationClosesAt,
            registrationState="OPEN" if open_now else "SCHEDULED",
            holdMinutes=draft.holdMinutes,
        )
        events = [
            Event(
                raceId=race.raceId,
                eventId=new_id("evt"),
                name=e.name,
                cap=e.cap,
                priceCents=e.priceCents,
                currency=draft.currency,
                shards=shards_for(e.cap),
            )
            for e in draft.events
        ]
        # Shards first: a race is only visible once every place it advertises exists.
        for e in events:
            self._inventory.create_event_shards(race.raceId, e.eventId, e.cap, e.shards)
        self._store.create(race, events)
        return race
