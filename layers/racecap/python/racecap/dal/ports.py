"""The ports the logic depends on: one Protocol per store, queue or workflow.

The adapters implement them: DynamoDB (``holds``, ``registrations``, ``races``,
``inventory``, ``windows``, ``audit``), SQS (``queues``) and Step Functions
(``workflows``); ``wiring.py`` builds the concrete ones. ``tests/fakes`` holds an in-memory
implementation of each, and ``tests/contract`` runs the same cases against both so a fake
cannot drift from what it stands for. The payment port is ``dal/payments.py``; the mail
port ``dal/mailer.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from racecap.dal.transactions import TransactItem
from racecap.domain import (
    Attempt,
    Backlog,
    BeginOutcome,
    EventChanges,
    Hold,
    HoldPhase,
    PaidRegistration,
    RaceChanges,
    Registration,
    RegistrationRowData,
    Reprice,
    ShardChange,
    ShardUsage,
    WindowRecord,
)
from racecap.models import AuditEntry, Event, Race


class HoldStore(Protocol):
    def claim(self, hold: Hold, shards: list[str], avoid: set[str] | None = None) -> Hold | None:
        """Take one place on a shard with room (``hold`` comes back with its shard); None: all full."""
        ...

    def claim_team(self, hold: Hold, plan: Callable[[dict[str, int], int], dict[str, int]]) -> Hold | int:
        """Take ``hold.places`` places together across the shards, all or none, spread by
        ``plan`` (shard room -> places per shard); the hold with its ``shardTakes``, or the
        number of places left when fewer than the team's (nothing taken)."""
        ...

    def get(self, hold_id: str) -> Hold | None: ...

    def get_many(self, hold_ids: Sequence[str]) -> list[Hold]:
        """The holds that exist among ``hold_ids`` (consistent reads, in any order)."""
        ...

    def release(self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None) -> bool:
        """HELD → RELEASED, or → EXPIRED once past ``expiresAt``; the place goes back. False: moved already."""
        ...

    def begin_payment(
        self, hold: Hold, attempt: Attempt, now: datetime, *, turn: bool = False, take_stock: bool = True
    ) -> BeginOutcome:
        """HELD → PAYING with ``attempt`` and its email claimed; the same attempt again. With
        ``turn``, not while another call of it is still creating the intent (then HOLD_GONE).
        With ``take_stock``, the attempt's stocked options are taken too, from HELD only
        (``dal.holds.OptionShardFull`` when one's shard is full)."""
        ...

    def finish_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """A code change under way (racecap.codes) made final: the hold's price is its amount."""
        ...

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        """A code change under way dropped, its code's use given back."""
        ...

    def end_call(self, hold: Hold, attempt: Attempt) -> None:
        """The call that began ``attempt`` failed before recording the intent: the next may begin."""
        ...

    def payment_declined(self, hold: Hold, attempt: Attempt) -> None: ...

    def abandon_payment(self, hold: Hold, attempt: Attempt) -> bool: ...

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime, requeue_at: datetime) -> None:
        """PAYING → QUEUED (paid, on the queue); the sweeper sees it again at ``requeue_at``
        unless the writer has confirmed it by then."""
        ...

    def set_intent(self, hold: Hold, attempt: Attempt, intent_id: str) -> bool:
        """Record the hold's one PaymentIntent while ``attempt`` pays (ending its call's turn);
        False: the hold moved on."""
        ...

    def extend(self, hold: Hold, until: datetime) -> bool:
        """Push a PAYING hold's expiry to ``until``, once; False: moved on or extended already."""
        ...

    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[Hold]:
        """HELD or PAYING holds whose ``expiresAt`` has passed, and QUEUED ones whose
        ``requeueAt`` has (the sweeper's index)."""
        ...

    def postpone_requeue(self, hold: Hold, until: datetime) -> bool:
        """Claim a QUEUED hold's due re-send (the next one at ``until``); False: another
        sweeper did, or the writer confirmed it."""
        ...

    def live_counts(self, race_id: str) -> dict[str, int]: ...


class RegistrationStore(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...

    def existing(self, registration_ids: list[str]) -> dict[str, Registration]: ...

    def next_bib(self, race_id: str, event_id: str) -> int: ...

    def confirm_batch(
        self, race_id: str, event_id: str, first_bib: int, paid: list[PaidRegistration], confirmed_at: str
    ) -> list[Registration]:
        """All of ``paid`` with bibs ``first_bib``.., or none: ``CounterMoved`` / ``DuplicateRegistration``."""
        ...

    def event_page(
        self, race_id: str, event_id: str, after_bib: int, limit: int
    ) -> tuple[list[RegistrationRowData], bool]: ...

    def event_rows(self, race_id: str, event_id: str, after_bib: int = 0) -> Iterator[RegistrationRowData]: ...

    def by_bib(self, race_id: str, event_id: str, bib: int) -> RegistrationRowData | None: ...

    def by_email(self, race_id: str, email: str) -> Registration | None: ...

    def stats(self, race_id: str, event_id: str) -> dict[str, int]: ...

    def per_minute(self, race_id: str, event_id: str, since: str) -> dict[str, int]: ...

    def begin_cancel_item(
        self,
        registration_id: str,
        now: str,
        by: str,
        *,
        choice: str | None = None,
        refund_cents: int = 0,
        refund_key: str | None = None,
        charged: int = 0,
    ) -> TransactItem: ...

    def undo_cancel_item(self, registration_id: str, release_cents: int = 0) -> TransactItem: ...

    def finish_cancel_items(
        self, reg: Registration, hold: Hold, refund_id: str, now: str, refunded_cents: int | None = None
    ) -> list[TransactItem]: ...

    def refunds_counted_item(
        self, race_id: str, event_id: str, cents: int, *, outside: bool = False
    ) -> TransactItem: ...

    def flag_dispute(self, registration_id: str, dispute_id: str, now: str) -> bool: ...


class MessageQueue(Protocol):
    def send(self, message: BaseModel) -> str: ...

    def send_many(self, messages: Sequence[BaseModel]) -> None: ...


class WriterPace(Protocol):
    """What the writer measured of itself (it records), and its backlog (the waiting screen reads)."""

    def record(self, confirmed: int, latency_s: float) -> None: ...

    def backlog(self) -> Backlog | None:
        """The writer's backlog now, or None when it cannot be told (the paper's schedule then)."""
        ...


class RaceStore(Protocol):
    """Races and their events (the Races table): what runners read and directors change."""

    def get_race(self, race_id: str) -> tuple[Race, list[Event]] | None:
        """The race and its events in the director's order, read consistently; None: no race."""
        ...

    def race_version(self, race_id: str) -> int:
        """The race's version stamp; 0: no such race."""
        ...

    def list_published(self) -> list[Race]: ...

    def listing_version(self) -> int: ...

    def create(self, race: Race, events: list[Event], also: Sequence[TransactItem] = ()) -> None:
        """The race, its events and the listing in one transaction with ``also``; Conflict: the id exists."""
        ...

    def update_race(
        self,
        race_id: str,
        changes: RaceChanges,
        expected_version: int | None = None,
        also: Sequence[TransactItem] = (),
    ) -> Race: ...

    def apply_update(self, current: Race, changes: RaceChanges, also: Sequence[TransactItem] = ()) -> Race:
        """``changes`` and the next version, if the race is still at ``current.version``; else Conflict."""
        ...

    def list_by_owner(self, owner_id: str) -> list[Race]:
        """The owner's races, newest first."""
        ...

    def version_item(self, race: Race) -> TransactItem: ...

    def put_event_item(self, event: Event) -> TransactItem: ...

    def update_event_item(self, current: Event, changes: EventChanges) -> TransactItem: ...


class Inventory(Protocol):
    """The cap shards of each event (the Inventory table's ``CAP#`` items)."""

    def create_event_shards(self, race_id: str, event_id: str, caps: list[int]) -> None: ...

    def usage(self, race_id: str, event_id: str, *, consistent: bool = False) -> ShardUsage: ...

    def cap_change_items(self, race_id: str, event_id: str, changes: list[ShardChange]) -> list[TransactItem]:
        """A cap change's items: each holds only while its shard's cap and places are as planned."""
        ...


class AuditStore(Protocol):
    def put_item(self, entry: AuditEntry) -> TransactItem: ...

    def page(self, race_id: str, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """Newest first, older than ``before``; the cursor of the next page, or None."""
        ...


class WindowStore(Protocol):
    """Which workflow execution runs each race's registration window."""

    def get(self, race_id: str) -> WindowRecord | None: ...

    def replace_item(self, race_id: str, seq: int, window: WindowRecord) -> TransactItem:
        """``window`` becomes current (at ``seq + 1``), if nobody moved past ``seq`` meanwhile."""
        ...

    def guard_item(self, race_id: str, execution: str) -> TransactItem:
        """Holds only while ``execution`` is the race's current one."""
        ...


class Workflow(Protocol):
    """The registration-window workflow's executions, by name."""

    def execution_arn(self, name: str) -> str: ...

    def start(self, name: str, payload: Mapping[str, str]) -> str:
        """Start ``name`` (a repeat is the same execution); its ARN."""
        ...

    def stop(self, name: str, cause: str) -> None:
        """Stop ``name``; one that never started is no error."""
        ...

    def status(self, name: str) -> str:
        """RUNNING, SUCCEEDED, FAILED, ABORTED, ...; UNKNOWN for one that never started."""
        ...
