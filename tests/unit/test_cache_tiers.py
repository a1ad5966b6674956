"""The in-process tier and the Redis breaker, without any server."""

from __future__ import annotations

import time

import redis
from racecap.cache import LocalTier, SharedTier, TieredCache


def test_local_tier_expires_entries():
    tier = LocalTier()
    tier.put("k", {"v": 1}, ttl=0.05)
    assert tier.get("k") == {"v": 1}
    time.sleep(0.07)
    assert tier.get("k") != {"v": 1}
    assert tier.get("k") is tier.get("missing")


def test_local_tier_evicts_least_recently_used():
    tier = LocalTier(max_entries=2)
    tier.put("a", 1, 10)
    tier.put("b", 2, 10)
    tier.get("a")
    tier.put("c", 3, 10)
    assert tier.get("a") == 1
    assert tier.get("c") == 3
    assert tier.get("b") is tier.get("missing")


class _DeadRedis:
    calls = 0

    def __getattr__(self, name):
        def fail(*_a, **_k):
            _DeadRedis.calls += 1
            raise redis.ConnectionError("down")

        return fail


def test_given_redis_down_when_reading_then_loader_answers_and_breaker_skips_redis():
    _DeadRedis.calls = 0
    cache = TieredCache(_DeadRedis)  # type: ignore[arg-type, return-value]
    loads = []

    def loader():
        loads.append(1)
        return {"race": "r1"}

    assert cache.get_or_load("k", loader, ttl=10, local_ttl=0) == {"race": "r1"}
    calls_after_first = _DeadRedis.calls
    assert cache.get_or_load("k2", loader, ttl=10, local_ttl=0) == {"race": "r1"}
    # The breaker is open: the second read did not touch Redis at all.
    assert _DeadRedis.calls == calls_after_first
    assert len(loads) == 2


def test_breaker_closes_after_cooldown():
    tier = SharedTier(_DeadRedis, cooldown=0.05)  # type: ignore[arg-type, return-value]
    assert tier.call(lambda r: r.get("x"), "default") == "default"
    assert not tier.available
    time.sleep(0.06)
    assert tier.available
