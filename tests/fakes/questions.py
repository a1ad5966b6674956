"""In-memory ``QuestionStore`` (``racecap.questions.store``): the same items and conditions
as the DynamoDB adapter, run by the shared ``FakeTables`` transaction runner;
``tests/contract/test_question_store.py`` runs the same cases against both."""

from __future__ import annotations

import copy
import json
from typing import Any

from racecap.aws.transactions import TransactItem

from tests.fakes.stores import FakeTables, fake_item


class FakeQuestions:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.current: dict[tuple[str, str], int] = {}
        self.versions: dict[tuple[str, str, int], str] = {}  # kept as JSON, as the adapter keeps it

    def current_version(self, race_id: str, event_id: str) -> int:
        with self.tables.lock:
            return self.current.get((race_id, event_id), 0)

    def get(self, race_id: str, event_id: str, version: int) -> dict[str, Any] | None:
        with self.tables.lock:
            doc = self.versions.get((race_id, event_id, version))
        return None if doc is None else json.loads(doc)

    def save_items(self, race_id: str, event_id: str, version: int, doc: dict[str, Any]) -> list[TransactItem]:
        key, saved = (race_id, event_id), json.dumps(copy.deepcopy(doc))
        return [
            fake_item(
                lambda: (race_id, event_id, version) not in self.versions,
                lambda: self.versions.__setitem__((race_id, event_id, version), saved),
            ),
            fake_item(lambda: self.current.get(key, 0) == version - 1, lambda: self.current.__setitem__(key, version)),
        ]
