"""The emails capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.aws.queues import SqsQueue
    from racecap.emails.models import EmailMessage
    from racecap.emails.sender import Notifier


@lru_cache(maxsize=1)
def emails_queue() -> SqsQueue:
    """The confirmation and refund emails' queue (the email sender's)."""
    from racecap.aws.queues import SqsQueue

    return SqsQueue(clients.sqs(), get_settings().emails_queue_url)


# -- the email sender ---------------------------------------------------------------------------
def build_notifier(prepare: Callable[[EmailMessage], EmailMessage | None] | None = None) -> Notifier:
    """The sender; ``prepare`` finishes messages before rendering (``registration.wiring.notifier``
    signs the runner's links in: the links are the registration capability's, a rank above)."""
    # Powertools' idempotency package imports boto3 (and with it s3transfer), ~50 ms of the
    # cold start of every function that imported it (tests/unit/test_cold_imports.py).
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer

    from racecap.emails.sender import Notifier
    from racecap.emails.store import DynamoDeliveryLog, SesMailer
    from racecap.ratelimit import SendRateLimiter

    settings = get_settings()
    return Notifier(
        SesMailer(clients.ses(), settings.email_from),
        SendRateLimiter(clients.cache, settings.email_send_rate_per_second),
        # The deduplication records live in the cache, the rate limiter's (issue 14): two
        # DynamoDB writes per email fewer. Losing one (a cache failover) could let a duplicate
        # message send a second email; the delivery log would show it.
        CachePersistenceLayer(client=cast(Any, clients.cache())),  # redis-py's own signature is wider
        deliveries=DynamoDeliveryLog(clients.dynamodb(), settings.registrations_table),
        prepare=prepare,
    )
