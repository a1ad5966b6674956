"""A hold and its payment attempt as stored (typed, so a misspelt phase fails at the boundary),
and the hold API's shapes. Field names are camelCase because they are the stored attribute names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field

from racecap.models import JsonInt, Model, _Record
from racecap.races.rules import MAX_TEAM_SIZE, MIN_TEAM_SIZE


class HoldPhase(StrEnum):
    """HELD → PAYING → QUEUED → CONFIRMED (→ CANCELLED by a director), or HELD/PAYING →
    RELEASED | EXPIRED, and PAYING → HELD on a declined card (the runner may try another)."""

    HELD = "HELD"
    PAYING = "PAYING"
    QUEUED = "QUEUED"
    CONFIRMED = "CONFIRMED"
    RELEASED = "RELEASED"
    EXPIRED = "EXPIRED"
    CANCELLED = "CANCELLED"


PAID_PHASES = frozenset({HoldPhase.PAYING, HoldPhase.QUEUED, HoldPhase.CONFIRMED})


DONE_PHASES = frozenset({HoldPhase.QUEUED, HoldPhase.CONFIRMED})


GONE_PHASES = frozenset({HoldPhase.RELEASED, HoldPhase.EXPIRED})


# Past paying for good: no phase leads back from these to PAYING.
SETTLED_PHASES = DONE_PHASES | {HoldPhase.CANCELLED}


class EmailClaimPhase(StrEnum):
    """An email's claim on one race, made by the payment and kept by the registration. Whether
    it ended in one is the registration's to say (it exists or not): marking the claim as
    well cost the writer one more item per registration (issue 14)."""

    CLAIMED = "CLAIMED"


class BeginOutcome(StrEnum):
    STARTED = "STARTED"
    OPTION_GONE = "OPTION_GONE"  # a stocked option's shard was full (``Attempt.stock``)
    HOLD_GONE = "HOLD_GONE"
    EMAIL_TAKEN = "EMAIL_TAKEN"


@dataclass(frozen=True)
class Attempt:
    """One try at paying for a hold: same runner + same card = same attempt (same key)."""

    key: str
    email: str
    firstName: str
    lastName: str
    dateOfBirth: str
    amountCents: int
    currency: str
    startedAt: str
    # The runner's answers to the event's questions, as compact JSON ({questionId: answer}:
    # numbers stay JSON numbers, where a DynamoDB map would refuse a float), and the version
    # they answered. Events with questions only: absent otherwise, so those holds write what
    # they did before.
    answers: str | None = None
    questionsVersion: int | None = None
    # The options with stock the answers took (``aws.keys.stock_entry``: question, option and
    # shard), given back with the place when the attempt ends without a registration.
    stock: list[str] | None = None
    # The waiver's acceptance (JSON, ``questions.models.WaiverRecord``): version, hash, time.
    waiver: str | None = None
    # A team hold's (``Hold.places`` > 1): the team's name and every member's details, the
    # captain first (``TeamMember`` as dicts: a DynamoDB map). The fields above are then the
    # captain's, and ``amountCents`` the whole team's: the one payment's amount.
    teamName: str | None = None
    members: list[dict[str, Any]] | None = None

    def team(self) -> list[TeamMember]:
        return [TeamMember.model_validate(m) for m in self.members or ()]


class TeamMember(Model):
    """One member of a team's attempt: their own registration, email claim, answers and share
    of the team's one payment (``amountCents``), and the cap shard their place came from."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    registrationId: str
    email: str
    firstName: str
    lastName: str
    dateOfBirth: str
    amountCents: int
    shard: str
    answers: str | None = None
    questionsVersion: int | None = None
    stock: list[str] | None = None
    waiver: str | None = None


class Reprice(_Record):
    """A code applied or removed after the card step started, not yet final (racecap.codes):
    its use taken (on ``shard``), the intent's amount being changed under ``key``
    (``reprice-<intent>-<changeId>``: one key per change, so a retry replays it and no key ever
    carries two amounts). Finished (the hold's price becomes ``amountCents``) or undone (the
    use given back) by whoever meets it first: the call's retry, the webhook, the sweeper."""

    changeId: str
    code: str | None = None  # None: the code is being removed
    shard: str | None = None
    amountCents: int
    listCents: int


class Hold(_Record):
    """A held place (Inventory ``HOLD#<holdId>``)."""

    holdId: str
    registrationId: str
    raceId: str
    eventId: str
    status: HoldPhase
    createdAt: datetime
    expiresAt: datetime
    shard: str = ""  # the cap shard its place came from; set when claimed
    attempt: Attempt | None = None  # while PAYING and after
    chargeId: str | None = None  # the provider's payment (intent) id, once paid
    # The hold's one PaymentIntent, recorded as its payment begins (registration.attempts.begin_payment).
    intentId: str | None = None
    # Pushed back once (bounded) while the runner's bank asks for 3-D Secure at expiry.
    extended: bool = False
    queuedAt: datetime | None = None
    # While QUEUED: when the sweeper re-sends the registration message if the writer has not
    # confirmed it by then (a message lost after it was accepted), and how often it has.
    requeueAt: datetime | None = None
    requeues: int = 0
    bib: int | None = None
    # Per-client hold limits it counts against (counter key -> limit when held): the
    # device's and the address's (racecap.fairness.limits); freed when the place leaves HELD/PAYING,
    # except into a free entry, which keeps counting.
    clientLimits: dict[str, int] = {}
    # The price when the place was taken (the event's then): what the hold's payment charges,
    # whatever the director changes meanwhile. None on holds taken before prices rode on the hold.
    amountCents: int | None = None
    currency: str | None = None
    # A discount code the runner applied (racecap.codes): one use taken on ``codeShard`` of
    # its counter, given back if the hold expires or is released unpaid. ``amountCents`` is
    # then the discounted price (what is charged) and ``listCents`` the price before it.
    code: str | None = None
    codeShard: str | None = None
    listCents: int | None = None
    # While PAYING: a code change under way on the intent's amount (at most one at a time).
    reprice: Reprice | None = None
    # A team hold (see ``racecap.holds``): ``places`` places taken together, ``shardTakes`` of
    # them from each cap shard, one registration id per member (the captain's is
    # ``registrationId``, first). Absent on a single place's hold: not a byte more written.
    places: int = 1
    shardTakes: dict[str, int] = {}
    memberIds: list[str] = []
    # A place offered from the event's waitlist and claimed (racecap.waitlist): the entry it was
    # offered to. Its place was the line's: unpaid, it goes back to the line's pool, not the public.
    offerEntry: str | None = None
    # The address the offer went to: the registration must use it (one runner's place, not a coupon).
    offerEmail: str | None = None
    # A switch's hold (registration.switch): the place in the target event held for this
    # registration while its runner pays any difference; no email claim, no client limits.
    switchOf: str | None = None
    # A personal code on the hold (a deferral's credit, racecap.codes ``forEmail``): the
    # registration must use this address, as a waitlist offer's must.
    codeEmail: str | None = None
    # A guaranteed entry's hold on a ballot event (racecap.codes.guaranteed): one of the places
    # kept out of the draw, taken with a guaranteed-entry code once the ballot is drawn. Freed,
    # it goes back to the kept places, not to the ballot's line. Absent on other holds.
    guaranteed: bool = False

    @property
    def is_team(self) -> bool:
        return self.places > 1

    def taken_by_shard(self) -> dict[str, int]:
        """The places it holds per cap shard: one on ``shard``, or a team's ``shardTakes``."""
        return dict(self.shardTakes) if self.shardTakes else {self.shard: 1}

    def member_shards(self) -> list[str]:
        """Each member's place's shard, in member order (a single place: its one shard)."""
        return [s for s, k in sorted(self.taken_by_shard().items()) for _ in range(k)]

    def client_takes(self, key: str) -> int:
        """What the hold counts against one client-limit counter: a team hold counts as one
        hold of its device, and as all its places against its address's ceiling."""
        return self.places if "#A#" in key else 1

    @property
    def discountCents(self) -> int:
        return (
            (self.listCents - self.amountCents) if self.code and self.listCents and self.amountCents is not None else 0
        )

    def expired(self, now: datetime) -> bool:
        return self.expiresAt <= now


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


class TeamHoldRequest(Model):
    model_config = ConfigDict(extra="forbid")

    places: JsonInt = Field(
        ge=MIN_TEAM_SIZE,
        le=MAX_TEAM_SIZE,
        description="The team's size: within the event's teamMinSize..teamMaxSize. All places are held or none.",
    )


TRANSACTION_ITEMS = 100
