"""The audit trail: who changed what, when — one entry per admin change, same transaction."""

from __future__ import annotations

import base64
import re
import secrets
from datetime import UTC, datetime
from typing import Any, Protocol

from racecap.audit.models import AuditEntry, AuditPage
from racecap.audit.store import AuditStore
from racecap.aws.transactions import TransactItem
from racecap.errors import ValidationFailed
from racecap.models import Director


class AuditEntries(Protocol):
    """What a change writes to the trail: an entry in the change's own transaction (``AuditTrail``;
    ``tests/fakes`` has one of its own)."""

    def item(self, director: Director, race_id: str, action: str, target: str, **details: Any) -> TransactItem: ...


class AuditTrail:
    def __init__(self, audit: AuditStore) -> None:
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


# Base64url of an entry's sort key. Any string of this shape decodes to *some* position,
# a valid place to go on from (entries older than it), so every cursor the document
# allows is accepted; it never leaves the director's own race.
CURSOR_PATTERN = r"^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2,3})?$"


def decode_cursor(cursor: str) -> str:
    if not cursor or not re.fullmatch(CURSOR_PATTERN, cursor):
        raise ValidationFailed("The cursor is not one this API gave out.", fields={"cursor": "Invalid."})
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8", errors="replace")


def _jsonable(value: Any) -> Any:
    """Details as DynamoDB and JSON both take them: datetimes as ISO strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
