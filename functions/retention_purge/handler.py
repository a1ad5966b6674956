"""RetentionPurge: every hour (EventBridge), the personal data of races whose retention
period is over is deleted, keeping what results publish and the stats
(``retention.service``). A big race may take several runs: each stops before its
deadline and the next goes on from where it stopped. The first run also scrubs the audit
trail of the addresses entries kept before it kept none (once: a mark remembers it)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.audit.wiring import audit_trail
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.retention.wiring import retention_purge

get_settings()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    # Once, then one read per run: entries written before the trail kept no address lose theirs.
    scrubbed = audit_trail().scrub_personal_data()
    counts = retention_purge().run(lambda: context.get_remaining_time_in_millis() / 1000)
    logger.info("retention purge", extra=counts)
    return counts | ({"auditEntriesScrubbed": scrubbed} if scrubbed else {})
