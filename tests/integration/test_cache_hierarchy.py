"""The paper's caching hierarchy against real Redis and DynamoDB Local."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from racecap.cache import TieredCache
from racecap.dal.dynamo import to_item, values

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
