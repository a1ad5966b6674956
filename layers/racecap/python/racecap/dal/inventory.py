"""Places: the sharded cap counter of each event, in the Inventory table.

One DynamoDB item takes ~1,000 writes/s, so an event's cap is split across ``shards``
items, ``CAP#<raceId>#<eventId> / SHARD#<nn>``, each with its own ``cap`` and ``taken``.
A hold claims one place with ``taken < cap`` as the condition on one shard: the sum of
shard caps is the event cap, so no interleaving of claims can sell a place twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from racecap.dal.dynamo import query_all, to_item, values


def cap_pk(race_id: str, event_id: str) -> str:
    return f"CAP#{race_id}#{event_id}"


def shard_sk(n: int) -> str:
    return f"SHARD#{n:03d}"


def split_cap(cap: int, shards: int) -> list[int]:
    """Spread ``cap`` over ``shards`` as evenly as possible (first shards get the rest)."""
    base, rest = divmod(cap, shards)
    return [base + (1 if i < rest else 0) for i in range(shards)]


class Usage(Protocol):
    cap: int
    taken: int


class ShardUsage:
    __slots__ = ("cap", "shards", "taken")

    def __init__(self, cap: int, taken: int, shards: list[dict[str, Any]]) -> None:
        self.cap = cap
        self.taken = taken
        self.shards = shards

    @property
    def left(self) -> int:
        return max(0, self.cap - self.taken)


class DynamoInventory:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    @property
    def table(self) -> str:
        return self._table

    def create_event_shards(self, race_id: str, event_id: str, cap: int, shards: int) -> None:
        for n, shard_cap in enumerate(split_cap(cap, shards)):
            self._db.put_item(
                TableName=self._table,
                Item=to_item({"pk": cap_pk(race_id, event_id), "sk": shard_sk(n), "cap": shard_cap, "taken": 0}),
                ConditionExpression="attribute_not_exists(pk)",
            )

    def usage(self, race_id: str, event_id: str, *, consistent: bool = False) -> ShardUsage:
        shards = list(
            query_all(
                self._db,
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :s)",
                ExpressionAttributeValues=values({":pk": cap_pk(race_id, event_id), ":s": "SHARD#"}),
                ConsistentRead=consistent,
            )
        )
        return ShardUsage(
            cap=sum(int(s["cap"]) for s in shards),
            taken=sum(int(s["taken"]) for s in shards),
            shards=shards,
        )


# -- changing a cap (directors) -------------------------------------------------------
class CapBelowPlacesTaken(Exception):
    def __init__(self, taken: int) -> None:
        super().__init__(f"{taken} places are taken")
        self.taken = taken


@dataclass(frozen=True)
class ShardChange:
    sk: str
    old_cap: int | None  # None: a new shard
    new_cap: int


def plan_cap_change(shards: list[dict[str, Any]], new_cap: int, min_shards: int) -> list[ShardChange]:
    """How each shard's cap moves so the shards sum to ``new_cap``.

    Raising spreads the new places over every shard, adding shards up to ``min_shards``
    (a bigger event takes more holds per second). Lowering takes places from the shards
    with the most room first and never below a shard's ``taken``: a place already held
    or sold is never taken back.
    """
    current = sorted(shards, key=lambda s: str(s["sk"]))
    cap = sum(int(s["cap"]) for s in current)
    taken = sum(int(s["taken"]) for s in current)
    if new_cap < taken:
        raise CapBelowPlacesTaken(taken)
    changes: list[ShardChange] = []
    if new_cap >= cap:
        count = max(len(current), min_shards)
        extra = split_cap(new_cap - cap, count)
        for n in range(count):
            old = int(current[n]["cap"]) if n < len(current) else None
            if old is None or extra[n]:
                changes.append(ShardChange(shard_sk(n), old, (old or 0) + extra[n]))
        return changes
    cut = cap - new_cap
    for shard in sorted(current, key=lambda s: int(s["taken"]) - int(s["cap"])):  # most room first
        room = int(shard["cap"]) - int(shard["taken"])
        take = min(room, cut)
        if take > 0:
            changes.append(ShardChange(str(shard["sk"]), int(shard["cap"]), int(shard["cap"]) - take))
            cut -= take
    return changes


def cap_change_items(table: str, race_id: str, event_id: str, changes: list[ShardChange]) -> list[dict[str, Any]]:
    """Each shard changes only if its cap is still the one planned from and its places
    taken still fit: a hold landing meanwhile fails the whole change, which is re-planned."""
    items: list[dict[str, Any]] = []
    for c in changes:
        key = {"pk": cap_pk(race_id, event_id), "sk": c.sk}
        if c.old_cap is None:
            items.append(
                {
                    "Put": {
                        "TableName": table,
                        "Item": to_item({**key, "cap": c.new_cap, "taken": 0}),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
            continue
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": to_item(key),
                    "UpdateExpression": "SET cap = :new",
                    "ConditionExpression": "cap = :old AND taken <= :new",
                    "ExpressionAttributeValues": values({":old": c.old_cap, ":new": c.new_cap}),
                }
            }
        )
    return items
