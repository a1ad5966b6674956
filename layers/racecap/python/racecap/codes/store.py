"""Where codes live: the terms with the race (Races ``RACE#<raceId> / CODE#<CODE>``), the use
counter's shards with the caps' (Inventory ``CODE#<raceId>#<CODE> / SHARD#<nnn>``, each with
``cap`` and ``taken``). A use is taken by a conditional write on one shard (``taken < cap``)
in the transaction that puts the code on the hold (``holds.store.DynamoHolds.change_code``), so
no interleaving of runners can use a code more often than its shards' caps add up to.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from racecap.aws.items import (
    from_item,
    get_all,
    query_all,
    to_item,
    values,
)
from racecap.aws.keys import code_pk, code_shard_key, key
from racecap.aws.transactions import ConditionFailed, TransactItem, transact
from racecap.codes.models import CodeTerms
from racecap.models import _Record

# One code and its shards in one transaction: within DynamoDB's 100 items per transaction
# with the audit entry (1 + 8 shards + 1); a batch goes in chunks of this many codes.
CODES_PER_TRANSACTION = 45


class StoredCode(_Record):
    raceId: str
    code: str
    terms: CodeTerms
    maxUses: int | None
    shards: list[int]  # each shard's cap, in order (SHARD#000, ...)
    createdAt: datetime
    # A personal code (a deferral's credit, ledger.deferral): only this address may register with it.
    forEmail: str | None = None

    def shard_names(self) -> list[str]:
        return [f"SHARD#{n:03d}" for n in range(len(self.shards))]


class CodeExists(Exception):
    def __init__(self, codes: list[str]) -> None:
        super().__init__(f"codes exist: {codes}")
        self.codes = codes


class CodeStore(Protocol):
    def create(self, codes: list[StoredCode], audit: TransactItem) -> None: ...
    def get(self, race_id: str, code: str) -> StoredCode | None: ...
    def of_race(self, race_id: str) -> list[StoredCode]: ...
    def uses(self, codes: list[StoredCode]) -> dict[str, int]: ...


def _sk(code: str) -> str:
    return f"CODE#{code}"


class DynamoCodes:
    def __init__(self, client: Any, races_table: str, inventory_table: str) -> None:
        self._db = client
        self._races = races_table
        self._inventory = inventory_table

    def create(self, codes: list[StoredCode], audit: TransactItem) -> None:
        """Each code with its shards, none replacing an existing code: ``CodeExists`` names
        the ones taken. The audit entry rides on the first chunk."""
        for start in range(0, len(codes), CODES_PER_TRANSACTION):
            chunk = codes[start : start + CODES_PER_TRANSACTION]
            items: list[TransactItem] = []
            owners: list[str] = []  # the code each item belongs to, for a failed condition
            for c in chunk:
                made = self.create_items(c)
                items += made
                owners += [c.code] * len(made)
            if start == 0:
                items.append(audit)
            try:
                transact(self._db, items)
            except ConditionFailed as exc:
                raise CodeExists(sorted({owners[i] for i in exc.indexes if i < len(owners)})) from exc

    def create_items(self, c: StoredCode) -> list[TransactItem]:
        """One new code and its use counter's shards, for a transaction of the caller's (a
        deferral makes its code in the cancellation's own write)."""
        shards: list[TransactItem] = [
            {
                "Put": {
                    "TableName": self._inventory,
                    "Item": to_item({"pk": code_pk(c.raceId, c.code), "sk": name, "cap": cap, "taken": 0}),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
            for name, cap in zip(c.shard_names(), c.shards, strict=True)
        ]
        return [self._put_terms(c), *shards]

    def _put_terms(self, c: StoredCode) -> TransactItem:
        item = {
            "pk": f"RACE#{c.raceId}",
            "sk": _sk(c.code),
            "raceId": c.raceId,
            "code": c.code,
            "terms": c.terms.model_dump(mode="json", exclude_none=True),
            "maxUses": c.maxUses,
            "shards": c.shards,
            "createdAt": c.createdAt.isoformat(),
            "forEmail": c.forEmail,
        }
        return {
            "Put": {
                "TableName": self._races,
                "Item": to_item({k: v for k, v in item.items() if v is not None}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def get(self, race_id: str, code: str) -> StoredCode | None:
        resp = self._db.get_item(TableName=self._races, Key=key(f"RACE#{race_id}", _sk(code)))
        return _stored(from_item(resp["Item"])) if "Item" in resp else None

    def of_race(self, race_id: str) -> list[StoredCode]:
        items = query_all(
            self._db,
            TableName=self._races,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :c)",
            ExpressionAttributeValues=values({":pk": f"RACE#{race_id}", ":c": "CODE#"}),
        )
        return [_stored(i) for i in items]

    def uses(self, codes: list[StoredCode]) -> dict[str, int]:
        """Uses taken per code: every shard read at once (100 per BatchGetItem)."""
        keys = [code_shard_key(c.raceId, c.code, name) for c in codes for name in c.shard_names()]
        taken: dict[str, int] = {c.code: 0 for c in codes}
        for item in get_all(self._db, self._inventory, keys):
            code = str(item["pk"]).split("#", 2)[2]
            taken[code] = taken.get(code, 0) + int(item["taken"])
        return taken


def _stored(item: dict[str, Any]) -> StoredCode:
    return StoredCode(
        raceId=str(item["raceId"]),
        code=str(item["code"]),
        terms=CodeTerms.model_validate(item["terms"]),
        maxUses=int(item["maxUses"]) if item.get("maxUses") is not None else None,
        shards=[int(n) for n in item["shards"]],
        createdAt=datetime.fromisoformat(str(item["createdAt"])),
        forEmail=str(item["forEmail"]) if item.get("forEmail") else None,
    )


__all__ = ["CodeExists", "CodeStore", "DynamoCodes", "StoredCode", "code_pk"]
