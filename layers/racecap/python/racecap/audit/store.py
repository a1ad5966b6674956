"""The audit trail of directors' changes, in the Audit table.

Layout: ``RACE#<raceId> / <at>#<entryId>`` — one partition per race, oldest first. The
entry is written in the same transaction as the change it records (``put_item``), so a
change without its entry, or an entry without a change, cannot exist.
"""

from __future__ import annotations

from typing import Any, Protocol

from racecap.audit.models import AuditEntry
from racecap.aws.items import from_item, to_item, values
from racecap.aws.keys import audit_sk, race_pk
from racecap.aws.transactions import TransactItem


class AuditStore(Protocol):
    def put_item(self, entry: AuditEntry) -> TransactItem: ...

    def page(self, race_id: str, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """Newest first, older than ``before``; the cursor of the next page, or None."""
        ...


def entry_sk(entry: AuditEntry) -> str:
    return audit_sk(entry.at.isoformat(), entry.entryId)


class DynamoAudit:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def put_item(self, entry: AuditEntry) -> TransactItem:
        doc = entry.model_dump(mode="json")
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item({**doc, "pk": race_pk(entry.raceId), "sk": entry_sk(entry)}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def page(self, race_id: str, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        """Newest first; ``before`` is the cursor of the previous page (an entry's sort key)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk" + (" AND sk < :before" if before else ""),
            "ExpressionAttributeValues": values({":pk": race_pk(race_id)} | ({":before": before} if before else {})),
            "ScanIndexForward": False,
            "Limit": limit,
        }
        resp = self._db.query(**kwargs)
        entries = [AuditEntry.model_validate(from_item(i)) for i in resp.get("Items", [])]
        more = bool(resp.get("LastEvaluatedKey")) and len(entries) == limit
        return entries, (entry_sk(entries[-1]) if more and entries else None)
