"""The records of a cap's shards: a shard, its usage and a planned change."""

from __future__ import annotations

from dataclasses import dataclass

from racecap.models import _Record


class Shard(_Record):
    """One cap shard of an event: ``taken`` of its ``cap`` places are held, paid or sold."""

    sk: str
    cap: int
    taken: int


@dataclass(frozen=True)
class ShardUsage:
    """An event's places as its cap shards count them: ``taken`` of ``cap``."""

    cap: int
    taken: int
    shards: list[Shard]

    @property
    def left(self) -> int:
        return max(0, self.cap - self.taken)


@dataclass(frozen=True)
class ShardChange:
    """One step of a cap change: a shard's cap moves from ``old_cap`` (None: a new shard)."""

    sk: str
    old_cap: int | None
    new_cap: int
