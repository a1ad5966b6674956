"""Fault injection for DynamoDB Local, which never throttles or reports transaction
conflicts. Hooks on a boto3 client's own event system make chosen calls fail exactly as
DynamoDB would (same error codes and shapes), or "crash" right after a call succeeded.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from botocore.awsrequest import AWSResponse


class Crash(RuntimeError):
    """The process dying between a committed write and the next step."""


def _error(code: str, message: str, **extra: Any) -> tuple[AWSResponse, dict[str, Any]]:
    http = AWSResponse(url="http://injected", status_code=400, headers={}, raw=None)
    return http, {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": 400},
        **extra,
    }


def transaction_conflict() -> tuple[AWSResponse, dict[str, Any]]:
    return _error(
        "TransactionCanceledException",
        "Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict]",
        CancellationReasons=[{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}],
    )


def throttling() -> tuple[AWSResponse, dict[str, Any]]:
    return _error("ThrottlingException", "Rate of requests exceeds the allowed throughput.")


class FaultInjector:
    """Fail every ``every``-th call of ``operation`` (before it reaches the server)."""

    def __init__(self, client: Any, operation: str, fault: Callable[[], Any], every: int = 2, limit: int = 10**9):
        self.injected = 0
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._every, self._limit, self._fault = every, limit, fault
        client.meta.events.register(f"before-call.dynamodb.{operation}", self._before)

    def _before(self, **_: Any) -> Any:
        with self._lock:
            n = next(self._counter)
            if n % self._every or self.injected >= self._limit:
                return None
            self.injected += 1
        return self._fault()


class CrashAfter:
    """Raise ``Crash`` after every ``every``-th successful call of ``operation``."""

    def __init__(self, client: Any, operation: str, every: int = 3):
        self.crashes = 0
        self._counter = itertools.count(1)
        self._every = every
        client.meta.events.register(f"after-call.dynamodb.{operation}", self._after)

    def _after(self, http_response: Any, **_: Any) -> None:
        if http_response.status_code == 200 and next(self._counter) % self._every == 0:
            self.crashes += 1
            raise Crash("injected crash after a committed write")
