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
from racecap.models import Actor, Director


class AuditEntries(Protocol):
    """What a change writes to the trail: an entry in the change's own transaction (``AuditTrail``;
    ``tests/fakes`` has one of its own)."""

    def item(self, actor: Director | Actor, race_id: str, action: str, target: str, **details: Any) -> TransactItem: ...


class AuditTrail:
    def __init__(self, audit: AuditStore) -> None:
        self._audit = audit

    def item(self, actor: Director | Actor, race_id: str, action: str, target: str, **details: Any) -> TransactItem:
        """The entry for a change, as an item of the change's own transaction. The actor is
        typed (a director without an address, a runner by registration id); details never
        keep a person's name or address (``without_personal_data``)."""
        entry = AuditEntry(
            raceId=race_id,
            entryId=secrets.token_hex(6),
            at=datetime.now(UTC),
            actor=Actor.of(actor),
            action=action,
            target=target,
            details=without_personal_data(_jsonable(details)),
        )
        return self._audit.put_item(entry)

    def scrub_personal_data(self) -> int:
        return self._audit.scrub_personal_data()

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


# What the trail never keeps about a person: it outlives the retention period that deletes
# runners' data, and a director's export of it would carry the addresses with it.
PERSONAL_KEYS = frozenset({"email", "firstName", "lastName", "dateOfBirth", "phone"})
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def without_personal_data(details: Any) -> Any:
    """Details without names, addresses or dates of birth: a key that names one is dropped, and
    any text shaped like an email address is blanked wherever it appears."""
    if isinstance(details, dict):
        return {k: without_personal_data(v) for k, v in details.items() if k not in PERSONAL_KEYS}
    if isinstance(details, list):
        return [without_personal_data(v) for v in details]
    if isinstance(details, str):
        return EMAIL.sub("[address removed]", details)
    return details


def _jsonable(value: Any) -> Any:
    """Details as DynamoDB and JSON both take them: datetimes as ISO strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
