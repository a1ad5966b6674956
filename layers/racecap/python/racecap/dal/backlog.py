"""The registration writer's pace and backlog (``logic.backlog``): the writer tallies what it
confirmed and how long each took from the queue (Redis, one round trip a batch); the waiting
screen's status answer reads the backlog, rebuilt at most every ``BACKLOG_TTL_S`` for every
environment together from that tally and the queue's own depth (one SQS call)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from racecap.cache import TieredCache
from racecap.domain import Backlog
from racecap.observability import logger

PACE_KEY = "writer:pace"
PACE_WINDOW_S = 10
BACKLOG_TTL_S = 2.0
DEPTH = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")


class SqsWriterPace:
    """``ports.WriterPace`` on SQS (the queue's depth) and Redis (the writer's tally)."""

    def __init__(self, sqs: Any, queue_url: str, cache: TieredCache) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._cache = cache

    # -- the writer ----------------------------------------------------------------
    def record(self, confirmed: int, latency_s: float) -> None:
        self._cache.tally(PACE_KEY, confirmed, round(latency_s, 3), PACE_WINDOW_S)

    # -- the waiting screen ------------------------------------------------------------
    def backlog(self) -> Backlog | None:
        raw = self._cache.get_or_load("writer:backlog", self._measure, ttl=BACKLOG_TTL_S, local_ttl=1.0)
        return Backlog(**raw) if raw else None

    def _measure(self) -> dict[str, Any] | None:
        try:
            attrs = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=list(DEPTH))["Attributes"]
        except (BotoCoreError, ClientError):
            # The paper's schedule for a couple of seconds: a wait, never an error, for the runner.
            logger.warning("registrations queue depth unavailable", exc_info=True)
            return None
        per_second, latency_s = self._cache.tallied(PACE_KEY, PACE_WINDOW_S)
        return {
            "waiting": sum(int(attrs.get(name, 0)) for name in DEPTH),
            "per_second": round(per_second, 2),
            "latency_s": latency_s or 0.0,
        }
