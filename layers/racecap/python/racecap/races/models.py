"""Races, events and price tiers as stored, the views runners read, and the changes a
set-up makes."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, Literal, TypedDict

from pydantic import Field, model_validator

from racecap.models import Model


class RaceChanges(TypedDict, total=False):
    """The fields of a race a director (or the window) may change in one edit."""

    name: str
    location: str
    raceDate: str
    description: str
    currency: str
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    registrationState: RegistrationState
    holdMinutes: int
    listing: str
    retentionDays: int
    refundPolicy: RefundPolicy
    nextEdition: str  # set once, when the race is copied (setup.service.copy_race)


class EventChanges(TypedDict, total=False):
    name: str
    cap: int
    priceCents: int
    currency: str
    shards: int
    minAge: int
    maxAge: int | None
    priceTiers: list[dict[str, Any]]
    teamMinSize: int | None
    teamMaxSize: int | None
    waitlist: dict[str, Any]
    ballot: dict[str, Any]


RegistrationState = Literal["SCHEDULED", "OPEN", "CLOSED"]


# DRAFT: closed to runners (no page, no holds) while the director sets it up; UNLISTED: open
# by its link only; LISTED: also on the public race list.
Listing = Literal["DRAFT", "UNLISTED", "LISTED"]


PublicRaceStatus = Literal["NOT_YET_OPEN", "OPEN", "CLOSED"]


PublicEventStatus = Literal["NOT_YET_OPEN", "OPEN", "SOLD_OUT", "CLOSED"]


class RefundTier(Model):
    """Until the end of ``until`` (a day in the race's zone), a runner who cancels gets
    ``percent`` of what they paid back (less the policy's fee)."""

    until: str = Field(description="YYYY-MM-DD, the tier's last day in the race's time zone.")
    percent: int = Field(ge=0, le=100)


class RefundPolicy(Model):
    """What a runner may do with their own entry, set by the director: cancel (refunded by the
    tiers, less the fee; after the last tier, nothing) and edit their details until a day."""

    runnersMayCancel: bool = Field(default=False, description="Runners may cancel their own entry.")
    tiers: list[RefundTier] = Field(
        default_factory=list,
        max_length=10,
        description="Oldest first, each until a later day: e.g. 100 % until 1 March, 50 % until 1 May. "
        "After the last tier a runner's cancellation refunds nothing.",
    )
    feeCents: int = Field(
        default=0, ge=0, le=10_000_000, description="Kept from every runner's refund, in the currency's smallest unit."
    )
    editUntil: str | None = Field(
        default=None, description="YYYY-MM-DD: the last day runners may edit their details (race's zone)."
    )
    transfersUntil: str | None = Field(
        default=None,
        description="YYYY-MM-DD: the last day runners may hand their place to someone else (race's zone); "
        "none: no transfers.",
    )
    transferFeeCents: int = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="What the new runner pays to take a place over, in the currency's smallest unit (0: nothing; "
        "else at least the payment provider's minimum).",
    )
    transferredRefundable: bool = Field(
        default=True,
        description="Whether a place taken over may still be cancelled with a refund under the tiers (the entry "
        "payment goes back to the card that paid it, the original runner's).",
    )

    switchesUntil: str | None = Field(
        default=None,
        description="YYYY-MM-DD: the last day runners may switch to another event of the race (race's zone); "
        "none: no switches. A dearer event's difference is paid, a cheaper one's refunded.",
    )

    deferralsUntil: str | None = Field(
        default=None,
        description="YYYY-MM-DD: the last day runners may defer their place to the race's next edition (race's "
        "zone); none: no deferrals. Needs a next edition (a copy of this race).",
    )
    deferralFeeCents: int = Field(
        default=0, ge=0, le=10_000_000, description="Kept from what a deferring runner paid; the rest is their credit."
    )

    def shifted(self, days: int) -> RefundPolicy:
        """The same policy for an edition ``days`` later (a copied race)."""

        def move(day: str) -> str:
            return (date.fromisoformat(day) + timedelta(days=days)).isoformat()

        return self.model_copy(
            update={
                "tiers": [t.model_copy(update={"until": move(t.until)}) for t in self.tiers],
                "editUntil": move(self.editUntil) if self.editUntil else None,
                "transfersUntil": move(self.transfersUntil) if self.transfersUntil else None,
                "switchesUntil": move(self.switchesUntil) if self.switchesUntil else None,
                "deferralsUntil": move(self.deferralsUntil) if self.deferralsUntil else None,
            }
        )


DEFAULT_OFFER_WINDOW_HOURS = 48
MAX_OFFER_WINDOW_HOURS = 14 * 24
MAX_WAITLIST_LENGTH = 100_000


class WaitlistSettings(Model):
    """An event's waitlist, set by the director (issue 40): off until switched on."""

    enabled: bool = Field(default=False, description="Runners may join the waitlist once the event is sold out.")
    offerWindowHours: int = Field(
        default=DEFAULT_OFFER_WINDOW_HOURS,
        ge=1,
        le=MAX_OFFER_WINDOW_HOURS,
        description="How long a runner offered a freed place has to take it (never past registration's close).",
    )
    maxLength: int | None = Field(
        default=None,
        ge=1,
        le=MAX_WAITLIST_LENGTH,
        description="The most runners the list holds at once (confirmed entries); null: no cap.",
    )


DEFAULT_PAY_DAYS = 7
MAX_PAY_DAYS = 14  # the waitlist's longest offer window: the winners' offers are its offers


class BallotSettings(Model):
    """An event's ballot, set by the director (issue 43): applications over a window, then a
    draw anyone can verify. Off until set; fixed once its window opened."""

    enabled: bool = False
    opensAt: datetime | None = None  # UTC; the window applications are taken in
    closesAt: datetime | None = None
    drawAt: datetime | None = None  # when the draw runs (at or after the close)
    keptPlaces: int = 0  # places kept out of the draw for guaranteed entries (codes, the admin API)
    payDays: int = DEFAULT_PAY_DAYS  # the winners' window to register and pay
    commitment: str | None = None  # SHA-256 of the secret seed, published before the window opens

    def places(self, cap: int) -> int:
        return max(0, cap - self.keptPlaces)

    def phase(self, now: datetime) -> BallotPhase:
        if not self.enabled or self.opensAt is None or self.closesAt is None:
            return "NONE"
        if now < self.opensAt:
            return "UPCOMING"
        return "OPEN" if now < self.closesAt else "CLOSED"


BallotPhase = Literal["NONE", "UPCOMING", "OPEN", "CLOSED"]


class BallotView(Model):
    """An event's ballot as runners see it on the race page."""

    phase: BallotPhase = Field(description="UPCOMING, OPEN (applications taken), CLOSED (waiting for the draw).")
    opensAt: datetime
    closesAt: datetime
    drawAt: datetime
    places: int = Field(description="Places drawn (the event's cap less places kept for guaranteed entries).")
    payDays: int = Field(description="Days a winner has to register and pay once told.")
    commitment: str = Field(
        description="SHA-256 (hex) of the draw's secret seed, published before the window opens: the seed revealed "
        "at the draw must hash to it."
    )


class Race(Model):
    """A race as stored: a director's edit bumps ``version``."""

    raceId: str
    ownerId: str
    name: str
    location: str = ""
    raceDate: str  # YYYY-MM-DD, local to the race
    description: str = ""
    currency: str = "USD"
    timeZone: str = "UTC"  # IANA; races stored before it existed are in UTC
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    registrationState: RegistrationState = "SCHEDULED"
    holdMinutes: int = 10
    listing: Listing = "LISTED"
    version: int = 1
    # Days after raceDate that runners' personal data is kept (retention.service).
    retentionDays: int = 365
    purgedAt: datetime | None = None  # when the retention job deleted it
    # What runners may do with their own entry (issue 39): none, until the director says.
    refundPolicy: RefundPolicy = Field(default_factory=RefundPolicy)
    # Editions (issue 41, deferrals): the race this one was copied from, and the copy made of it.
    continues: str | None = None
    nextEdition: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _listing_from_published(cls, data: Any) -> Any:
        # Races stored before drafts existed have ``published`` (true: listed, false: by link).
        if isinstance(data, dict) and "listing" not in data and "published" in data:
            data = {**data, "listing": "LISTED" if data["published"] else "UNLISTED"}
        return data

    @property
    def is_draft(self) -> bool:
        return self.listing == "DRAFT"


class PriceTier(Model):
    """From ``startsAt`` on, the event costs ``priceCents`` (an early-bird price is the event's
    own ``priceCents`` until the first tier starts)."""

    startsAt: datetime
    priceCents: int


class Event(Model):
    raceId: str
    eventId: str
    name: str
    cap: int
    priceCents: int
    currency: str = "USD"
    shards: int = 1
    position: int = 0  # the director's order, which runners see
    # The event's age rule, on race day (races.rules): events stored before the
    # rule existed read as the old site-wide minimum of 5 and no maximum.
    minAge: int = 5
    maxAge: int | None = None
    # Later prices by date, in order (``races.models.Race.price_at``): the price a hold takes is the one
    # in force when the place is held.
    priceTiers: list[PriceTier] = []
    # Team entries (racecap.teams): a captain holds and pays for teamMinSize..teamMaxSize
    # places together. None: the event takes single entries only.
    teamMinSize: int | None = None
    teamMaxSize: int | None = None
    # The event's waitlist (racecap.waitlist); events stored before it existed have none.
    waitlist: WaitlistSettings = Field(default_factory=WaitlistSettings)
    # The event's ballot (racecap.ballot); events stored before it existed have none.
    ballot: BallotSettings = Field(default_factory=BallotSettings)

    def price_at(self, at: datetime) -> int:
        price = self.priceCents
        for tier in self.priceTiers:
            if tier.startsAt <= at:
                price = tier.priceCents
        return price

    def next_tier(self, at: datetime) -> PriceTier | None:
        return next((t for t in self.priceTiers if t.startsAt > at), None)


class EventView(Model):
    eventId: str
    name: str
    cap: int
    spotsLeft: int = Field(description="Places left; may be a few seconds stale (cached), never used to decide a hold.")
    priceCents: int = Field(description="The price now: what a place held now costs.")
    currency: str
    status: PublicEventStatus
    priceChanges: list[PriceTier] = Field(description="The prices still to come, by date (e.g. after an early bird).")
    minAge: int = Field(description="The youngest a runner may be on race day.")
    maxAge: int | None = Field(description="The oldest a runner may be on race day; null: no limit.")
    ageRule: str = Field(description="The rule in words, e.g. 'ages 4 to 12 on race day'.")
    teamMinSize: int | None = Field(
        default=None, description="Team entries: the smallest team a captain may enter; null: no team entries."
    )
    teamMaxSize: int | None = Field(default=None, description="Team entries: the largest team.")
    waitlist: bool = Field(
        default=False,
        description="The event has a waitlist: once it is SOLD_OUT, runners may join it "
        "(POST /api/races/{raceId}/events/{eventId}/waitlist).",
    )
    ballot: BallotView | None = Field(
        default=None,
        description="The event's places are drawn from applications (POST /api/races/{raceId}/events/{eventId}/"
        "ballot): null for a first-come event.",
    )


class EventSummaryView(Model):
    eventId: str
    name: str
    spotsLeft: int = Field(description="Places left, as on the race page (cached for seconds).")
    priceCents: int
    currency: str
    status: PublicEventStatus


class RaceSummaryView(Model):
    raceId: str
    name: str
    location: str
    raceDate: str
    timeZone: str = Field(description="The race's IANA time zone: show its times in it.")
    status: PublicRaceStatus
    registrationOpensAt: datetime
    registrationClosesAt: datetime


class RaceListItem(RaceSummaryView):
    events: list[EventSummaryView] = Field(description="Each event's places left or SOLD_OUT, in the race's order.")


class RaceView(RaceSummaryView):
    description: str
    currency: str
    holdMinutes: int
    events: list[EventView]


class RaceList(Model):
    races: list[RaceListItem]
