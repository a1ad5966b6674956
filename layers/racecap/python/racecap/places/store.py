"""Places: the sharded cap counter of each event, in the Inventory table.

One DynamoDB item takes ~1,000 writes/s, so an event's cap is split across ``shards``
items, ``CAP#<raceId>#<eventId> / SHARD#<nn>``, each with its own ``cap`` and ``taken``.
A hold claims one place with ``taken < cap`` as the condition on one shard: the sum of
shard caps is the event cap, so no interleaving of claims can sell a place twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from racecap.aws.items import query_all, to_item, values
from racecap.aws.keys import cap_pk, shard_sk
from racecap.aws.transactions import TransactItem
from racecap.places.models import Shard, ShardChange, ShardUsage


class Inventory(Protocol):
    """The cap shards of each event (the Inventory table's ``CAP#`` items)."""

    def create_event_shards(self, race_id: str, event_id: str, caps: list[int]) -> None: ...

    def usage(self, race_id: str, event_id: str, *, consistent: bool = False) -> ShardUsage: ...

    def cap_change_items(
        self, race_id: str, event_id: str, changes: list[ShardChange], pooled: Mapping[str, int] | None = None
    ) -> list[TransactItem]:
        """A cap change's items: each holds only while its shard's cap and places are as planned;
        ``pooled`` (shard -> places) of a raise's new places are taken at once, for the waitlist."""
        ...


def read_shards(client: Any, table: str, race_id: str, event_id: str, *, consistent: bool) -> list[Shard]:
    """An event's cap shards as they stand (the directors' usage, a team's claim)."""
    items = query_all(
        client,
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :s)",
        ExpressionAttributeValues=values({":pk": cap_pk(race_id, event_id), ":s": "SHARD#"}),
        ConsistentRead=consistent,
    )
    return [Shard(sk=str(i["sk"]), cap=int(i["cap"]), taken=int(i["taken"])) for i in items]


class DynamoInventory:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def create_event_shards(self, race_id: str, event_id: str, caps: list[int]) -> None:
        """One shard per entry of ``caps`` (``places.rules.split_cap`` spreads a cap)."""
        for n, shard_cap in enumerate(caps):
            self._db.put_item(
                TableName=self._table,
                Item=to_item({"pk": cap_pk(race_id, event_id), "sk": shard_sk(n), "cap": shard_cap, "taken": 0}),
                ConditionExpression="attribute_not_exists(pk)",
            )

    def usage(self, race_id: str, event_id: str, *, consistent: bool = False) -> ShardUsage:
        shards = read_shards(self._db, self._table, race_id, event_id, consistent=consistent)
        return ShardUsage(cap=sum(s.cap for s in shards), taken=sum(s.taken for s in shards), shards=shards)

    # -- changing a cap (directors; the plan is places.rules's) ---------------------------
    def cap_change_items(
        self, race_id: str, event_id: str, changes: list[ShardChange], pooled: Mapping[str, int] | None = None
    ) -> list[TransactItem]:
        """Each shard changes only if its cap is still the one planned from and its places
        taken still fit: a hold landing meanwhile fails the whole change, which is re-planned.
        A raise's places kept for the waitlist (``pooled``) are taken on their shard in the same
        write: they never show as free, so no public hold can take them."""
        items: list[TransactItem] = []
        for c in changes:
            key = {"pk": cap_pk(race_id, event_id), "sk": c.sk}
            kept = (pooled or {}).get(c.sk, 0)
            if c.old_cap is None:
                items.append(
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": to_item({**key, "cap": c.new_cap, "taken": kept}),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                )
                continue
            expression = "SET cap = :new" + (", taken = taken + :kept" if kept else "")
            vals = {":old": c.old_cap, ":new": c.new_cap} | ({":kept": kept, ":most": c.new_cap - kept} if kept else {})
            items.append(
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": to_item(key),
                        "UpdateExpression": expression,
                        "ConditionExpression": "cap = :old AND taken <= " + (":most" if kept else ":new"),
                        "ExpressionAttributeValues": values(vals),
                    }
                }
            )
        return items
