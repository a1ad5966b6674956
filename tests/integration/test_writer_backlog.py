"""The writer's backlog as the waiting screen reads it, on the real servers: the queue's
depth from SQS (ElasticMQ), the writer's pace from Redis, rebuilt at most every couple of
seconds for all environments together."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from racecap.cache import TieredCache
from racecap.registration.status import BACKLOG_TTL_S, PACE_WINDOW_S, SqsWriterPace, wait_s

pytestmark = pytest.mark.integration


def test_the_backlog_is_the_queues_depth_at_the_writers_measured_pace(backend: Any) -> None:
    # Given a queue of its own (nobody drains it) and a tally of its own
    name = f"backlog-{uuid.uuid4().hex[:8]}"
    url = backend.sqs.create_queue(QueueName=name)["QueueUrl"]
    cache = TieredCache(lambda: backend.redis, prefix=f"rc:{name}:")
    pace = SqsWriterPace(backend.sqs, url, cache)

    # An idle writer: nothing waiting, nothing measured -> ask again in a second.
    idle = pace.backlog()
    assert idle is not None and (idle.waiting, idle.per_second, idle.latency_s) == (0, 0.0, 0.0)
    assert wait_s(0.1, idle) == 1

    # When 300 registrations arrive and the writer reports 40 a second taking 2.5 s each
    for start in range(0, 300, 10):
        backend.sqs.send_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "{}"} for i in range(start, start + 10)]
        )
    for _ in range(4):
        pace.record(100, 2.5)
    cache.local.clear()  # another environment: nothing of its own, the shared copy still fresh
    assert pace.backlog() == idle  # rebuilt at most every BACKLOG_TTL_S: polls cost no queue call
    time.sleep(BACKLOG_TTL_S + 0.1)
    cache.local.clear()

    # Then the backlog says so, and the wait follows it
    busy = pace.backlog()
    assert busy is not None and busy.waiting == 300 and busy.latency_s == 2.5
    assert 400 / (2 * PACE_WINDOW_S) <= busy.per_second <= 400 / PACE_WINDOW_S
    assert wait_s(0.2, busy) == min(10, round(max(2.5, 300 / busy.per_second) - 0.2))
    assert wait_s(0.2, busy) > wait_s(0.2, idle)
