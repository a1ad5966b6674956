"""The audit trail: who changed what, when — one entry per admin change, same transaction."""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime
from typing import Any

from racecap.dal.audit import DynamoAudit
from racecap.dal.transactions import TransactItem
from racecap.errors import ValidationFailed
from racecap.models import AuditEntry, AuditPage, Director


class AuditTrail:
    def __init__(self, audit: DynamoAudit) -> None:
        self._audit = audit

    def item(self, director: Director, race_id: str, action: str, target: str, **details: Any) -> TransactItem:
        """The entry for a change, as an item of the change's own transaction."""
        entry = AuditEntry(
            raceId=race_id,
            entryId=secrets.token_hex(6),
            at=datetime.now(UTC),
            actor=director,
            action=action,
            target=target,
            details=_jsonable(details),
        )
        return self._audit.put_item(entry)

    def page(self, race_id: str, limit: int, cursor: str | None) -> AuditPage:
        before = decode_cursor(cursor) if cursor else None
        entries, last = self._audit.page(race_id, limit, before)
        return AuditPage(entries=entries, nextCursor=encode_cursor(last) if last else None)


def encode_cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValidationFailed("The cursor is not one this API gave out.", fields={"cursor": "Invalid."}) from exc


def _jsonable(value: Any) -> Any:
    """Details as DynamoDB and JSON both take them: datetimes as ISO strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
