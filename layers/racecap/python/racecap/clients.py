"""AWS and Redis clients, created once per execution environment and reused.

Endpoints are never configured here: on the local stack the standard
``AWS_ENDPOINT_URL_<SERVICE>`` variables point boto3 at the local servers, so the
code is byte-for-byte what runs on AWS.
"""

from __future__ import annotations

import functools
from typing import Any

import boto3
import redis
from botocore.config import Config

from racecap.config import get_settings

# Adaptive retries absorb DynamoDB throttling during a burst; the SDK's own backoff is
# the first line of defence, our explicit retries (racecap.dal.retry) the second.
_BOTO_CONFIG = Config(
    retries={"max_attempts": 8, "mode": "adaptive"},
    connect_timeout=2,
    read_timeout=10,
    max_pool_connections=50,
)


@functools.cache
def aws(service: str) -> Any:
    return boto3.session.Session().client(service, config=_BOTO_CONFIG)  # type: ignore[call-overload]


def dynamodb() -> Any:
    return aws("dynamodb")


def sqs() -> Any:
    return aws("sqs")


@functools.lru_cache(maxsize=1)
def cache() -> redis.Redis:
    # Short timeouts: Redis is an accelerator, never a dependency. A slow cache must
    # fall through to DynamoDB quickly rather than hold a runner's request.
    return redis.Redis.from_url(
        get_settings().cache_url,
        socket_timeout=0.25,
        socket_connect_timeout=0.25,
        health_check_interval=30,
        decode_responses=True,
    )
