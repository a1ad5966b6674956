"""Per-address token buckets on the runner API, shared by every environment through Redis.

Each address has a bucket of ``burst`` tokens refilled at ``rate`` per second; a request
takes one or is answered ``429`` with ``Retry-After`` (the seconds until a token is back).
One Lua script does read-refill-take atomically, with Redis's own clock, so concurrent
environments with skewed clocks agree.

Redis is an accelerator, never a dependency: if it is down the API **fails open**
(every request passes) for a few seconds at a time and says so in the
``RateLimitFailOpen`` metric, so an alarm, not a runner, notices.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from racecap.cache import cache_errors
from racecap.observability import logger, metrics

if TYPE_CHECKING:
    import redis
    from redis.commands.core import Script

# KEYS[1] bucket; ARGV[1] rate per second, ARGV[2] burst. Returns milliseconds to wait (0 = go).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 't', 'n')
local last = tonumber(v[1]) or now
local n = tonumber(v[2]) or burst
n = math.min(burst, n + math.max(0, now - last) * rate)
local wait = 0
if n >= 1 then n = n - 1 else wait = math.ceil((1 - n) / rate * 1000) end
redis.call('HSET', KEYS[1], 't', string.format('%.6f', now), 'n', string.format('%.6f', n))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return wait
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0


class AddressBuckets:
    def __init__(
        self,
        client_factory: Callable[[], redis.Redis],
        *,
        rate_per_second: float,
        burst: int,
        prefix: str = "rc:rl:",
        cooldown_s: float = 5.0,
    ) -> None:
        if rate_per_second <= 0 or burst < 1:
            raise ValueError("rate must be positive and burst at least 1")
        self.rate = rate_per_second
        self.burst = burst
        self._factory = client_factory
        self._prefix = prefix
        self._cooldown = cooldown_s
        self._open_until = 0.0
        self._script: Script | None = None

    def take(self, address: str | None) -> Decision:
        if address is None:
            return Decision(True)  # unknown address (local calls only): nothing to key on
        if time.monotonic() < self._open_until:
            metrics.add_metric(name="RateLimitFailOpen", unit="Count", value=1)
            return Decision(True)
        try:
            client = self._factory()
            if self._script is None:
                self._script = client.register_script(_TAKE)
            wait_ms = int(self._script(keys=[self._prefix + address], args=[self.rate, self.burst], client=client))
        except cache_errors() as exc:
            self._open_until = time.monotonic() + self._cooldown
            logger.warning("rate limits: Redis unavailable; failing open", extra={"error": str(exc)})
            metrics.add_metric(name="RateLimitFailOpen", unit="Count", value=1)
            return Decision(True)
        if wait_ms <= 0:
            return Decision(True)
        metrics.add_metric(name="RateLimited", unit="Count", value=1)
        return Decision(False, max(1, math.ceil(wait_ms / 1000)))
