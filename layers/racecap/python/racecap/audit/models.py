"""The audit trail's API shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from racecap.models import Director, Model


class AuditEntry(Model):
    raceId: str
    entryId: str
    at: datetime
    actor: Director
    action: str = Field(description="e.g. race.create, race.update, event.update, window.open, registration.cancel")
    target: str
    details: dict[str, Any] = Field(default_factory=dict)


class AuditPage(Model):
    entries: list[AuditEntry]
    nextCursor: str | None
