"""One send rate for every instance: a slot-spacing (GCRA) limiter shared through Redis.

Why: SES enforces a *maximum send rate per account*, measured over a sliding second, and
answers anything faster with throttling. The EmailSender runs as several concurrent
Lambda instances, and a per-instance limiter cannot know what the others are doing. So
every send first reserves the next free slot in Redis:

    slot = max(now, last + interval)      interval = (1 + headroom) / rate
    last = slot
    wait = slot - now                     the caller sleeps until its slot, then sends

atomically in one Lua script, with Redis's own ``TIME`` as the clock so instances with
skewed clocks still agree. Slots are at least ``interval`` apart, so no one-second window
ever holds more than ``rate`` sends, however many instances there are. Callers reserve
only when they are about to send, so the queue of reservations is never deeper than the
number of instances and a wait is at most a few intervals.

If Redis is unreachable, a breaker sends callers to a per-process limiter running at
``rate / max_instances`` for a few seconds: with at most ``max_instances`` environments
(the function's reserved concurrency) the aggregate still stays within ``rate``.

SES counts *arrivals*, and the time from reserving a slot to the request reaching SES
varies (a starved CPU wakes late; the network jitters). Two guards keep that jitter from
packing more than ``rate`` arrivals into one second:

* ``headroom`` spaces slots ``(1 + headroom) / rate`` apart, so ``rate`` consecutive
  slots span ``1 + headroom`` seconds: that much jitter can never add a send to a window.
* A caller that wakes more than ``late_tolerance_s`` after its slot gives the slot up and
  reserves a fresh one at the back of the line, instead of sending into its successors'
  window. Lambda's fractional vCPU at small memory sizes makes late wake-ups real.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from racecap.cache import cache_errors
from racecap.observability import logger, metrics

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

# KEYS[1] = the shared "last slot" key; ARGV[1] = interval in microseconds; ARGV[2] (optional)
# = the longest wait the caller takes, in microseconds: a slot further out is not taken (the
# wait is returned, nothing is written), so a refused caller does not push everyone's next
# slot out. Returns the wait in microseconds. Times are integers of microseconds since the epoch
# (~1.7e15, exact in a Lua double); string.format keeps SET from writing "1.7e+15".
_RESERVE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local slot = math.max(now, last + interval)
if ARGV[2] and slot - now > tonumber(ARGV[2]) then
  return slot - now
end
local ttl_ms = math.ceil((slot - now + interval) / 1000) + 1
redis.call('SET', KEYS[1], string.format('%.0f', slot), 'PX', ttl_ms)
return slot - now
"""

DEFAULT_KEY = "rc:ratelimit:ses-send"
_MAX_RESERVATIONS = 3  # a caller that keeps waking late sends anyway; SES throttling is the backstop
# The EmailSender's reserved concurrency in ``blueprint`` (a unit test keeps them in step).
DEFAULT_MAX_INSTANCES = 2


class LocalSlotLimiter:
    """Slot spacing inside one process (the fallback); thread-safe."""

    def __init__(self, rate_per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_second <= 0:
            raise ValueError("rate_per_second must be positive")
        self.interval = 1.0 / rate_per_second
        self._clock = clock
        self._last = -math.inf
        self._lock = threading.Lock()

    def reserve(self, max_wait_s: float | None = None) -> float:
        """Reserve the next slot; return seconds to wait until it. A slot more than
        ``max_wait_s`` away is not taken (its wait is returned)."""
        with self._lock:
            now = self._clock()
            slot = max(now, self._last + self.interval)
            if max_wait_s is None or slot - now <= max_wait_s:
                self._last = slot
            return slot - now


class SendRateLimiter:
    """Global send-rate limiter: Redis slot spacing, per-process fallback when Redis is down."""

    def __init__(
        self,
        client_factory: Callable[[], redis.Redis],
        rate_per_second: float,
        *,
        max_instances: int = DEFAULT_MAX_INSTANCES,
        headroom: float = 0.1,
        late_tolerance_s: float = 0.02,
        key: str = DEFAULT_KEY,
        cooldown_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_second <= 0:
            raise ValueError("rate_per_second must be positive")
        if max_instances < 1:
            raise ValueError("max_instances must be at least 1")
        effective = rate_per_second / (1.0 + headroom)
        self.rate_per_second = rate_per_second
        self.interval = 1.0 / effective
        self._interval_us = max(1, round(self.interval * 1_000_000))
        self._late_tolerance = late_tolerance_s
        self._factory = client_factory
        self._key = key
        self._cooldown = cooldown_s
        self._clock = clock
        self._sleep = sleep
        self._open_until = -math.inf
        self._script: Script | None = None
        self.fallback = LocalSlotLimiter(effective / max_instances, clock)

    @property
    def shared(self) -> bool:
        """True while the Redis limiter is in use (the breaker is closed)."""
        return self._clock() >= self._open_until

    def reserve(self, max_wait_s: float | None = None) -> float:
        """Reserve the next send slot; return how many seconds until it (0 = send now). A
        slot more than ``max_wait_s`` away is not taken: the caller is refused, and the
        refusal costs the others nothing (issue 31: under an opening's retries, refused
        reservations that kept their slots pushed every caller's next one out of reach)."""
        if self.shared:
            try:
                client = self._factory()
                if self._script is None:
                    # EVALSHA from then on; redis-py re-sends the source after a restart.
                    self._script = client.register_script(_RESERVE_SLOT)
                args = [self._interval_us]
                if max_wait_s is not None:
                    args.append(max(0, round(max_wait_s * 1_000_000)))
                wait_us = self._script(keys=[self._key], args=args, client=client)
                return max(0.0, int(wait_us) / 1_000_000)
            except cache_errors() as exc:
                self._open_until = self._clock() + self._cooldown
                logger.warning(
                    "rate limiter: Redis unavailable; limiting this instance to rate / max_instances",
                    extra={"error": str(exc), "fallbackRate": 1.0 / self.fallback.interval},
                )
                metrics.add_metric(name="RateLimiterFallback", unit="Count", value=1)
        return self.fallback.reserve(max_wait_s)

    def acquire(self) -> float:
        """Block until this caller may send; return the seconds waited."""
        started = self._clock()
        for _ in range(_MAX_RESERVATIONS):
            asked = self._clock()
            wait = self.reserve()
            if wait > 0:
                self._sleep(wait)
            # Late by the reservation's round trip plus any oversleep: only the caller
            # knows, so only the caller can decide not to send into a busier window.
            if self._clock() - (asked + wait) <= self._late_tolerance:
                break
        return self._clock() - started
