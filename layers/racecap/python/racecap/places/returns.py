"""Freeing a place: the one helper every path that frees places builds its items with (issue 40).

A place frees up when a hold is released, expires or is abandoned (a team's hold frees several),
when a registration is cancelled (by the director, the runner, or a refund made outside Racecap),
and when a director raises a cap. Where the place goes is decided here, in the same transaction
that frees it:

* **An event without a waitlist** (``event.waitlist.enabled`` off, read from the definition the
  caller already has): the place goes back to its shard. Exactly the items it always was: no read,
  no extra write, the same write units per registration.
* **An event with a waitlist**: the LINE item is read (one consistent read). While confirmed
  runners wait beyond the places already kept for them (``waiting > pool``) and the list is not
  closed, the place goes to the line's ``pool`` instead and **stays taken on its shard**: the
  sold-out flag and the race page stay sold out, and no public hold can take it. Otherwise it
  goes back to its shard, with a ``ConditionCheck`` that the line still wants nothing: a runner
  confirming in between fails the transaction, and the caller builds it again (``line_moved``).

The pool is counted per shard too (``pool_<shard>``) so a pooled place goes back to, or becomes a
hold on, the very shard that counts it: a shard's ``taken`` never has to cover a place another
shard counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from racecap.aws.items import from_item, values
from racecap.aws.keys import WAITLIST_WORK_PARTITION, shard_key, waitlist_line_key
from racecap.aws.transactions import ConditionFailed, TransactItem, update_item

# Where freed places went: back to the public (clear the sold-out flag), or to the waitlist's pool.
Freed = Literal["public", "pool"]

POOL = "pool"
OFFERED = "offered"
CLOSED = "closed"


def pool_attr(shard: str) -> str:
    """The LINE's count of pooled places that ``shard`` still counts as taken."""
    return f"pool_{shard}"


@dataclass(frozen=True)
class LineCounts:
    """The LINE counters a freed place's destination depends on (absent: no line yet)."""

    exists: bool = False
    waiting: int = 0
    pool: int = 0
    offered: int = 0
    closed: bool = False
    pool_by_shard: dict[str, int] = field(default_factory=dict)

    @property
    def wants_places(self) -> bool:
        """Confirmed runners wait beyond the places already kept for them, and offers may still go out."""
        return self.exists and not self.closed and self.waiting > self.pool


def line_counts(item: dict[str, Any] | None) -> LineCounts:
    """The LINE item (plain values) as counts."""
    if item is None:
        return LineCounts()
    by_shard = {k.removeprefix("pool_"): int(v) for k, v in item.items() if k.startswith("pool_") and int(v)}
    return LineCounts(
        exists=True,
        waiting=int(item.get("waiting", 0)),
        pool=int(item.get(POOL, 0)),
        offered=int(item.get(OFFERED, 0)),
        closed=bool(item.get(CLOSED)),
        pool_by_shard=by_shard,
    )


@dataclass(frozen=True)
class Giveback:
    """The items that free some places, to go in the freeing transaction, and where they went."""

    items: list[TransactItem]
    freed: Freed
    guard: TransactItem | None = None  # the LINE item (pool update or check); None: no waitlist

    def line_moved(self, exc: ConditionFailed, sent: Sequence[TransactItem]) -> bool:
        """The transaction failed on the LINE item: the line changed since it was read, so the
        caller builds its items again (the place's destination may be the other one now)."""
        if self.guard is None:
            return False
        return any(sent[i] is self.guard for i in exc.indexes if i < len(sent))


class PlaceReturns(Protocol):
    def line(self, race_id: str, event_id: str) -> LineCounts:
        """The event's LINE counters, read now (consistent)."""
        ...

    def pool_item(
        self, race_id: str, event_id: str, takes: Mapping[str, int], *, must_want: bool = True
    ) -> TransactItem: ...

    def wants_nothing(self, race_id: str, event_id: str, *, closed_only: bool = False) -> TransactItem: ...

    def give_back(
        self, race_id: str, event_id: str, takes: Mapping[str, int], *, waitlist: bool, to_line: bool = False
    ) -> Giveback:
        """Free ``takes`` (shard -> places). ``waitlist``: the event has one switched on (else no
        read). ``to_line``: the places were the line's already (an offered place's hold expired),
        so they go back to the pool whenever the list is still open."""
        ...


def shard_items(table: str, race_id: str, event_id: str, takes: Mapping[str, int]) -> list[TransactItem]:
    """Places back on their shards (never below zero: a place freed twice fails the transaction)."""
    return [
        update_item(
            table,
            shard_key(race_id, event_id, shard),
            "SET taken = taken - :k",
            condition="taken >= :k",
            vals={":k": k},
        )
        for shard, k in sorted(takes.items())
        if k
    ]


class DynamoPlaceReturns:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def line(self, race_id: str, event_id: str) -> LineCounts:
        resp = self._db.get_item(TableName=self._table, Key=waitlist_line_key(race_id, event_id), ConsistentRead=True)
        return line_counts(from_item(resp["Item"]) if "Item" in resp else None)

    def give_back(
        self, race_id: str, event_id: str, takes: Mapping[str, int], *, waitlist: bool, to_line: bool = False
    ) -> Giveback:
        if not waitlist:
            return Giveback(shard_items(self._table, race_id, event_id, takes), "public")
        line = self.line(race_id, event_id)
        if (line.wants_places or (to_line and line.exists and not line.closed)) and any(takes.values()):
            pooled = self.pool_item(race_id, event_id, takes, must_want=not to_line)
            return Giveback([pooled], "pool", pooled)
        check = self.wants_nothing(race_id, event_id, closed_only=to_line)
        return Giveback([*shard_items(self._table, race_id, event_id, takes), check], "public", check)

    def pool_item(
        self, race_id: str, event_id: str, takes: Mapping[str, int], *, must_want: bool = True
    ) -> TransactItem:
        """The places join the line's pool (one write of the LINE item, however many), and the
        line joins the offer batch's to-do list. A team freeing several while fewer wait pools
        them all: the batch gives the surplus back to the shards at its next run."""
        names = {"#pool": POOL, "#closed": CLOSED}
        vals: dict[str, Any] = {":work": WAITLIST_WORK_PARTITION, ":ev": f"{race_id}#{event_id}"}
        adds = []
        for n, (shard, k) in enumerate(sorted(takes.items())):
            if k:
                names[f"#p{n}"] = pool_attr(shard)
                vals[f":k{n}"] = k
                adds.append(f"#p{n} :k{n}")
        vals[":total"] = sum(takes.values())
        condition = "attribute_exists(pk) AND attribute_not_exists(#closed)"
        if must_want:
            vals[":zero"] = 0
            names["#waiting"] = "waiting"
            condition += " AND (#waiting > #pool OR (attribute_not_exists(#pool) AND #waiting > :zero))"
        return update_item(
            self._table,
            waitlist_line_key(race_id, event_id),
            f"ADD #pool :total, {', '.join(adds)} SET gsi1pk = :work, gsi1sk = :ev",
            condition=condition,
            names=names,
            vals=vals,
        )

    def wants_nothing(self, race_id: str, event_id: str, *, closed_only: bool = False) -> TransactItem:
        """A check that the line wants no place now: none yet, closed, or every waiting runner
        has a pooled place already."""
        condition = "attribute_not_exists(pk) OR attribute_exists(#closed)"
        names = {"#closed": CLOSED}
        vals: dict[str, Any] = {}
        if not closed_only:
            condition += " OR #waiting <= #pool OR (attribute_not_exists(#pool) AND #waiting <= :zero)"
            names |= {"#waiting": "waiting", "#pool": POOL}
            vals[":zero"] = 0
        check: dict[str, Any] = {
            "TableName": self._table,
            "Key": waitlist_line_key(race_id, event_id),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if vals:
            check["ExpressionAttributeValues"] = values(vals)
        return {"ConditionCheck": check}
