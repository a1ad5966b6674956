"""The hold snapshots (``holds.snapshots``) in memory: what Redis would keep, and can lose."""

from __future__ import annotations

from racecap.holds.models import Hold


class FakeHoldHints:
    def __init__(self) -> None:
        self.kept: dict[str, dict[str, object]] = {}

    def keep(self, hold: Hold) -> None:
        self.kept[hold.holdId] = hold.model_dump(mode="json")  # as it round-trips through Redis

    def get(self, hold_id: str) -> Hold | None:
        raw = self.kept.get(hold_id)
        return Hold.model_validate(raw) if raw else None

    def forget(self, hold_id: str) -> None:
        self.kept.pop(hold_id, None)
