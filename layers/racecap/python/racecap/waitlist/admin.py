"""The director's side of an event's waitlist: the list with places and states, and removing
someone. The trail names the entry by its id, never by its address or name (the trail outlives
the retention period that deletes runners' data)."""

from __future__ import annotations

import time
from collections.abc import Callable

from racecap.audit.service import AuditEntries
from racecap.aws.transactions import ConditionFailed
from racecap.errors import Conflict, WaitlistEntryNotFound
from racecap.models import Director
from racecap.races.models import Event
from racecap.waitlist.closing import WaitlistClosing
from racecap.waitlist.models import AdminWaitlistEntry, AdminWaitlistView, WaitlistEntry
from racecap.waitlist.rules import iso, position
from racecap.waitlist.store import WaitlistStore

_ORDER = {"WAITING": 0, "OFFERED": 1, "PENDING": 2, "LEFT": 3, "REMOVED": 3}


class WaitlistAdmin:
    def __init__(
        self,
        store: WaitlistStore,
        audit: AuditEntries,
        clock: Callable[[], float] = time.time,
        closing: WaitlistClosing | None = None,
    ) -> None:
        self._store = store
        self._audit = audit
        self._clock = clock
        self._closing = closing

    def close(self, director: Director, race_id: str, event: Event) -> AdminWaitlistView:
        """The director closes the list: offers out and pooled places back to the public, one email
        to each runner still waiting; audited. Safe to repeat."""
        if self._closing is None:
            raise Conflict("Closing the waitlist is not available here.")
        audit = self._audit.item(director, race_id, "waitlist.close", event.eventId, eventId=event.eventId)
        self._closing.close(race_id, event.eventId, [audit])
        return self.view(race_id, event)

    def view(self, race_id: str, event: Event) -> AdminWaitlistView:
        line = self._store.line(race_id, event.eventId)
        entries = sorted(
            self._store.entries(race_id, event.eventId),
            key=lambda e: (_ORDER[e.state], e.seq if e.seq is not None else 0, e.joinedAt),
        )
        return AdminWaitlistView(
            raceId=race_id,
            eventId=event.eventId,
            settings=event.waitlist,
            length=line.waiting,
            joined=line.seq,
            head=line.head,
            pooled=line.pool,
            offersOut=line.offered,
            offersMade=line.made,
            accepted=line.claimed,
            expired=line.expired,
            declined=line.declined,
            closed=line.closed,
            entries=[_row(e, line.head) for e in entries],
        )

    def remove(self, director: Director, race_id: str, event_id: str, entry_id: str) -> None:
        """Take an entry off the list (a repeat does nothing more); audited by entry id only."""
        for _ in range(3):
            entry = self._store.get(race_id, event_id, entry_id)
            if entry is None:
                raise WaitlistEntryNotFound(f"No entry {entry_id} on this event's waitlist.")
            if entry.state == "REMOVED":
                return
            audit = self._audit.item(
                director, race_id, "waitlist.entry.remove", entry_id, eventId=event_id, state=entry.state,
                number=entry.seq,
            )  # fmt: skip
            try:
                self._store.remove(entry, iso(self._clock()), [audit])
                return
            except ConditionFailed:
                continue  # confirmed or left in between: remove it from where it is now
        raise Conflict("The entry kept changing; please retry.")


def _row(entry: WaitlistEntry, head: int) -> AdminWaitlistEntry:
    return AdminWaitlistEntry(
        entryId=entry.entryId,
        state=entry.state,
        number=entry.seq,
        position=position(entry.seq, head) if entry.state == "WAITING" and entry.seq else None,
        email=entry.email,
        firstName=entry.firstName,
        lastName=entry.lastName,
        joinedAt=entry.joinedAt,
        confirmedAt=entry.confirmedAt,
        leftAt=entry.leftAt,
        removedAt=entry.removedAt,
    )
