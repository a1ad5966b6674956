"""``WaitlistStore`` in memory (``waitlist.store``): the LINE counters and the entries of each
event, each change checked whole and applied whole under one lock, refusing with the same
``ConditionFailed`` item positions as the DynamoDB adapter."""

from __future__ import annotations

import threading
from dataclasses import replace

from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.waitlist.models import Line, WaitlistEntry


class FakeWaitlist:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.lines: dict[tuple[str, str], Line] = {}
        self.items: dict[tuple[str, str, str], WaitlistEntry] = {}

    def line(self, race_id: str, event_id: str) -> Line:
        with self.lock:
            return self.lines.get((race_id, event_id), Line())

    def get(self, race_id: str, event_id: str, entry_id: str) -> WaitlistEntry | None:
        with self.lock:
            return self.items.get((race_id, event_id, entry_id))

    def entries(self, race_id: str, event_id: str) -> list[WaitlistEntry]:
        with self.lock:
            return [e for (r, ev, _), e in self.items.items() if (r, ev) == (race_id, event_id)]

    def put_pending(self, entry: WaitlistEntry, now: int) -> bool:
        key = (entry.raceId, entry.eventId, entry.entryId)
        with self.lock:
            old = self.items.get(key)
            if old is not None and not (old.state == "LEFT" or (old.state == "PENDING" and (old.ttl or 0) < now)):
                return False
            self.items[key] = entry
            return True

    def confirm(self, entry: WaitlistEntry, seen: Line, max_length: int | None, at: str) -> None:
        key = (entry.raceId, entry.eventId, entry.entryId)
        with self.lock:
            line = self.lines.get((entry.raceId, entry.eventId), Line())
            failed = []
            if (
                line.exists != seen.exists
                or line.seq != seen.seq
                or (max_length is not None and line.waiting >= max_length)
            ):
                failed.append(0)
            current = self.items.get(key)
            if current is None or current.state != "PENDING":
                failed.append(1)
            if failed:
                raise ConditionFailed(failed)
            assert current is not None
            number = seen.seq + 1
            self.lines[(entry.raceId, entry.eventId)] = Line(number, line.head, line.waiting + 1, exists=True)
            self.items[key] = current.model_copy(
                update={"state": "WAITING", "seq": number, "confirmedAt": at, "ttl": None}
            )

    def leave(self, entry: WaitlistEntry, at: str) -> None:
        update = {"state": "LEFT", "leftAt": at, "email": "", "firstName": "", "lastName": "", "ttl": None}
        self._move(entry, update, [])

    def remove(self, entry: WaitlistEntry, at: str, also: list[TransactItem]) -> None:
        self._move(entry, {"state": "REMOVED", "removedAt": at, "ttl": None}, also)

    def _move(self, entry: WaitlistEntry, update: dict[str, object], also: list[TransactItem]) -> None:
        key = (entry.raceId, entry.eventId, entry.entryId)
        with self.lock:
            current = self.items.get(key)
            if current is None or current.state != entry.state:
                raise ConditionFailed([0])
            checks = [item["Fake"] for item in also]  # the audit's items (tests/fakes/catalog.FakeAudit)
            if not all(check() for check, _ in checks):
                raise ConditionFailed([1 + i for i, (check, _) in enumerate(checks) if not check()])
            self.items[key] = current.model_copy(update=update)
            if entry.state == "WAITING":
                line = self.lines[(entry.raceId, entry.eventId)]
                self.lines[(entry.raceId, entry.eventId)] = replace(line, waiting=line.waiting - 1)
            for _, apply in checks:
                apply()

    def set_head(self, race_id: str, event_id: str, head: int) -> None:
        """What the offers (issue 40's next slice) will do: move how far the line has got."""
        with self.lock:
            self.lines[(race_id, event_id)] = replace(self.lines[(race_id, event_id)], head=head)
