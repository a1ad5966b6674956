"""Places: the sharded cap counter of each event, in the Inventory table.

One DynamoDB item takes ~1,000 writes/s, so an event's cap is split across ``shards``
items, ``CAP#<raceId>#<eventId> / SHARD#<nn>``, each with its own ``cap`` and ``taken``.
A hold claims one place with ``taken < cap`` as the condition on one shard: the sum of
shard caps is the event cap, so no interleaving of claims can sell a place twice.
"""

from __future__ import annotations

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
