"""The caching hierarchy of the RunSignUp paper (§3), rebuilt for Lambda.

    in-process (per execution environment, seconds)  →  Redis (shared)  →  DynamoDB

* **Stampede protection.** On a shared-cache miss, one caller takes a short Redis lock
  and rebuilds the entry; the others sleep briefly and re-read the cache, so a burst
  of 10,000 first page views costs one DynamoDB read, not 10,000.
* **Version stamps.** Entries for a race are keyed by the race's version. An edit bumps
  the stamp, which orphans every cached entry for that race at once; nothing has to be
  found and deleted. The stamp itself is held in-process for ``stamp_ttl`` seconds (the
  paper's ``getOnce``), which bounds how stale a page can be after an edit.
* **Redis is optional.** Any Redis error opens a breaker for a few seconds and reads go
  straight to DynamoDB (still through the in-process tier), so pages keep answering.
"""

from __future__ import annotations

import functools
import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from racecap import clients
from racecap.observability import logger, metrics

if TYPE_CHECKING:
    import redis


def _lock_token() -> str:
    """Unique per attempt, so a lock is only ever released by whoever took it."""
    return f"{time.time_ns()}-{random.random()}"


def cache_errors() -> tuple[type[BaseException], ...]:
    """What a failing cache raises. Evaluated only when something was raised, by which time
    the client (and with it redis) is loaded: redis stays out of the import (issue 14)."""
    import redis

    return (redis.RedisError, OSError)


T = TypeVar("T")
_MISSING = object()


class Flags(Protocol):
    """Short-lived shared flags (the logic's view of the cache, e.g. an event's "sold out")."""

    def flag(self, key: str, ttl: float) -> None: ...

    def has_flag(self, key: str, local_ttl: float = 1.0) -> bool: ...

    def clear_flag(self, key: str) -> None: ...


class LocalTier:
    """A small thread-safe LRU with per-entry expiry, private to one environment."""

    def __init__(self, max_entries: int = 2048) -> None:
        self._data: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries

    def get(self, key: str) -> Any:
        now = time.monotonic()
        with self._lock:
            item = self._data.get(key)
            if item is None:
                return _MISSING
            expires, value = item
            if expires < now:
                del self._data[key]
                return _MISSING
            self._data.move_to_end(key)
            return value

    def put(self, key: str, value: Any, ttl: float) -> None:
        with self._lock:
            self._data[key] = (time.monotonic() + ttl, value)
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class SharedTier:
    """Redis, behind a breaker: after an error it is skipped for ``cooldown`` seconds."""

    def __init__(self, client_factory: Callable[[], redis.Redis], cooldown: float = 5.0) -> None:
        self._factory = client_factory
        self._cooldown = cooldown
        self._open_until = 0.0

    @property
    def available(self) -> bool:
        return time.monotonic() >= self._open_until

    def call(self, fn: Callable[[redis.Redis], T], default: T) -> T:
        if not self.available:
            return default
        try:
            return fn(self._factory())
        except cache_errors() as exc:
            self._open_until = time.monotonic() + self._cooldown
            logger.warning("cache unavailable; reading through to DynamoDB", extra={"error": str(exc)})
            metrics.add_metric(name="CacheUnavailable", unit="Count", value=1)
            return default


class TieredCache:
    def __init__(
        self,
        client_factory: Callable[[], redis.Redis],
        *,
        prefix: str = "rc:",
        lock_ttl_ms: int = 3000,
        wait_for_lock_s: float = 1.5,
        stamp_ttl: float = 1.0,
    ) -> None:
        self.local = LocalTier()
        self.shared = SharedTier(client_factory)
        self._prefix = prefix
        self._lock_ttl_ms = lock_ttl_ms
        self._wait_for_lock_s = wait_for_lock_s
        self._stamp_ttl = stamp_ttl

    # -- values -------------------------------------------------------------
    def get_or_load(
        self,
        key: str,
        loader: Callable[[], T],
        *,
        ttl: float,
        local_ttl: float,
    ) -> T:
        """Return the value for ``key`` from the nearest tier, rebuilding it at most once."""
        value = self.local.get(key)
        if value is not _MISSING:
            return value  # type: ignore[no-any-return]
        full = self._prefix + key
        raw = self.shared.call(lambda r: r.get(full), None)
        value = json.loads(raw) if raw is not None else self._rebuild(full, loader, ttl)
        self.local.put(key, value, local_ttl)
        return value  # type: ignore[no-any-return]

    def _rebuild(self, full: str, loader: Callable[[], T], ttl: float) -> T:
        if not self.shared.available:
            return loader()
        lock, token = f"{full}:lock", _lock_token()
        # Redis failing between the check above and here: rebuild as if the lock were ours.
        got_lock = self._try_lock(lock, token, self._lock_ttl_ms, if_unavailable=True)
        if not got_lock:
            deadline = time.monotonic() + self._wait_for_lock_s
            while time.monotonic() < deadline:
                time.sleep(0.02 + random.random() * 0.03)
                raw = self.shared.call(lambda r: r.get(full), None)
                if raw is not None:
                    metrics.add_metric(name="CacheStampedeAvoided", unit="Count", value=1)
                    return json.loads(raw)  # type: ignore[no-any-return]
            # The lock holder is slow or gone: serve the runner rather than wait longer.
        else:
            # Checked again under the lock: a holder may have stored the value and released
            # the lock between our miss and our SET NX (a second rebuild otherwise).
            raw = self.shared.call(lambda r: r.get(full), None)
            if raw is not None:
                self._release(lock, token)
                metrics.add_metric(name="CacheStampedeAvoided", unit="Count", value=1)
                return json.loads(raw)  # type: ignore[no-any-return]
        value = loader()
        metrics.add_metric(name="CacheRebuild", unit="Count", value=1)
        payload = json.dumps(value, separators=(",", ":"))
        self.shared.call(lambda r: r.set(full, payload, px=int(ttl * 1000)), None)
        if got_lock:
            self._release(lock, token)
        return value

    def _try_lock(self, lock: str, token: str, ttl_ms: int, *, if_unavailable: bool | None) -> bool | None:
        """SET NX with an expiry: True if the lock is ours now; ``if_unavailable`` without Redis."""
        return self.shared.call(lambda r: bool(r.set(lock, token, nx=True, px=ttl_ms)), if_unavailable)

    def _release(self, lock: str, token: str) -> None:
        """Delete the lock only if it is still ours (it may have expired and been taken)."""
        self.shared.call(lambda r: r.eval(_RELEASE_LOCK, 1, lock, token), None)

    def delete(self, key: str) -> None:
        self.local.put(key, _MISSING, 0)
        self.shared.call(lambda r: r.delete(self._prefix + key), None)

    def put_many(self, values: dict[str, Any], ttl: float) -> None:
        """Write values a writer already knows (no loader, no lock), in one round trip."""
        if not values:
            return

        def _put(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            for key, value in values.items():
                pipe.set(self._prefix + key, json.dumps(value, separators=(",", ":")), px=int(ttl * 1000))
            pipe.execute()

        self.shared.call(_put, None)

    def peek(self, key: str) -> Any:
        """The shared tier's value for ``key``, or None (absent, or Redis unavailable): for a
        reader that falls back to the table itself rather than loading into the cache."""
        raw = self.shared.call(lambda r: r.get(self._prefix + key), None)
        return json.loads(raw) if raw is not None else None

    # -- version stamps -------------------------------------------------------
    def stamp(self, name: str, load: Callable[[], int], *, shared_ttl: int = 3600, fresh: bool = False) -> int:
        """The current version stamp ``name``, read once per ``stamp_ttl`` per environment
        (``fresh``: read from Redis now, for an answer that must not rest on a second-old view).

        ``shared_ttl`` bounds how long Redis keeps it: a bump that missed Redis (down at the
        time, then back without a restart) leaves the old stamp there at most that long."""
        key = f"stamp:{name}"
        value = self.local.get(key)
        if value is not _MISSING and not fresh:
            return int(value)
        full = self._prefix + key
        raw = self.shared.call(lambda r: r.get(full), None)
        if raw is None:
            stamp = load()
            # NX: never move a stamp backwards over a concurrent bump.
            self.shared.call(lambda r: r.set(full, stamp, nx=True, ex=shared_ttl), None)
        else:
            stamp = int(raw)
        self.local.put(key, stamp, self._stamp_ttl)
        return stamp

    def bump(self, name: str, new_value: int, *, shared_ttl: int = 3600) -> None:
        """Move a stamp forward (never back), orphaning every entry keyed by the old one."""
        full = self._prefix + f"stamp:{name}"
        self.shared.call(lambda r: r.eval(_RAISE_STAMP, 1, full, new_value, shared_ttl), None)
        self.local.put(f"stamp:{name}", new_value, self._stamp_ttl)

    # -- turns ------------------------------------------------------------------
    @contextmanager
    def turn(self, key: str, *, hold_ms: int = 2000, wait_s: float = 2.0) -> Iterator[bool]:
        """Run the block while no other environment runs one for ``key``, waiting up to
        ``wait_s`` for a holder to finish; yields whether the turn was ours.

        An optimisation, never a guarantee: if Redis is down, the holder is slow past
        ``hold_ms`` or the wait runs out, the block runs anyway and whatever guards the data
        (a DynamoDB condition) decides. What it saves is the work two environments would
        otherwise do at once for one key, the loser's all wasted.
        """
        lock, token = f"{self._prefix}turn:{key}", _lock_token()
        deadline = time.monotonic() + wait_s
        while True:
            got = self._try_lock(lock, token, hold_ms, if_unavailable=None)
            if got is not False or time.monotonic() >= deadline:
                break
            time.sleep(0.005 + random.random() * 0.01)
        try:
            yield bool(got)
        finally:
            if got:
                self._release(lock, token)

    # -- counters and flags ---------------------------------------------------
    def flag(self, key: str, ttl: float) -> None:
        self.shared.call(lambda r: r.set(self._prefix + key, "1", px=int(ttl * 1000)), None)
        self.local.put(key, True, min(ttl, 2.0))

    def has_flag(self, key: str, local_ttl: float = 1.0) -> bool:
        value = self.local.get(key)
        if value is not _MISSING:
            return bool(value)
        found = bool(self.shared.call(lambda r: r.exists(self._prefix + key), 0))
        self.local.put(key, found, local_ttl)
        return found

    def clear_flag(self, key: str) -> None:
        self.shared.call(lambda r: r.delete(self._prefix + key), None)
        self.local.put(key, False, 0.5)

    def tally(self, key: str, count: int, last: float, window_s: int) -> None:
        """Add ``count`` to ``key``'s current fixed window and keep ``last`` as its latest
        reading (a worker's pace: what it did, and how long it took), in one round trip."""
        now = time.time()
        bucket = f"{self._prefix}{key}:{int(now) // window_s}"

        def _tally(r: redis.Redis) -> None:
            pipe = r.pipeline(transaction=False)
            pipe.incrby(bucket, count)
            pipe.expire(bucket, window_s * 3)
            pipe.set(f"{self._prefix}{key}:last", repr(last), ex=window_s * 3)
            pipe.execute()

        self.shared.call(_tally, None)

    def tallied(self, key: str, window_s: int) -> tuple[float, float | None]:
        """``key``'s count per second over the last full window and the current one, and its
        latest reading (None if none lately); (0, None) if Redis is down."""
        now = time.time()
        window = int(now) // window_s
        keys = [f"{self._prefix}{key}:{window - 1}", f"{self._prefix}{key}:{window}", f"{self._prefix}{key}:last"]
        none: list[Any] = [None, None, None]
        previous, current, last = self.shared.call(lambda r: list(r.mget(keys)), none)
        counted = int(previous or 0) + int(current or 0)
        return counted / (window_s + now % window_s), float(last) if last is not None else None

    def incr_window(self, key: str, window_s: int) -> int:
        """Count an event in the current fixed window (rate limits); 0 if Redis is down."""
        bucket = f"{self._prefix}{key}:{int(time.time()) // window_s}"

        def _incr(r: redis.Redis) -> int:
            pipe = r.pipeline()
            pipe.incr(bucket)
            pipe.expire(bucket, window_s * 2)
            return int(pipe.execute()[0])

        return self.shared.call(_incr, 0)


@functools.lru_cache(maxsize=1)
def shared() -> TieredCache:
    """The function's one cache: the in-process tier in front of the shared Redis client."""
    return TieredCache(clients.cache)


_RELEASE_LOCK = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""

_RAISE_STAMP = """
local cur = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then redis.call('set', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2] or '3600')) end
return 0
"""
