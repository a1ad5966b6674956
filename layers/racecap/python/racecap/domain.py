"""The records the logic and the data layer pass each other: holds, registrations, the
queue messages. Typed, so a misspelt field or status fails at the boundary (or in mypy),
not deep inside a transaction.

The public API's response models stay in ``models.py`` (their names are the OpenAPI
document's); the statuses here are called *phases* so they never collide with them.
Field names are camelCase because they are the stored attribute names.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, TypedDict

from pydantic import ConfigDict, Field

from racecap.models import Model, RegistrationState


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


class RegistrationPhase(StrEnum):
    CONFIRMED = "CONFIRMED"
    CANCELLING = "CANCELLING"  # the director's decision is recorded; the refund may be in flight
    CANCELLED = "CANCELLED"


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


class _Record(Model):
    model_config = ConfigDict(frozen=True, extra="ignore")

    def __getitem__(self, name: str) -> Any:
        """Read a field by its stored attribute name (for audits and tests that read tables)."""
        return getattr(self, name)


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
    # The options with stock the answers took (``dal.keys.stock_entry``: question, option and
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
    # The hold's one PaymentIntent, recorded when it is created (idempotency key ``intent-<holdId>``).
    intentId: str | None = None
    # While one registration call creates the hold's intent (dal.holds.BUSY_FOR): duplicates wait.
    busyUntil: datetime | None = None
    # Pushed back once (bounded) while the runner's bank asks for 3-D Secure at expiry.
    extended: bool = False
    queuedAt: datetime | None = None
    # While QUEUED: when the sweeper re-sends the registration message if the writer has not
    # confirmed it by then (a message lost after it was accepted), and how often it has.
    requeueAt: datetime | None = None
    requeues: int = 0
    bib: int | None = None
    # Per-client hold limits it counts against (counter key -> limit when held): the
    # device's and the address's (racecap.fairness.limits); freed when the place leaves HELD/PAYING.
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
    # A team hold (racecap.logic.teams): ``places`` places taken together, ``shardTakes`` of
    # them from each cap shard, one registration id per member (the captain's is
    # ``registrationId``, first). Absent on a single place's hold: not a byte more written.
    places: int = 1
    shardTakes: dict[str, int] = {}
    memberIds: list[str] = []

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


class PaidRegistration(_Record):
    """The message on the Registrations queue: what the writer needs, without reading anything."""

    registrationId: str
    holdId: str
    raceId: str
    eventId: str
    email: str
    firstName: str
    lastName: str
    dateOfBirth: str
    amountCents: int
    currency: str
    chargeId: str  # the provider's payment (intent) id
    raceName: str
    raceDate: str
    eventName: str
    paidAt: str
    # As on the attempt: the answers (JSON) and the version of the questions they answered.
    answers: str | None = None
    questionsVersion: int | None = None
    waiver: str | None = None  # as on the attempt
    # The discount code it was held with (racecap.codes) and what it took off the price:
    # ``amountCents`` is what was charged. Absent without a code (no bytes on the item).
    code: str | None = None
    discountCents: int | None = None
    # A team member's (absent otherwise): the team's name, every member's registration id (the
    # captain first: what the team's one payment covers, for refunds and the audit) and the
    # cap shard this member's place came from (a cancellation gives it back there).
    teamName: str | None = None
    teamMembers: list[str] | None = None
    shard: str | None = None


class PaidTeam(_Record):
    """A team's message on the Registrations queue: every member's registration, confirmed
    together by the writer (one transaction: a team is complete or absent)."""

    members: list[PaidRegistration]


class Registration(PaidRegistration):
    """A confirmed registration (Registrations ``REG#<registrationId>``)."""

    bib: int
    status: RegistrationPhase
    confirmedAt: str
    cancelRequestedAt: str | None = None
    cancelledBy: str | None = None
    cancelledAt: str | None = None
    refundId: str | None = None
    # The director's refund choice when cancelling (FULL, NONE, AMOUNT), what it refunds and its
    # ledger key; None on a cancellation begun before the choice existed (it refunded in full).
    cancelRefund: str | None = None
    cancelRefundCents: int | None = None
    cancelRefundKey: str | None = None
    # The ledger (racecap.ledger): the sum of its refunds, reserved or made, and how many of
    # them were made outside Racecap (the provider's dashboard) — flagged to the director.
    # None (absent) until the first: the writer writes the record whole, and two attributes
    # more on every registration item would be bytes on the hot path's writes.
    ledgerRefundedCents: int | None = None
    ledgerPending: int | None = None  # refunds reserved, the provider's answer not recorded yet
    outsideRefunds: int | None = None
    # A cardholder's dispute, from the provider's ``charge.dispute.created``: the director sees it.
    disputeId: str | None = None
    disputedAt: str | None = None
    # Once the race's retention period is over (racecap.logic.retention): email, dateOfBirth
    # and chargeId are "" and the age on race day is kept instead of the date of birth.
    purgedAt: str | None = None
    ageOnRaceDay: int | None = None


class Shard(_Record):
    """One cap shard of an event: ``taken`` of its ``cap`` places are held, paid or sold."""

    sk: str
    cap: int
    taken: int


@dataclass(frozen=True)
class ShardUsage:
    """An event's places as its cap shards count them: ``taken`` of ``cap``."""

    cap: int
    taken: int
    shards: list[Shard]

    @property
    def left(self) -> int:
        return max(0, self.cap - self.taken)


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


@dataclass(frozen=True)
class ShardChange:
    """One step of a cap change: a shard's cap moves from ``old_cap`` (None: a new shard)."""

    sk: str
    old_cap: int | None
    new_cap: int


class RegistrationRowData(TypedDict, total=False):
    """What directors see of a registration (lists, search, CSV): read by projection, as
    plain values, because 50,000 of them must stream fast; ``RegistrationRow`` validates
    the ones an API page returns."""

    registrationId: str
    eventId: str
    eventName: str
    bib: int
    status: str
    firstName: str
    lastName: str
    email: str
    dateOfBirth: str
    amountCents: int
    currency: str
    confirmedAt: str
    cancelledAt: str
    refundId: str
    disputeId: str
    purgedAt: str
    ledgerRefundedCents: int
    ledgerPending: int
    outsideRefunds: int
    cancelRefund: str
    cancelRefundCents: int
    ageOnRaceDay: int  # results' age groups, once the date of birth is deleted
    answers: str  # the answers to the event's questions (JSON), with the version they answered
    questionsVersion: int
    waiver: str  # the waiver's acceptance (JSON)
    code: str
    discountCents: int
    teamName: str


ROW_FIELDS: tuple[str, ...] = tuple(RegistrationRowData.__annotations__)


class WindowRecord(_Record):
    """Which workflow execution runs a race's registration window (Races ``RACE#<id> / WINDOW``)."""

    raceId: str
    startedAt: str
    startedBy: str
    seq: int = 0  # moves on with every change (the condition that keeps two clicks apart)
    execution: str | None = None  # None: no workflow (closed by hand)
    mode: Literal["schedule", "open"] | None = None
    opensAt: str | None = None
    closesAt: str | None = None


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


@dataclass(frozen=True)
class Backlog:
    """The registration writer's backlog, as the waiting screen's wait is worked out from it
    (``logic.backlog``)."""

    waiting: int  # registrations on the writer's queue, waiting or being written
    per_second: float  # what the writer confirmed per second lately (0 when idle)
    latency_s: float  # queue to bib for the registrations it confirmed last (0 when unknown)
