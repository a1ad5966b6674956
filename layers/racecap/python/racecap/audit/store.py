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

    def scrub_personal_data(self) -> int:
        """Once: remove the addresses and names entries written before the trail kept none
        (a director's email in the actor, a runner's in a cancellation's details). Returns how
        many entries were changed (0 once done: a mark remembers it)."""
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

    # The one-off scrub: a mark item remembers it ran, so the purge's hourly runs cost one read.
    _SCRUBBED = {"pk": "SCRUB", "sk": "personal-data-v1"}
    # (map, key) of what entries written before the trail kept no address may hold. Every entry
    # has both maps (``actor`` and ``details``, empty or not), so removing a key is always valid.
    _PERSONAL = (("details", "email"), ("details", "firstName"), ("details", "lastName"),
                 ("details", "dateOfBirth"), ("actor", "email"))  # fmt: skip

    def scrub_personal_data(self) -> int:
        if "Item" in self._db.get_item(TableName=self._table, Key=values(self._SCRUBBED), ConsistentRead=True):
            return 0
        names = {f"#{part}": part for pair in self._PERSONAL for part in pair}
        paths = [f"#{top}.#{leaf}" for top, leaf in self._PERSONAL]
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": " OR ".join(f"attribute_exists({p})" for p in paths),
            "ExpressionAttributeNames": names,
            "ProjectionExpression": "pk, sk",
        }
        changed = 0
        while True:
            page = self._db.scan(**kwargs)
            for item in page.get("Items", []):
                self._db.update_item(
                    TableName=self._table,
                    Key={"pk": item["pk"], "sk": item["sk"]},
                    UpdateExpression="REMOVE " + ", ".join(paths),
                    ExpressionAttributeNames=names,
                )
                changed += 1
            if not page.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self._db.put_item(TableName=self._table, Item=values(self._SCRUBBED))
        return changed
