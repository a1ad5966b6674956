"""BallotDraw: every minute (EventBridge), each ballot whose draw time has come is drawn, its
line written as the event's waitlist and its runners told their result (``racecap.ballot.job``).
A million applications may take several runs: each stops before its deadline and the next goes on
from where it stopped; one at a time (reserved concurrency 1), as two would redo each other's work."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.ballot.wiring import draw_job
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer

get_settings()  # validate the environment at cold start


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    counts = draw_job().run(lambda: context.get_remaining_time_in_millis() / 1000)
    logger.info("ballot draws", extra=counts)
    return counts
