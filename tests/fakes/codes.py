"""An in-memory ``CodeStore`` (``racecap.codes.store``): the codes' terms, and their use
counters in ``FakeTables.code_shards``, where ``FakeHolds`` takes and gives back uses."""

from __future__ import annotations

from racecap.aws.transactions import TransactItem
from racecap.codes.store import CodeExists, StoredCode

from tests.fakes.stores import FakeTables


class FakeCodes:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.codes: dict[tuple[str, str], StoredCode] = {}

    def create(self, codes: list[StoredCode], audit: TransactItem) -> None:
        with self.tables.lock:
            taken = sorted(c.code for c in codes if (c.raceId, c.code) in self.codes)
            if taken:
                raise CodeExists(taken)
            for c in codes:
                self.codes[(c.raceId, c.code)] = c
                self.tables.code_shards[(c.raceId, c.code)] = {
                    name: [cap, 0] for name, cap in zip(c.shard_names(), c.shards, strict=True)
                }

    def get(self, race_id: str, code: str) -> StoredCode | None:
        return self.codes.get((race_id, code))

    def of_race(self, race_id: str) -> list[StoredCode]:
        return [c for (r, _), c in self.codes.items() if r == race_id]

    def uses(self, codes: list[StoredCode]) -> dict[str, int]:
        return {c.code: self.tables.code_uses(c.raceId, c.code) for c in codes}
