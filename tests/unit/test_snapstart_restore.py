"""After a SnapStart restore, environments do not share ``random``'s state or a dead
Redis connection (racecap.clients.after_restore)."""

from __future__ import annotations

import random

from racecap import clients


def test_given_environments_restored_from_one_snapshot_when_each_restores_then_their_random_streams_differ() -> None:
    random.seed(1234)  # the state frozen in the snapshot
    state = random.getstate()
    draws = []
    for _ in range(2):  # two environments restored from the same snapshot
        random.setstate(state)
        clients.after_restore()
        draws.append([random.random() for _ in range(4)])
    assert draws[0] != draws[1]


def test_given_a_redis_client_made_before_the_snapshot_when_restored_then_the_next_call_gets_a_new_one(
    placeholder_env: dict[str, str],
) -> None:
    clients.cache.cache_clear()
    before = clients.cache()  # no connection is opened until a command runs
    clients.after_restore()
    assert clients.cache() is not before
    clients.cache.cache_clear()
