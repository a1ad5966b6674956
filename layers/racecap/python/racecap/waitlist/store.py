"""The waitlist's entries and counters, in the Inventory table (keys: ``aws/keys.py``).

One partition per event: the ``LINE`` item (``seq``: join numbers given; ``head``: how far offers
have got; ``waiting``: confirmed entries in line) beside its ``ENTRY#`` items, so the director's
list is one query and a confirmation is one transaction of two items in one partition.

* **One entry per address per event** by the key itself (the entry id is a digest of race, event
  and address): joining again finds the same item, and a conditional put leaves it as it is.
* **The join number is given in the transaction that confirms**: the line's ``seq`` moves from
  the value read to the next only if nobody moved it since (else the service reads again), and
  ``waiting`` grows only while under the director's cap. Numbers therefore have no gaps and the
  length is exact: no crash can count an entry that is not in line.
"""

from __future__ import annotations

from typing import Any, Protocol

from racecap.aws.items import from_item, query_all, to_item, values
from racecap.aws.keys import (
    WAITLIST_ENTRY_PREFIX,
    waitlist_entry_key,
    waitlist_line_key,
    waitlist_pk,
)
from racecap.aws.transactions import TransactItem, transact, update_item
from racecap.waitlist.models import Line, WaitlistEntry

_NAMES = {"#state": "state", "#ttl": "ttl"}
_LINE_NAMES = {"#seq": "seq", "#head": "head", "#waiting": "waiting"}


class WaitlistStore(Protocol):
    def line(self, race_id: str, event_id: str) -> Line: ...

    def get(self, race_id: str, event_id: str, entry_id: str) -> WaitlistEntry | None: ...

    def entries(self, race_id: str, event_id: str) -> list[WaitlistEntry]: ...

    def put_pending(self, entry: WaitlistEntry, now: int) -> bool:
        """Write a new PENDING entry, over none, a LEFT one or an expired PENDING one; False
        (nothing written) if the address has a live entry already."""
        ...

    def confirm(self, entry: WaitlistEntry, seen: Line, max_length: int | None, at: str) -> None:
        """The entry joins the line as number ``seen.seq + 1``; ``ConditionFailed`` naming item 0
        (the line moved since ``seen``, or the cap is reached) or 1 (the entry is no longer PENDING)."""
        ...

    def leave(self, entry: WaitlistEntry, at: str) -> None:
        """LEFT, its personal data dropped, out of the length; ``ConditionFailed`` if its state moved."""
        ...

    def remove(self, entry: WaitlistEntry, at: str, also: list[TransactItem]) -> None:
        """REMOVED by the director, out of the length, with ``also`` (the audit entry) in the same write."""
        ...


class DynamoWaitlist:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def line(self, race_id: str, event_id: str) -> Line:
        resp = self._db.get_item(TableName=self._table, Key=waitlist_line_key(race_id, event_id), ConsistentRead=True)
        if "Item" not in resp:
            return Line()
        item = from_item(resp["Item"])
        return Line(int(item.get("seq", 0)), int(item.get("head", 0)), int(item.get("waiting", 0)), exists=True)

    def get(self, race_id: str, event_id: str, entry_id: str) -> WaitlistEntry | None:
        resp = self._db.get_item(
            TableName=self._table, Key=waitlist_entry_key(race_id, event_id, entry_id), ConsistentRead=True
        )
        return WaitlistEntry.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def entries(self, race_id: str, event_id: str) -> list[WaitlistEntry]:
        items = query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :entry)",
            ExpressionAttributeValues=values({":pk": waitlist_pk(race_id, event_id), ":entry": WAITLIST_ENTRY_PREFIX}),
            ConsistentRead=True,
        )
        return [WaitlistEntry.model_validate(i) for i in items]

    def put_pending(self, entry: WaitlistEntry, now: int) -> bool:
        key = waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId)
        try:
            self._db.put_item(
                TableName=self._table,
                Item={**key, **to_item(entry.model_dump())},
                # A live entry (pending, waiting, removed) stays as it is: one per address.
                ConditionExpression="attribute_not_exists(pk) OR #state = :left OR (#state = :pending AND #ttl < :now)",
                ExpressionAttributeNames=_NAMES,
                ExpressionAttributeValues=values({":left": "LEFT", ":pending": "PENDING", ":now": now}),
            )
            return True
        except self._db.exceptions.ConditionalCheckFailedException:
            return False

    def confirm(self, entry: WaitlistEntry, seen: Line, max_length: int | None, at: str) -> None:
        number = seen.seq + 1
        line_cond = "#seq = :seen" if seen.exists else "attribute_not_exists(pk)"
        vals: dict[str, Any] = {":next": number, ":zero": 0, ":one": 1, ":race": entry.raceId, ":event": entry.eventId}
        if seen.exists:
            vals[":seen"] = seen.seq
        if max_length is not None:
            # The cap counts confirmed entries in line, read in the write itself: two last
            # places confirmed at once cannot both pass it.
            line_cond += " AND (attribute_not_exists(#waiting) OR #waiting < :max)"
            vals[":max"] = max_length
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_line_key(entry.raceId, entry.eventId),
                    "SET #seq = :next, #waiting = if_not_exists(#waiting, :zero) + :one, "
                    "#head = if_not_exists(#head, :zero), raceId = :race, eventId = :event",
                    condition=line_cond,
                    names=_LINE_NAMES,
                    vals=vals,
                ),
                update_item(
                    self._table,
                    waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId),
                    "SET #state = :waiting, #seq = :next, confirmedAt = :at REMOVE #ttl",
                    condition="#state = :pending",
                    names={**_NAMES, "#seq": "seq"},
                    vals={":waiting": "WAITING", ":next": number, ":at": at, ":pending": "PENDING"},
                ),
            ],
        )

    def leave(self, entry: WaitlistEntry, at: str) -> None:
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId),
                    # Nothing to keep a runner's address for once they left: only the number stays.
                    "SET #state = :left, leftAt = :at, email = :empty, firstName = :empty, lastName = :empty "
                    "REMOVE #ttl",
                    condition="#state = :was",
                    names=_NAMES,
                    vals={":left": "LEFT", ":at": at, ":empty": "", ":was": entry.state},
                ),
                *self._out_of_line(entry),
            ],
        )

    def remove(self, entry: WaitlistEntry, at: str, also: list[TransactItem]) -> None:
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    waitlist_entry_key(entry.raceId, entry.eventId, entry.entryId),
                    "SET #state = :removed, removedAt = :at REMOVE #ttl",
                    condition="#state = :was",
                    names=_NAMES,
                    vals={":removed": "REMOVED", ":at": at, ":was": entry.state},
                ),
                *self._out_of_line(entry),
                *also,
            ],
        )

    def _out_of_line(self, entry: WaitlistEntry) -> list[TransactItem]:
        """A waiting entry leaving the line shortens it (the number it had is not given again)."""
        if entry.state != "WAITING":
            return []
        return [
            update_item(
                self._table,
                waitlist_line_key(entry.raceId, entry.eventId),
                "SET #waiting = #waiting - :one",
                condition="attribute_exists(pk)",
                names={"#waiting": "waiting"},
                vals={":one": 1},
            )
        ]
