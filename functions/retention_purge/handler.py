"""RetentionPurge: every hour (EventBridge), the personal data of races whose retention
period is over is deleted, keeping what results publish and the stats
(``retention.service``). A big race may take several runs: each stops before its
deadline and the next goes on from where it stopped."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.retention.wiring import retention_purge

get_settings()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    counts = retention_purge().run(lambda: context.get_remaining_time_in_millis() / 1000)
    logger.info("retention purge", extra=counts)
    return counts
