"""One logger, metrics object and tracer for the whole process (Powertools).

Service name and namespace come from POWERTOOLS_* variables declared in the blueprint.

The tracer is a switch, off by default: Powertools' ``Tracer()`` imports the X-Ray SDK and
patches botocore at cold start (115-206 ms of every cold start measured by ``make bench``,
issue 14), and a burst pays every cold start before its first answer. Lambda's active
tracing (``Tracing.ACTIVE`` in CDK) still records every invocation's segment without the
SDK. Set ``RACECAP_XRAY_SDK=true`` on a function to get Powertools' subsegments (handler,
methods, AWS calls) back while investigating; only then is the SDK imported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
R = TypeVar("R")


class _Tracer:
    """The two decorators the handlers use; Powertools' Tracer behind them only when asked."""

    def __init__(self, enabled: bool) -> None:
        self.sdk: Any = None
        if enabled:
            from aws_lambda_powertools import Tracer

            self.sdk = Tracer()

    def capture_method(self, method: F) -> F:
        return method if self.sdk is None else self.sdk.capture_method(method)  # type: ignore[no-any-return]

    def capture_lambda_handler(self, handler: F) -> F:
        return handler if self.sdk is None else self.sdk.capture_lambda_handler(handler)  # type: ignore[no-any-return]

    def in_threads(self, work: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
        """``work`` over ``items`` on up to ``workers`` threads, results in order; exceptions are
        raised as ``work`` raised them. For I/O-bound batches (a provider call per item). With the
        SDK on, each thread joins the invocation's segment (the SDK's context is per thread, and
        a call made outside it would be logged as an error and not traced)."""
        items = list(items)
        if workers <= 1 or len(items) <= 1:
            return [work(item) for item in items]
        entity = None if self.sdk is None else self.sdk.provider.get_trace_entity()

        def traced(item: T) -> R:
            if entity is not None:
                self.sdk.provider.set_trace_entity(entity)
            return work(item)

        # Imported here: only the sweeper's batches use threads, and every handler loads this
        # module at cold start (a module-level import cost them all 2-3 ms).
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
            return list(pool.map(traced, items))


logger = Logger()
# Read here rather than in config.Settings: the tracer decorates handlers at import, before
# a handler validates its settings, and the switch is an operator's, not the blueprint's.
tracer = _Tracer(os.environ.get("RACECAP_XRAY_SDK", "").lower() == "true")
metrics = Metrics()
