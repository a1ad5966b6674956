"""Pure rules for an event's cap and its shards: how a cap splits and how a change moves it."""

from __future__ import annotations

import math

from racecap.places.models import Shard, ShardChange

# One DynamoDB item sustains ~1,000 writes/s. A hold is one write to one shard, so an
# event with S shards takes ~S x 1,000 holds/s; 8 shards clears RunSignUp's peak 1,500
# registrations/s with five-fold headroom. Small caps get fewer shards (>= 1 place each)
# so the last places of a small event aren't scattered across mostly-full shards.
MAX_SHARDS = 8


PLACES_PER_SHARD_MIN = 25


def shards_for(cap: int) -> int:
    return max(1, min(MAX_SHARDS, math.ceil(cap / PLACES_PER_SHARD_MIN)))


class CapBelowPlacesTaken(Exception):
    def __init__(self, taken: int) -> None:
        super().__init__(f"{taken} places are taken")
        self.taken = taken


def shard_name(n: int) -> str:
    """The sort key of shard ``n`` (the data layer's ``SHARD#nnn``; kept equal by a unit test)."""
    return f"SHARD#{n:03d}"


def split_cap(cap: int, shards: int) -> list[int]:
    """Spread ``cap`` over ``shards`` as evenly as possible (first shards get the rest)."""
    base, rest = divmod(cap, shards)
    return [base + (1 if i < rest else 0) for i in range(shards)]


def plan_cap_change(shards: list[Shard], new_cap: int, min_shards: int) -> list[ShardChange]:
    """How each shard's cap moves so the shards sum to ``new_cap``.

    Raising spreads the new places over every shard, adding shards up to ``min_shards``
    (a bigger event takes more holds per second). Lowering takes places from the shards
    with the most room first and never below a shard's ``taken``: a place already held
    or sold is never taken back.
    """
    current = sorted(shards, key=lambda s: s.sk)
    cap = sum(s.cap for s in current)
    taken = sum(s.taken for s in current)
    if new_cap < taken:
        raise CapBelowPlacesTaken(taken)
    changes: list[ShardChange] = []
    if new_cap >= cap:
        count = max(len(current), min_shards)
        extra = split_cap(new_cap - cap, count)
        for n in range(count):
            old = current[n].cap if n < len(current) else None
            if old is None or extra[n]:
                changes.append(ShardChange(shard_name(n), old, (old or 0) + extra[n]))
        return changes
    cut = cap - new_cap
    for shard in sorted(current, key=lambda s: s.taken - s.cap):  # most room first
        take = min(shard.cap - shard.taken, cut)
        if take > 0:
            changes.append(ShardChange(shard.sk, shard.cap, shard.cap - take))
            cut -= take
    return changes


def plan_team(rooms: dict[str, int], places: int) -> dict[str, int]:
    """How a team's ``places`` spread over the shards with room (shard -> room, in total at
    least ``places``): the roomiest first, so a team touches as few shards — transaction
    items — as it can. Shard -> places taken there."""
    takes: dict[str, int] = {}
    for sk, room in sorted(rooms.items(), key=lambda kv: (-kv[1], kv[0])):
        if places <= 0:
            break
        take = min(room, places)
        takes[sk] = take
        places -= take
    if places > 0:
        raise ValueError("not enough room for the team")
    return takes


def pool_split(changes: list[ShardChange], places: int) -> dict[str, int]:
    """Of a raised cap's new places, ``places`` kept for the waitlist's line: counted taken on the
    shards that grew (at most their growth each), so each pooled place has a shard counting it."""
    split: dict[str, int] = {}
    for c in changes:
        k = min(c.new_cap - (c.old_cap or 0), places)
        if k > 0:
            split[c.sk] = k
            places -= k
    return split
