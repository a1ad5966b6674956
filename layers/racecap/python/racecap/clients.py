"""AWS and Redis clients, created once per execution environment and reused.

Endpoints are never configured here: on the local stack the standard
``AWS_ENDPOINT_URL_<SERVICE>`` variables point boto3 at the local servers, so the
code is byte-for-byte what runs on AWS.

The SDKs are imported by the first call that builds a client, not with this module: every
function imports it, and botocore's session (~100 ms) and redis (~55 ms: its package
imports its asyncio client) would otherwise be in every cold start, those of functions
that never use Redis included (issue 14). ``prime()`` builds them during init where
that costs a runner nothing: before a SnapStart snapshot, or in a provisioned environment.
"""

from __future__ import annotations

import functools
import os
import platform
import random
from typing import TYPE_CHECKING, Any

from racecap.config import get_settings

if TYPE_CHECKING:
    import botocore.session
    import redis

# Retries per service (issue 31), chosen from the chaos burst's per-request timings
# (docs/faults.md). Every API request also has a time budget (racecap.deadline):
# a retry whose worst backoff does not fit in what is left is not made, and the runner gets
# 503 + Retry-After instead of an answer after 20 s.
#
# DynamoDB: standard mode, 3 attempts. Not adaptive: its client-side rate limiter is one
# per client, so per execution environment, and after a few throttles it holds *every* call
# of the environment back. The chaos burst measured it at 3c6a58d (10 % injected throttles):
# handler p50 182 ms, of which 163 ms asleep, 129 ms of it in the limiter; SDK backoffs p99
# 1.6 s. Every handler slept, and the shared local workers queued the rest behind it. The
# limiter exists to shield a service from a client that floods it; a Lambda environment makes
# one call at a time, and DynamoDB's on-demand tables throttle a partition, not a client, so
# a throttled call backed off and retried is the whole remedy. Three
# attempts: at 10 % throttles, one call in a thousand is throttled three times, and the
# backoffs before the second and third (up to 1 s and 2 s) fit in the budget; a table
# throttling harder than that is better told to the runner (Retry-After) than slept on.
# Timeouts: DynamoDB answers in milliseconds; a call that has not answered in 3 s is not
# going to answer within the budget either, and a retry of a read is safe (our writes are
# conditional or idempotent: the retry of a write that did land fails its condition).
_BOTO_CONFIG: dict[str, Any] = {
    "retries": {"total_max_attempts": 3, "mode": "standard"},
    "connect_timeout": 1,
    "read_timeout": 3,
    "max_pool_connections": 50,
    # botocore walks every request against the service model before sending it: CPU on every
    # call of a burst (issue 14) to catch what the service itself refuses with a 400 anyway.
    "parameter_validation": False,
}


# SQS is not throttled at our rates; what fails there is a queue that does not answer
# (ElasticMQ restarting in the chaos burst, a few seconds). Standard mode (no limiter, as
# above), 4 attempts: botocore's backoff for a connection error is short (50 ms base), so
# four attempts span about a second; the budget ends the request with 503 + Retry-After
# if the queue is still away, and the runner's retry (the site's, after Retry-After) finds
# their hold kept. The read timeout is longer than DynamoDB's: a queue persisting to disk
# commits each send.
# SES: no SDK retries. A retried send would bypass the shared rate limiter (botocore retries
# TooManyRequestsException by itself); emails.sender retries, taking a slot each time.
# S3: presigned URLs (the console's results uploads) in SigV4, as S3 wants everywhere (SigV2
# only works in the oldest regions). botocore's default presigns in SigV2, which puts the
# Content-Type in the query (…&content-type=text%2Fcsv); the browser's CORS preflight carries
# that query without the header, and moto's S3 refuses it (403 SignatureDoesNotMatch) before
# it looks at the CORS rule. In SigV4 the Content-Type is a signed header instead, and the PUT
# must still send it. The host stays <bucket>.s3.amazonaws.com (the console's CSP names it).
_SERVICE_CONFIG = {
    "sqs": {**_BOTO_CONFIG, "retries": {"total_max_attempts": 4, "mode": "standard"}, "read_timeout": 5},
    "sesv2": {**_BOTO_CONFIG, "retries": {"total_max_attempts": 1, "mode": "standard"}, "read_timeout": 5},
    "s3": {**_BOTO_CONFIG, "signature_version": "s3v4"},
}


@functools.cache
def aws(service: str) -> Any:
    # botocore's client is the one boto3 hands out (boto3.client() wraps this call), minus
    # importing boto3: its __init__ pulls in s3transfer and the resource and docs
    # machinery, ~50 ms of every cold start for nothing a function uses (issue 14).
    from botocore.config import Config

    from racecap import deadline

    settings = dict(_SERVICE_CONFIG.get(service, _BOTO_CONFIG))
    retries = dict(settings["retries"])
    # Adaptive mode is standard mode plus a client-side rate limiter: the limiter is added by
    # racecap.deadline, where the time it holds a call back is counted (issue 31).
    adaptive = retries.get("mode") == "adaptive"
    if adaptive:
        retries["mode"] = "standard"
    settings["retries"] = retries
    max_attempts = int(retries.get("total_max_attempts") or retries.get("max_attempts", 2) + 1)
    client = _session().create_client(service, config=Config(**settings, user_agent=_user_agent()))
    return deadline.instrument(client, max_attempts=max_attempts, adaptive=adaptive)


@functools.cache
def _user_agent() -> str:
    """One User-Agent for every call, built once.

    Without one, botocore rebuilds its default header twice per request (component by
    component, sanitised) to report which SDK features the call used: 15 % of botocore's
    time per call in the gateway's cProfile (issue 14). This names the same SDK, language
    and runtime, which is what CloudTrail and AWS support read.
    """
    import botocore

    runtime = os.environ.get("AWS_EXECUTION_ENV", "local")
    return f"racecap botocore/{botocore.__version__} lang/python#{platform.python_version()} exec-env/{runtime}"


@functools.cache
def _session() -> botocore.session.Session:
    import botocore.session

    return botocore.session.get_session()


def dynamodb() -> Any:
    return aws("dynamodb")


def sqs() -> Any:
    return aws("sqs")


def ses() -> Any:
    return aws("sesv2")


@functools.lru_cache(maxsize=1)
def cache() -> redis.Redis:
    import redis

    # Short timeouts: Redis is an accelerator, never a dependency. A slow cache must
    # fall through to DynamoDB quickly rather than hold a runner's request.
    return redis.Redis.from_url(
        get_settings().cache_url,
        socket_timeout=0.25,
        socket_connect_timeout=0.25,
        health_check_interval=30,
        decode_responses=True,
    )


# -- Warm starts (docs/cold-starts.md) ------------------------------------------------------------
# Why Lambda runs an init (its AWS_LAMBDA_INITIALIZATION_TYPE): these two run before any
# request reaches the environment, so what they build is off every runner's path.
WARM_INITS = frozenset({"provisioned-concurrency", "snap-start"})


def prime() -> bool:
    """Build the SDK clients during a warm init, so the first request finds them ready.

    An on-demand init stays lazy: a function that never calls Redis or SQS should not pay
    for their clients in front of its first request. Nothing connects here: a SnapStart
    snapshot would freeze a socket that no longer exists after the restore.
    """
    if os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") not in WARM_INITS:
        return False
    dynamodb()
    sqs()
    cache()
    return True


def after_restore() -> None:
    """Run when Lambda restores a SnapStart snapshot into a new execution environment.

    Every environment restored from one snapshot starts with the same ``random`` state, so
    they would all try the inventory shards in the same order (``holds/store.py``) and pick
    the same jitter: reseed from the OS. Redis connections made before the snapshot belong
    to a socket that no longer exists: drop the pool so the next call connects afresh.
    """
    random.seed()
    if cache.cache_info().currsize:
        cache().connection_pool.disconnect()
        cache.cache_clear()


try:  # the Lambda Python runtime ships this module where SnapStart can be on; nowhere else
    from snapshot_restore_py import register_after_restore  # type: ignore[import-not-found]
except ImportError:
    pass
else:
    register_after_restore(after_restore)

# The module is imported during init: a warm init builds the clients now.
prime()
