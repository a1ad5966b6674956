"""Which provider events have been applied (Inventory ``WEBHOOK#<eventId>``).

The effects of an event are state transitions guarded by conditions, so applying one twice
changes nothing; the log only spares the work (and the provider calls) of a repeat. It is
written after the effect is durable, so a crash in between means one harmless re-apply.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from racecap.aws.items import to_item
from racecap.aws.keys import key

KEEP = timedelta(days=30)  # longer than the provider retries a delivery (three days)


def event_key(event_id: str) -> dict[str, Any]:
    return key(f"WEBHOOK#{event_id}", "EVENT")


class DynamoWebhookLog:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def seen(self, event_id: str) -> bool:
        resp = self._db.get_item(TableName=self._table, Key=event_key(event_id), ConsistentRead=True)
        return "Item" in resp

    def mark(self) -> int | None:
        """Up to which event creation time (unix s) reconciliation has applied the provider's payments."""
        resp = self._db.get_item(TableName=self._table, Key=key("RECONCILE", "MARK"), ConsistentRead=True)
        return int(resp["Item"]["created"]["N"]) if "Item" in resp else None

    def set_mark(self, created: int) -> None:
        self._db.put_item(TableName=self._table, Item=to_item({"pk": "RECONCILE", "sk": "MARK", "created": created}))

    def remember(self, event_id: str, event_type: str) -> None:
        now = datetime.now(UTC)
        item = {
            "pk": f"WEBHOOK#{event_id}",
            "sk": "EVENT",
            "type": event_type,
            "appliedAt": now.isoformat(),
            "ttl": int((now + KEEP).timestamp()),
        }
        self._db.put_item(TableName=self._table, Item=to_item(item))


class EventLog(Protocol):
    def seen(self, event_id: str) -> bool: ...

    def remember(self, event_id: str, event_type: str) -> None: ...

    def mark(self) -> int | None: ...

    def set_mark(self, created: int) -> None: ...
