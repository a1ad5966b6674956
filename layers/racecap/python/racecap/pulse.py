"""Per-second counts of an opening, as the handlers see it (issue 42): places held, sold-out
answers, registrations queued (free entries apart), confirmed, payment declines, 3-D Secure
steps, the payment provider's rate limits, our 429s and our 5xx, per race and event.

Cheap in the hot path: ``count`` adds to a dict in the execution environment (no I/O), and
``flush`` sends what was counted to Redis in one pipelined round trip, at the end of an
invocation that counted something (``RacecapResolver.resolve``, the writer's batch). Not on a
timer: Lambda freezes an environment between invocations, so a once-a-second flush would keep
the last second of a burst in a frozen environment until its next invocation (maybe never),
and the director's view would never add up. One round trip per counting invocation is what
that costs (the bench's Redis rows say how much).

In Redis, one hash per race and minute (``pulse:<race>:<minute>``, fields
``<second>|<event>|<name>``, HINCRBY), and the set ``pulse:minutes`` of the race-minutes
written, which the durable copy (``stats.pulse``, run by the sweeper every minute whether or
not anyone watches) drains into DynamoDB. A count is keyed by the second it happened in, so a
late flush still lands in its second. When Redis cannot be reached, counts stay in this
environment (up to ``MAX_PENDING`` seconds' worth) and go with the next flush; the durable copy
and the reader show a second nobody could write as a gap, never as a zero (``stats.pulse``).
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from racecap.observability import logger, metrics

if TYPE_CHECKING:
    import redis

# What is counted (a field's last part). The reader and the console know these names.
HOLDS = "holds"  # places taken by a hold (a team's places each)
SOLD_OUT = "soldOut"  # a hold refused: every place taken
QUEUED = "queued"  # paid, on the queue to the writer
FREE = "free"  # a free entry queued (no payment)
CONFIRMED = "confirmed"  # written by the writer, a bib given
DECLINED = "declined"  # the card declined (at once or by the provider's event)
THREE_DS = "threeDS"  # the bank asked for 3-D Secure
PROVIDER_BUSY = "providerBusy"  # the payment provider's rate limit (our budget of it) said wait
THROTTLED = "throttled"  # our own 429s
FAILED = "failed"  # our own 5xx
NAMES = (HOLDS, SOLD_OUT, QUEUED, FREE, CONFIRMED, DECLINED, THREE_DS, PROVIDER_BUSY, THROTTLED, FAILED)

# A 429 or 5xx on a route that names no race (``/api/holds/{holdId}/…``): counted for the
# platform, not for a race (reading the hold to find its race would cost the request a read).
NO_RACE = "-"
NO_EVENT = "-"

KEY_PREFIX = "pulse:"
MINUTES_SET = "pulse:minutes"  # "<race>:<minute>" members written and not yet copied
# Redis keeps a race's hashes for two days: the durable copy reads them within a minute or two,
# and the live view's reads of the last hour never reach DynamoDB while Redis is up.
KEEP_S = 2 * 24 * 3600
MAX_PENDING = 600  # seconds' worth of counts an environment keeps while Redis is down
# After a failed flush, Redis is not tried again for this long (the cache's breaker does the
# same): a Redis that is down must not cost every request its connect timeout.
COOLDOWN_S = 5.0

Counts = dict[tuple[int, str, str, str], int]  # (epoch second, race, event, name) -> n


def minute_key(race_id: str, minute: int) -> str:
    """The Redis hash of one race's minute (``minute`` = epoch seconds // 60)."""
    return f"{KEY_PREFIX}{race_id}:{minute}"


def minutes_member(race_id: str, minute: int) -> str:
    """A race-minute's member of ``MINUTES_SET``."""
    return f"{race_id}:{minute}"


def parse_member(raw: str) -> tuple[str, int]:
    race_id, _, minute = raw.rpartition(":")
    return race_id, int(minute)


def field(second: int, event_id: str, name: str) -> str:
    return f"{second}|{event_id}|{name}"


def parse_field(raw: str) -> tuple[int, str, str]:
    second, event_id, name = raw.split("|", 2)
    return int(second), event_id, name


class Pulse:
    """This environment's counts since its last flush."""

    def __init__(self, client: Callable[[], redis.Redis], clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._clock = clock
        self._pending: Counts = defaultdict(int)
        self._skip_until = 0.0
        # Race-minutes this environment has already given a lifetime and listed for the copy:
        # its later flushes into them are one HINCRBY each, not three commands.
        self._announced: set[tuple[str, int]] = set()

    def count(self, race_id: str, name: str, event_id: str = NO_EVENT, n: int = 1) -> None:
        if n > 0:
            self._pending[(int(self._clock()), race_id or NO_RACE, event_id or NO_EVENT, name)] += n

    @property
    def pending(self) -> Counts:
        return dict(self._pending)

    def flush(self) -> bool:
        """Send what was counted (one pipelined round trip). False when Redis did not take it:
        the counts stay for the next flush, the oldest dropped past ``MAX_PENDING`` seconds."""
        if not self._pending:
            return True
        if time.monotonic() < self._skip_until:
            self._keep({})
            return False
        batch, self._pending = self._pending, defaultdict(int)
        try:
            self._send(batch)
        except Exception as exc:  # any Redis or socket error: never fail the runner's request for it
            self._skip_until = time.monotonic() + COOLDOWN_S
            self._keep(batch)
            logger.warning("pulse counts not flushed; kept for the next flush", extra={"error": str(exc)})
            metrics.add_metric(name="PulseFlushFailed", unit="Count", value=1)
            return False
        return True

    def _send(self, batch: Counts) -> None:
        pipe = self._client().pipeline(transaction=False)
        minutes: set[tuple[str, int]] = set()
        for (second, race_id, event_id, name), n in batch.items():
            pipe.hincrby(minute_key(race_id, second // 60), field(second, event_id, name), n)
            minutes.add((race_id, second // 60))
        # A minute already announced by this environment is listed still, unless it is old enough
        # that the copy may have taken it off the list (counts kept while Redis was down).
        recent = int(self._clock()) // 60 - 1
        new = {m for m in minutes if m not in self._announced or m[1] < recent}
        for race_id, minute in new:
            pipe.expire(minute_key(race_id, minute), KEEP_S)
        if new:
            pipe.sadd(MINUTES_SET, *sorted(minutes_member(*m) for m in new))
        pipe.execute()
        self._announced = {m for m in self._announced | minutes if m[1] >= recent}

    def _keep(self, batch: Counts) -> None:
        for k, n in batch.items():
            self._pending[k] += n
        seconds = sorted({k[0] for k in self._pending})
        if len(seconds) > MAX_PENDING:
            cutoff = seconds[-MAX_PENDING]
            for k in [k for k in self._pending if k[0] < cutoff]:
                del self._pending[k]


F = TypeVar("F", bound=Callable[..., Any])


def flushed(handler: F) -> F:
    """A queue or schedule handler that counts: what it counted is flushed as it ends (the HTTP
    resolver does this for every API function)."""

    @functools.wraps(handler)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            pulse.flush()

    return run  # type: ignore[return-value]


def _redis() -> Any:
    from racecap import clients

    return clients.cache()


# The environment's one counter (handlers count through it; tests build their own Pulse).
pulse = Pulse(_redis)
