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
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics

F = TypeVar("F", bound=Callable[..., Any])


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


logger = Logger()
# Read here rather than in config.Settings: the tracer decorates handlers at import, before
# a handler validates its settings, and the switch is an operator's, not the blueprint's.
tracer = _Tracer(os.environ.get("RACECAP_XRAY_SDK", "").lower() == "true")
metrics = Metrics()
