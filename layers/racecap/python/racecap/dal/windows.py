"""Which workflow execution currently runs a race's registration window.

One item per race in the Races table, ``RACE#<raceId> / WINDOW``: the execution's name,
what it was started for, and a sequence number that every change moves on (conditional
on the number read, so two directors' clicks cannot both win). A window task only
changes the race while its execution is still the current one (``guard_item``): an
execution that was replaced but not yet stopped can never undo a director's action.
"""

from __future__ import annotations

from typing import Any

from racecap.dal.dynamo import from_item, to_item, values
from racecap.dal.keys import WINDOW_SK, race_pk, window_key
from racecap.dal.transactions import TransactItem
from racecap.domain import WindowRecord


class DynamoWindows:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, race_id: str) -> WindowRecord | None:
        resp = self._db.get_item(TableName=self._table, Key=window_key(race_id), ConsistentRead=True)
        return WindowRecord.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def replace_item(self, race_id: str, seq: int, window: WindowRecord) -> TransactItem:
        """Make ``window`` current, provided nobody moved the sequence past ``seq`` meanwhile."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {**window.model_dump(exclude_none=True), "pk": race_pk(race_id), "sk": WINDOW_SK, "seq": seq + 1}
                ),
                "ConditionExpression": "attribute_not_exists(pk) OR seq = :seq",
                "ExpressionAttributeValues": values({":seq": seq}),
            }
        }

    def guard_item(self, race_id: str, execution: str) -> TransactItem:
        """Holds only while ``execution`` is the race's current window execution."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": window_key(race_id),
                "ConditionExpression": "execution = :e",
                "ExpressionAttributeValues": values({":e": execution}),
            }
        }
