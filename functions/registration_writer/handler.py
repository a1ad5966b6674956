"""RegistrationWriter: paid registrations from SQS → confirmed places with bibs.

Reserved concurrency caps how hard a burst can push the tables; partial batch failures
(``batchItemFailures``) retry only what failed. Records are confirmed per event in one
transaction each (see ``registration.writer``), which is why this handler takes the
batch whole rather than record by record.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.pulse import flushed
from racecap.registration.wiring import writer

get_settings()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
@flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    failed = writer().process(event.get("Records", []))
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}
