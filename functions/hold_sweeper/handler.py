"""HoldSweeper: every minute (EventBridge), expired holds give their places back (to a waitlist's
pool first), then the waitlist offers (racecap.waitlist.offers: in this run, so a place an expiry
just pooled is offered at once rather than a period later), then the
payments reconciliation: every payment that succeeded is queued or refunded (never paid
without a place), whatever happened to its webhook; then every refund still waiting for the
provider's word is settled with it (a lost answer, a pending refund whose webhook was lost); and the
openings' per-second counts are copied from Redis to DynamoDB (racecap.stats.pulse)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.ledger.wiring import cancellations, ledger, payment_events, switches
from racecap.observability import logger, metrics, tracer
from racecap.pulse import flushed
from racecap.registration.wiring import sweeper
from racecap.stats.wiring import pulse_series
from racecap.waitlist.wiring import offer_batch

get_settings()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
@flushed
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    counts = sweeper().sweep(switches=switches().settle_expired)
    logger.info("swept holds", extra=counts)
    try:
        offers = offer_batch().run()
    except Exception:  # the payments' reconciliation below must run whatever happens to the offers
        logger.exception("waitlist offers failed")
        offers = {}
    reconciled = payment_events().reconcile()
    refunds = ledger().settle_open(resume_cancellation=cancellations().after_refund_settled)
    # A cancellation left half-way (its refund refused for the budget, a crash between steps) is
    # finished under its own refund key once it is as old as a refund's answer may take.
    grace = timedelta(seconds=get_settings().refund_settle_after_s)
    cancels = cancellations().finish_open(datetime.now(UTC) - grace)
    try:
        # The openings' per-second counts into DynamoDB: every minute, whether or not anyone watches.
        copied = pulse_series().copy()
    except Exception:  # never at the cost of the payments' work around it
        logger.exception("pulse copy failed")
        copied = {}
    counts |= {f"pulse_{k}": v for k, v in copied.items()}
    counts |= {f"waitlist_{k}": v for k, v in offers.items()}
    counts |= {f"reconciled_{k}": v for k, v in reconciled.items()}
    counts |= {f"refunds_{k}": v for k, v in refunds.items()}
    return counts | {f"cancels_{k}": v for k, v in cancels.items()}
