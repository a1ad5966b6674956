"""The ports the logic depends on: one Protocol per store or queue.

The DynamoDB and SQS adapters implement them (``holds``, ``registrations``, ``queues``);
``tests/fakes`` holds an in-memory implementation of each, and ``tests/contract`` runs the
same cases against both so a fake cannot drift from the store it stands for. The payment
port is ``dal/payments.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Protocol

from pydantic import BaseModel

from racecap.dal.transactions import TransactItem
from racecap.domain import (
    Attempt,
    BeginOutcome,
    Hold,
    HoldPhase,
    PaidRegistration,
    Registration,
    RegistrationRowData,
)


class HoldStore(Protocol):
    def claim(self, hold: Hold, shards: list[str], avoid: set[str] | None = None) -> Hold | None:
        """Take one place on a shard with room (``hold`` comes back with its shard); None: all full."""
        ...

    def get(self, hold_id: str) -> Hold | None: ...

    def release(self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None) -> bool:
        """HELD → RELEASED, or → EXPIRED once past ``expiresAt``; the place goes back. False: moved already."""
        ...

    def begin_payment(self, hold: Hold, attempt: Attempt, now: datetime) -> BeginOutcome: ...

    def payment_declined(self, hold: Hold, attempt: Attempt) -> None: ...

    def abandon_payment(self, hold: Hold, attempt: Attempt) -> bool: ...

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime) -> None: ...

    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[Hold]:
        """HELD or PAYING holds whose ``expiresAt`` has passed (the sweeper's index)."""
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

    def begin_cancel_item(self, registration_id: str, now: str, by: str) -> TransactItem: ...

    def undo_cancel_item(self, registration_id: str) -> TransactItem: ...

    def finish_cancel_items(self, reg: Registration, hold: Hold, refund_id: str, now: str) -> list[TransactItem]: ...


class MessageQueue(Protocol):
    def send(self, message: BaseModel) -> str: ...

    def send_many(self, messages: Sequence[BaseModel]) -> None: ...
