"""Where question sets live: the Races table, one partition per event.

  QUESTIONS#<raceId>#<eventId>  / CURRENT    the version runners are asked now
  QUESTIONS#<raceId>#<eventId>  / V#<nnnnnn> one saved version, never changed after

A save writes the next version and moves the pointer in one transaction, on the condition
that the pointer is still at the version the save was built on: two directors saving at
once cannot both become version n, and a reader following the pointer always finds the
version it names. The set is kept as one JSON string (numbers as JSON has them, no
DynamoDB number conversions on the way back).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from racecap.aws.items import from_item, to_item, values
from racecap.aws.transactions import TransactItem

CURRENT = "CURRENT"


def questions_pk(race_id: str, event_id: str) -> str:
    return f"QUESTIONS#{race_id}#{event_id}"


def version_sk(version: int) -> str:
    return f"V#{version:06d}"


class QuestionStore(Protocol):
    """The port: ``DynamoQuestions`` here, ``tests/fakes/questions.FakeQuestions`` in unit tests."""

    def current_version(self, race_id: str, event_id: str) -> int:
        """The version runners are asked now; 0 when the event has never had questions."""
        ...

    def get(self, race_id: str, event_id: str, version: int) -> dict[str, Any] | None:
        """One saved version's document, as saved; None when there is no such version."""
        ...

    def save_items(self, race_id: str, event_id: str, version: int, doc: dict[str, Any]) -> list[TransactItem]:
        """The transaction items that save ``doc`` as ``version`` and point at it, if the
        pointer is still at ``version - 1`` (item 1's condition; item 0's: not saved yet)."""
        ...


class DynamoQuestions:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def current_version(self, race_id: str, event_id: str) -> int:
        resp = self._db.get_item(
            TableName=self._table,
            Key=to_item({"pk": questions_pk(race_id, event_id), "sk": CURRENT}),
            ProjectionExpression="version",
            ConsistentRead=True,
        )
        item = resp.get("Item")
        return int(from_item(item)["version"]) if item else 0

    def get(self, race_id: str, event_id: str, version: int) -> dict[str, Any] | None:
        resp = self._db.get_item(
            TableName=self._table,
            Key=to_item({"pk": questions_pk(race_id, event_id), "sk": version_sk(version)}),
            ConsistentRead=True,
        )
        item = resp.get("Item")
        return json.loads(from_item(item)["doc"]) if item else None  # type: ignore[no-any-return]

    def save_items(self, race_id: str, event_id: str, version: int, doc: dict[str, Any]) -> list[TransactItem]:
        pk = questions_pk(race_id, event_id)
        pointer_condition = "attribute_not_exists(version)" if version == 1 else "version = :prev"
        pointer_values = {":v": version} | ({":prev": version - 1} if version > 1 else {})
        return [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item({"pk": pk, "sk": version_sk(version), "version": version, "doc": json.dumps(doc)}),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self._table,
                    "Key": to_item({"pk": pk, "sk": CURRENT}),
                    "UpdateExpression": "SET version = :v",
                    "ConditionExpression": pointer_condition,
                    "ExpressionAttributeValues": values(pointer_values),
                }
            },
        ]
