"""The paper's caching hierarchy against real Redis and DynamoDB Local."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from racecap.aws.items import to_item, values
from racecap.cache import TieredCache

from tests.integration.latency import machine

pytestmark = pytest.mark.integration


def test_given_a_cold_key_when_fifty_callers_race_then_one_rebuilds_it(backend):
    cache = backend.cache()
    loads: list[int] = []
    key = f"stampede:{time.time_ns()}"

    def slow_loader():
        loads.append(1)
        time.sleep(0.2)  # a slow DynamoDB read: the window in which a stampede would happen
        return {"answer": 42}

    results: list[dict] = []
    barrier = threading.Barrier(50)

    def reader():
        # Each thread gets its own in-process tier, as separate Lambda environments would.
        own = TieredCache(lambda: backend.redis)
        barrier.wait()
        results.append(own.get_or_load(key, slow_loader, ttl=30, local_ttl=5))

    threads = [threading.Thread(target=reader) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert results == [{"answer": 42}] * 50
    assert len(loads) == 1
    assert cache.get_or_load(key, slow_loader, ttl=30, local_ttl=5) == {"answer": 42}
    assert len(loads) == 1


def test_given_a_cached_race_when_the_director_edits_it_then_readers_see_the_edit(backend):
    race_id = backend.create_race([10], name="Before Edit")
    catalog = backend.catalog()
    assert catalog.get_race(race_id).name == "Before Edit"

    # An edit: the race item changes and its version goes up, then the stamp is bumped.
    resp = backend.dynamodb.update_item(
        TableName=backend.table("Races"),
        Key=to_item({"pk": f"RACE#{race_id}", "sk": "RACE"}),
        UpdateExpression="SET #n = :n ADD version :one",
        ExpressionAttributeNames={"#n": "name"},
        ExpressionAttributeValues=values({":n": "After Edit", ":one": 1}),
        ReturnValues="UPDATED_NEW",
    )
    catalog.invalidate(race_id, int(resp["Attributes"]["version"]["N"]))

    assert catalog.get_race(race_id).name == "After Edit"
    # Another environment (its own in-process tier) sees it too, through the shared stamp.
    assert backend.catalog().get_race(race_id).name == "After Edit"


def test_given_redis_is_down_when_reading_a_race_then_dynamodb_answers(backend):
    race_id = backend.create_race([12])
    dead = redis.Redis(host="127.0.0.1", port=1, socket_timeout=0.1, socket_connect_timeout=0.1)
    catalog = backend.catalog(TieredCache(lambda: dead))

    race = catalog.get_race(race_id)

    assert race.events[0].spotsLeft == 12
    assert catalog.list_races().races


def test_given_turns_on_one_key_when_environments_race_then_one_runs_at_a_time_and_a_stale_holder_expires(backend):
    key = f"turn:{time.time_ns()}"
    inside: list[int] = []
    overlaps: list[int] = []
    turns: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def environment():
        own = TieredCache(lambda: backend.redis)  # separate environments, one Redis
        barrier.wait()
        with own.turn(key, hold_ms=2000, wait_s=3.0) as ours:
            with lock:
                inside.append(1)
                overlaps.append(len(inside))
                turns.append(ours)
            time.sleep(0.05)
            with lock:
                inside.pop()

    threads = [threading.Thread(target=environment) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert turns == [True] * 6  # each waited for its turn and got it
    assert max(overlaps) == 1  # never two at once

    # A holder that died keeps the key only until hold_ms: the next one then gets its turn.
    dead = TieredCache(lambda: backend.redis).turn(key, hold_ms=300, wait_s=0)
    assert dead.__enter__()  # entered, never left (kept referenced: closing it would release)
    started = time.monotonic()
    with TieredCache(lambda: backend.redis).turn(key, hold_ms=2000, wait_s=2.0) as ours:
        assert ours
    waited = time.monotonic() - started
    assert 0.2 < waited < 1.5, (waited, machine())  # the dead holder's 300 ms, not the whole 2-s wait
