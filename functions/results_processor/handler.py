"""ResultsProcessor: an uploaded results CSV arrived in S3 (ObjectCreated) — check every
line and, if all are valid, install it as the event's next results version."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.data_classes import S3Event, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.results.wiring import results_processor

get_settings()  # validate the environment at cold start


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
@event_source(data_class=S3Event)
def handler(event: S3Event, context: LambdaContext) -> dict[str, Any]:
    outcomes = {}
    for record in event.records:
        key = record.s3.get_object.key  # Powertools undoes S3's URL-encoding of the key
        outcomes[key] = results_processor().process(key, record.s3.get_object.size or 0)
    return {"outcomes": outcomes}
