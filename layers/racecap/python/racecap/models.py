"""The domain's records and the API's shapes (pydantic, so they document themselves)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator


def _whole_number(v: object) -> object:
    # JSON Schema's "integer" is any number without a fraction, 5.0 included; true is not one.
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


# An integer in a request body, strict per field: `true`, "5" or [] are refused (pydantic's
# lax int would take the first two), 5.0 is 5. Not a model-wide strict mode: Powertools
# validates the parsed JSON as Python objects, where that would refuse ISO date strings.
WHOLE_NUMBER = BeforeValidator(_whole_number)
JsonInt = Annotated[int, Strict(), WHOLE_NUMBER]
# An optional one spells its bounds inside, before WHOLE_NUMBER: pydantic applies bounds
# given on an optional field after the validator and then writes them into the document
# as raw "ge"/"le" keys, which no client or fuzzer reads (the bounds would be invisible).
# e.g. ``cap: Annotated[int, Strict(), Gt(0), Le(10), WHOLE_NUMBER] | None = None``


class Model(BaseModel):
    """Every Racecap model: its validator is built by its first use, not by the import.
    Building all of them at import cost each cold start ~40 ms for models a function never
    validates (issue 14); a function pays for the few it uses, once."""

    model_config = ConfigDict(defer_build=True)


RegistrationState = Literal["SCHEDULED", "OPEN", "CLOSED"]
# DRAFT: closed to runners (no page, no holds) while the director sets it up; UNLISTED: open
# by its link only; LISTED: also on the public race list.
Listing = Literal["DRAFT", "UNLISTED", "LISTED"]
PublicRaceStatus = Literal["NOT_YET_OPEN", "OPEN", "CLOSED"]
PublicEventStatus = Literal["NOT_YET_OPEN", "OPEN", "SOLD_OUT", "CLOSED"]


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
    # Days after raceDate that runners' personal data is kept (racecap.logic.retention).
    retentionDays: int = 365
    purgedAt: datetime | None = None  # when the retention job deleted it

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
    # The event's age rule, on race day (racecap.logic.eligibility): events stored before the
    # rule existed read as the old site-wide minimum of 5 and no maximum.
    minAge: int = 5
    maxAge: int | None = None
    # Later prices by date, in order (racecap.logic.pricing): the price a hold takes is the one
    # in force when the place is held.
    priceTiers: list[PriceTier] = []
    # Team entries (racecap.teams): a captain holds and pays for teamMinSize..teamMaxSize
    # places together. None: the event takes single entries only.
    teamMinSize: int | None = None
    teamMaxSize: int | None = None

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


# -- holds and registrations -----------------------------------------------------------
class HoldCreated(Model):
    holdId: str
    expiresAt: datetime
    raceId: str
    eventId: str
    priceCents: int = Field(description="What this place costs: the price in force when it was held.")
    currency: str
    places: int = Field(default=1, description="Places held: 1, or a team's size.")
    totalCents: int | None = Field(default=None, description="A team's: what all its places cost together.")


class HoldView(Model):
    """What a hold's link tells whoever opens it: never the runner's personal data."""

    holdId: str
    places: int = Field(default=1, description="Places held: 1, or a team's size (POST .../teams).")
    status: Literal["HELD", "PAYING", "QUEUED", "CONFIRMED", "EXPIRED", "RELEASED", "CANCELLED"] = Field(
        description="HELD: details not sent yet; PAYING: details sent, the card step is next "
        "(POST /api/holds/{holdId}/payment gives it); QUEUED/CONFIRMED: paid (see registrationId)."
    )
    expiresAt: datetime
    detailsSent: bool = Field(description="The runner's details were sent (from whichever device).")
    raceId: str
    raceName: str
    raceDate: str
    timeZone: str
    eventId: str
    eventName: str
    priceCents: int = Field(description="What the place costs: the price when it was held, less a code's discount.")
    currency: str
    code: str | None = Field(default=None, description="The discount code applied (PUT /api/holds/{holdId}/code).")
    listPriceCents: int | None = Field(default=None, description="With a code: the price before its discount.")
    minAge: int
    maxAge: int | None
    ageRule: str
    registrationId: str | None = Field(description="Once paid: the registration to follow (its waiting screen).")


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


class WebhookAnswer(Model):
    received: bool
    outcome: str = Field(description="What the event did: queued, already, orphan, declined, cancelled, flagged…")


class RegistrationStatus(Model):
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


# -- the race directors' admin API ---------------------------------------------------
class Director(Model):
    """Who is calling the admin API: from the JWT's claims (Cognito on AWS)."""

    sub: str  # the stable user id; races are owned by it
    username: str
    email: str = ""


class AdminEventView(Model):
    eventId: str
    name: str
    cap: int
    priceCents: int = Field(description="The price until the first tier starts.")
    priceTiers: list[PriceTier]
    priceNow: int = Field(description="The price in force now.")
    currency: str
    shards: int
    minAge: int
    maxAge: int | None
    teamMinSize: int | None = None
    teamMaxSize: int | None = None
    taken: int = Field(description="Places held, paid or confirmed right now.")
    placesLeft: int


class AdminRaceSummary(Model):
    raceId: str
    name: str
    raceDate: str
    timeZone: str
    status: PublicRaceStatus
    registrationState: RegistrationState
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    listing: Listing = Field(
        description="DRAFT: closed to runners; UNLISTED: open by its link only; LISTED: also on the race list."
    )
    published: bool = Field(description="Not a draft (listing is UNLISTED or LISTED).")
    version: int


class AdminRaceList(Model):
    races: list[AdminRaceSummary]


class AdminRaceView(AdminRaceSummary):
    location: str
    description: str
    currency: str
    holdMinutes: int
    retentionDays: int = Field(description="Days after the race that runners' personal data is kept.")
    personalDataDeletedOn: str = Field(
        description="YYYY-MM-DD: the day the retention job deletes runners' emails, dates of birth and "
        "payment references (raceDate + retentionDays); names, bibs, results and stats stay."
    )
    purgedAt: datetime | None = Field(description="When that deletion happened; null until then.")
    events: list[AdminEventView]


class WorkflowView(Model):
    execution: str
    executionArn: str
    mode: Literal["schedule", "open"]
    status: str = Field(description="RUNNING, SUCCEEDED, FAILED, ABORTED, TIMED_OUT, or UNKNOWN")
    opensAt: datetime
    closesAt: datetime
    startedAt: datetime
    startedBy: str


class WindowView(Model):
    raceId: str
    status: PublicRaceStatus
    registrationState: RegistrationState
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    workflow: WorkflowView | None = Field(description="The window's current workflow; null when none runs.")
    changed: bool = Field(description="False when the call found the window already as asked (a repeat).")


class MinuteCount(Model):
    minute: str = Field(description="UTC minute, YYYY-MM-DDTHH:MM")
    confirmed: int


class EventStats(Model):
    eventId: str
    name: str
    cap: int
    held: int = Field(description="Places held by runners filling in the form or paying.")
    queued: int = Field(description="Paid, waiting on the queue to be written.")
    confirmed: int
    cancelled: int
    placesLeft: int
    currency: str = Field(description="The amounts' currency; each amount is in its smallest unit (JPY: yen).")
    revenueCents: int = Field(description="What the confirmed registrations paid.")
    grossCents: int = Field(description="Everything taken: what the confirmed and the cancelled paid.")
    refundedCents: int = Field(description="Every refund: cancellations', partial ones, and outside ones.")
    netCents: int = Field(description="Gross less refunded: what the race keeps.")
    outsideRefunds: int = Field(
        description="Refunds made outside Racecap (the provider's dashboard), recorded in the ledger: check them."
    )
    perMinute: list[MinuteCount] = Field(description="Confirmations per UTC minute, oldest first, zeros included.")


class CodeUses(Model):
    """One discount code's uses in the director's stats (racecap.codes)."""

    code: str
    used: int = Field(description="Uses taken now: registrations and holds not paid yet carrying it.")
    limit: int | None = Field(description="The uses it allows; none: no limit.")


class RaceStatsView(Model):
    raceId: str
    status: PublicRaceStatus
    asOf: datetime
    minutes: int
    totals: dict[str, int]
    events: list[EventStats]
    codes: list[CodeUses] = Field(default=[], description="The race's discount codes: uses against each limit.")


class RegistrationRow(Model):
    registrationId: str
    eventId: str
    eventName: str
    bib: int
    status: Literal["CONFIRMED", "CANCELLING", "CANCELLED"]
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


class RegistrationPage(Model):
    registrations: list[RegistrationRow]
    nextCursor: str | None = Field(
        description="Pass as `cursor` for more; a search may return fewer than `limit` rows with a cursor."
    )


class CancellationView(Model):
    registrationId: str
    status: Literal["CANCELLED"] = Field(description="The registration's new state.")
    refund: Literal["FULL", "NONE", "AMOUNT"] = Field(description="The refund chosen when it was cancelled.")
    refundedCents: int = Field(description="What this cancellation refunded, in the currency's smallest unit.")
    refundId: str = Field(description="The provider's refund id ('' when nothing was refunded).")
    amountCents: int = Field(description="What the registration paid.")
    currency: str
    cancelledAt: str
    changed: bool = Field(description="False when the registration was already cancelled (a repeat).")


class AuditEntry(Model):
    raceId: str
    entryId: str
    at: datetime
    actor: Director
    action: str = Field(description="e.g. race.create, race.update, event.update, window.open, registration.cancel")
    target: str
    details: dict[str, Any] = Field(default_factory=dict)


class AuditPage(Model):
    entries: list[AuditEntry]
    nextCursor: str | None
