"""The audit trail's API shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field, field_validator

from racecap.models import Actor, Director, Model, director_kind


class AuditEntry(Model):
    raceId: str
    entryId: str
    at: datetime
    actor: Actor
    action: str = Field(description="e.g. race.create, race.update, event.update, window.open, registration.cancel")
    target: str
    details: dict[str, Any] = Field(default_factory=dict)

    @field_validator("actor", mode="before")
    @classmethod
    def _typed(cls, v: Any) -> Any:
        """An entry written before the actor was typed named everyone as a director (its id,
        username and email): read as the kind it was, without the address."""
        if isinstance(v, Director):
            return Actor.of(v)
        if isinstance(v, dict) and "kind" not in v and "sub" in v:
            return {"kind": director_kind(str(v["sub"])), "id": v["sub"], "name": v.get("username", "")}
        return v


class AuditPage(Model):
    entries: list[AuditEntry]
    nextCursor: str | None
