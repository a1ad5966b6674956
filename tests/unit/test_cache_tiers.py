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


class _LateHolderRedis:
    """Another environment's rebuild finishes between our miss and our SET NX: by the time
    we take the (now free) lock, the value is in Redis."""

    def __init__(self) -> None:
        self.gets = 0
        self.released: list[str] = []

    def get(self, key):
        self.gets += 1
        return None if self.gets == 1 else b'{"answer":42}'

    def set(self, key, value, nx=False, px=None):
        return True

    def eval(self, script, n, lock, token):
        self.released.append(lock)


def test_given_the_value_stored_just_before_we_took_the_lock_then_it_is_not_rebuilt():
    fake = _LateHolderRedis()
    cache = TieredCache(lambda: fake)  # type: ignore[arg-type, return-value]
    loads = []
    value = cache.get_or_load("k", lambda: loads.append(1) or {"answer": 0}, ttl=10, local_ttl=0)
    assert value == {"answer": 42}
    assert loads == []
    assert fake.released == ["rc:k:lock"]  # and the lock is not left to expire
