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

``RequestBudget`` is the same slot spacing with two limits at once, as a payment provider
counts requests: the account's rate over every call and each endpoint's own (Stripe: 25/s per
endpoint unless raised, whatever the account allows). One script reserves both or neither.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Mapping
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


def _us(seconds: float) -> int:
    return max(0, round(seconds * 1_000_000))


class _RedisScript:
    """A limiter's Lua script on the shared Redis, behind a breaker: after a failure, Redis is
    left alone for ``cooldown_s`` and ``run`` answers None (the caller's per-process fallback)."""

    def __init__(
        self,
        client_factory: Callable[[], redis.Redis],
        source: str,
        cooldown_s: float,
        clock: Callable[[], float],
        fallback_rate: float,
    ) -> None:
        self._factory = client_factory
        self._source = source
        self._cooldown = cooldown_s
        self._clock = clock
        self._fallback_rate = fallback_rate
        self._open_until = -math.inf
        self._script: Script | None = None

    @property
    def closed(self) -> bool:
        return self._clock() >= self._open_until

    def run(self, keys: list[str], args: list[int]) -> int | None:
        if not self.closed:
            return None
        try:
            client = self._factory()
            if self._script is None:
                # EVALSHA from then on; redis-py re-sends the source after a restart.
                self._script = client.register_script(self._source)
            return int(self._script(keys=keys, args=args, client=client))
        except cache_errors() as exc:
            self._open_until = self._clock() + self._cooldown
            logger.warning(
                "rate limiter: Redis unavailable; limiting this instance to rate / max_instances",
                extra={"error": str(exc), "fallbackRate": self._fallback_rate},
            )
            metrics.add_metric(name="RateLimiterFallback", unit="Count", value=1)
            return None


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
        self._key = key
        self._clock = clock
        self._sleep = sleep
        self.fallback = LocalSlotLimiter(effective / max_instances, clock)
        self._redis = _RedisScript(client_factory, _RESERVE_SLOT, cooldown_s, clock, 1.0 / self.fallback.interval)

    @property
    def shared(self) -> bool:
        """True while the Redis limiter is in use (the breaker is closed)."""
        return self._redis.closed

    def reserve(self, max_wait_s: float | None = None) -> float:
        """Reserve the next send slot; return how many seconds until it (0 = send now). A
        slot more than ``max_wait_s`` away is not taken: the caller is refused, and the
        refusal costs the others nothing (issue 31: under an opening's retries, refused
        reservations that kept their slots pushed every caller's next one out of reach)."""
        args = [self._interval_us]
        if max_wait_s is not None:
            args.append(_us(max_wait_s))
        wait_us = self._redis.run([self._key], args)
        if wait_us is None:
            return self.fallback.reserve(max_wait_s)
        return max(0.0, wait_us / 1_000_000)

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


# A request budget with two limits, as a payment provider counts them: the account's rate over
# every call, and each endpoint's own. KEYS[1] = the account's reserved slots (a sorted set whose
# members are their times), KEYS[2] = the endpoint's last slot; ARGV[1], ARGV[2] = the account's
# and the endpoint's slot spacing, ARGV[3] = the longest wait the caller takes (microseconds).
# The endpoint's calls are alike, so they go first come, first served after its last slot; the
# account's slot is then the earliest from there at least ARGV[1] away from every slot reserved,
# filling a gap before slots other endpoints took further out. (A single "last slot" for the
# account would put every endpoint behind the slowest one's queue: while creations waited their
# turn, a retrieve would wait with them.) Both are taken, or neither: a caller refused by either
# limit costs the other nothing.
_RESERVE_BOTH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ia, ie, max_wait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local slot = math.max(now, tonumber(redis.call('GET', KEYS[2]) or '0') + ie)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - ia))
for _, taken in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', slot - ia), '+inf')) do
  local s = tonumber(taken)
  if s >= slot + ia then break end
  slot = s + ia
end
if slot - now > max_wait then
  return slot - now
end
local member = string.format('%.0f', slot)
redis.call('ZADD', KEYS[1], member, member)
local latest = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1)[1])
redis.call('PEXPIRE', KEYS[1], math.ceil((latest - now + ia) / 1000) + 1)
redis.call('SET', KEYS[2], member, 'PX', math.ceil((slot - now + ie) / 1000) + 1)
return slot - now
"""


class LocalRequestBudget:
    """The same two limits inside one process, in integer microseconds as the script counts
    (the fallback, and the reference the script follows); thread-safe."""

    def __init__(
        self,
        account_interval_s: float,
        endpoint_interval_s: Callable[[str], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._account_us = max(1, _us(account_interval_s))
        self._endpoint_interval = endpoint_interval_s
        self._clock = clock
        self._taken: list[int] = []  # the account's reserved slots, in order
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    def reserve(self, endpoint: str, max_wait_s: float) -> float:
        ia, ie = self._account_us, max(1, _us(self._endpoint_interval(endpoint)))
        with self._lock:
            now = round(self._clock() * 1_000_000)
            slot = max(now, self._last.get(endpoint, -ie) + ie)
            del self._taken[: bisect.bisect_right(self._taken, now - ia)]
            for taken in self._taken[bisect.bisect_right(self._taken, slot - ia) :]:
                if taken >= slot + ia:
                    break
                slot = taken + ia
            if slot - now <= _us(max_wait_s):
                bisect.insort(self._taken, slot)
                self._last[endpoint] = slot
            return (slot - now) / 1_000_000


class RequestBudget:
    """An account's request rate and each endpoint's, shared by every instance through Redis
    (one round trip reserves both), each with ``headroom`` as ``SendRateLimiter``'s; a
    per-process fallback at ``rate / max_instances`` while Redis is down."""

    def __init__(
        self,
        client_factory: Callable[[], redis.Redis],
        account_rate: float,
        endpoint_rate: float,
        *,
        endpoint_rates: Mapping[str, float] | None = None,
        key: str,
        max_instances: int = DEFAULT_MAX_INSTANCES,
        headroom: float = 0.1,
        cooldown_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        rates = {"account": account_rate, "endpoint": endpoint_rate, **(endpoint_rates or {})}
        if any(rate <= 0 for rate in rates.values()):
            raise ValueError(f"every rate must be positive: {rates}")
        if max_instances < 1:
            raise ValueError("max_instances must be at least 1")
        self._headroom = headroom
        self._account_interval = (1.0 + headroom) / account_rate
        self._endpoint_rate = endpoint_rate
        self._endpoint_rates = dict(endpoint_rates or {})
        # A hash tag: the script's keys share one slot on a cluster (ElastiCache Serverless).
        self._prefix = "{" + key + "}:"
        self.fallback = LocalRequestBudget(
            self._account_interval * max_instances,
            lambda endpoint: self.endpoint_interval(endpoint) * max_instances,
            clock,
        )
        self._redis = _RedisScript(client_factory, _RESERVE_BOTH, cooldown_s, clock, account_rate / max_instances)

    def endpoint_interval(self, endpoint: str) -> float:
        return (1.0 + self._headroom) / self._endpoint_rates.get(endpoint, self._endpoint_rate)

    @property
    def shared(self) -> bool:
        return self._redis.closed

    def reserve(self, endpoint: str, max_wait_s: float) -> float:
        """Reserve a slot for one call to ``endpoint`` within both limits; return the seconds
        until it. One more than ``max_wait_s`` away is not taken (in either limit)."""
        args = [_us(self._account_interval), _us(self.endpoint_interval(endpoint)), _us(max_wait_s)]
        wait_us = self._redis.run([self._prefix + "account", self._prefix + endpoint], args)
        if wait_us is None:
            return self.fallback.reserve(endpoint, max_wait_s)
        return max(0.0, wait_us / 1_000_000)
