"""Each discount code's uses, kept in Redis as the uses happen (issue 42), so the director's
stats cost one read whatever the number of codes (a sponsor batch of 2,000 codes was 21
BatchGetItems of their shards per stats compute).

The truth stays the counter's shards in DynamoDB (``codes.store``: a use is a conditional
write there, so a limit holds whatever this says). This is a copy for reading:

* one hash per race, ``codeuses:<race>``: ``u:<CODE>`` uses, ``l:<CODE>`` the limit ("" none),
  and ``#built`` when it was built from the shards;
* built from the shards on a read that finds none (``seed``: only if no other reader built it
  first), and kept for ``KEEP_S``: then the next read builds it again, which bounds any drift;
* moved by every transaction that takes or gives back a use, after it committed (``moved``:
  HINCRBY only while the hash exists, so a move never makes a hash that lacks the other codes);
* dropped when codes are created (``forget``): the next read builds it with them.

What can make it differ from the shards until its next build, each rare: a move lost because
Redis failed or the environment died between the commit and the HINCRBY; a move committed after
a build read the shards but sent before the build's write (it finds no hash and is skipped).
Where Redis cannot answer, the reader reads the shards (``codes.service.code_uses``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

    from racecap.cache import SharedTier

KEY_PREFIX = "codeuses:"
KEEP_S = 600  # a build is trusted this long, then read from the shards again
BUILT = "#built"
NO_LIMIT = ""

# A move lands only on a hash that exists: one that expired or was dropped is built whole
# from the shards by the next reader, and a move must not leave a partial one behind.
_MOVE = """
if redis.call('exists', KEYS[1]) == 1 then
  for i = 1, #ARGV, 2 do redis.call('hincrby', KEYS[1], ARGV[i], tonumber(ARGV[i + 1])) end
  return 1
end
return 0
"""

# Two readers building at once: the first write wins, the other's (as good) is dropped.
_SEED = """
if redis.call('exists', KEYS[1]) == 1 then return 0 end
redis.call('hset', KEYS[1], unpack(ARGV, 2))
redis.call('expire', KEYS[1], tonumber(ARGV[1]))
return 1
"""

Move = tuple[str, str, int]  # (race, code, +1 taken / -1 given back)


def key(race_id: str) -> str:
    return f"{KEY_PREFIX}{race_id}"


class CodeTally:
    def __init__(self, shared: SharedTier) -> None:
        self._shared = shared

    def moved(self, moves: Iterable[Move]) -> None:
        """Uses taken (+1) or given back (-1) by a transaction that committed."""
        by_race: dict[str, dict[str, int]] = {}
        for race_id, code, delta in moves:
            per = by_race.setdefault(race_id, {})
            per[code] = per.get(code, 0) + delta
        by_race = {r: {c: d for c, d in per.items() if d} for r, per in by_race.items()}
        if not any(by_race.values()):
            return

        def _send(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for race_id, per in by_race.items():
                if per:
                    args: list[str | int] = [x for code, d in per.items() for x in (f"u:{code}", d)]
                    pipe.eval(_MOVE, 1, key(race_id), *args)
            pipe.execute()

        self._shared.call(_send, None)

    def read(self, race_id: str) -> tuple[dict[str, int], dict[str, int | None]] | None:
        """(uses, limits) per code, or None when there is no build to trust (or no Redis)."""

        def _read(r: redis.Redis) -> dict[str, str]:
            return r.hgetall(key(race_id))  # type: ignore[return-value]  # the client decodes

        empty: dict[str, str] = {}
        raw = self._shared.call(_read, empty)
        if not raw:
            return None
        uses: dict[str, int] = {}
        limits: dict[str, int | None] = {}
        for name, value in raw.items():
            if name.startswith("u:"):
                uses[name[2:]] = int(value)
            elif name.startswith("l:"):
                limits[name[2:]] = int(value) if value != NO_LIMIT else None
        return uses, limits

    def seed(self, race_id: str, uses: dict[str, int], limits: dict[str, int | None]) -> None:
        """A build from the shards (read just before), unless another reader's came first."""
        fields: list[str | int] = [BUILT, datetime.now(UTC).isoformat()]
        for code, limit in limits.items():
            fields += [f"u:{code}", uses.get(code, 0), f"l:{code}", NO_LIMIT if limit is None else limit]

        def _seed(r: redis.Redis) -> None:
            r.eval(_SEED, 1, key(race_id), KEEP_S, *fields)

        self._shared.call(_seed, None)

    def forget(self, race_id: str) -> None:
        """Codes were created: the next read builds the hash with them."""
        self._shared.call(lambda r: r.delete(key(race_id)), None)
