"""Delivering one queued email: render, wait for a send slot, send, at most once per key.

* **At most once per ``dedupKey``.** SQS delivers at least once and producers may enqueue
  twice, so sending goes through Powertools Idempotency keyed on the message's
  ``dedupKey``, its records in the cache (Powertools' CachePersistenceLayer: no DynamoDB write,
  issue 14): a duplicate returns the first send's message id without sending. If the
  send fails, the in-progress record is removed so the redelivery can send. The one gap is
  a process that dies after SES accepted and before the record is saved: the redelivery
  sends again (at least once across a crash; recording before sending would lose emails).
* **Never faster than the account's rate.** Every attempt, retries included, first
  takes a slot from the shared limiter (``racecap.ratelimit``).
* **Throttled is not failed.** SES throttling is retried a few times with jittered
  exponential backoff inside the invocation; if it persists the record fails and SQS
  redelivers it later (the DLQ only after ``maxReceiveCount``). Nothing is dropped.
* **Poison fails fast.** A message that cannot be rendered raises ``PoisonMessage``
  before anything is sent or stored.
* **Some emails are finished here.** A ``prepare`` step (``registration.links``) signs the
  runner's link into the emails that carry it, and resolves a "find my registration" request
  to the registered address, or to nothing sent at all (an unknown address: no one is told).
* **Every send is on record.** Each email SES accepts is written to the delivery log
  (``emails.store``), which outlives the deduplication records: the audit of a
  deployed stage counts confirmations there.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from racecap.emails.models import PoisonMessage, parse_message, tags_for
from racecap.emails.store import Delivery, DeliveryLog, Mailer, MailThrottled
from racecap.emails.templates import EmailMessage, RenderedEmail, render
from racecap.observability import logger, metrics

# Remember a sent key for as long as a copy of its message can still be on the queue
# (the Emails queue keeps messages 4 days).
DEDUP_WINDOW_S = 4 * 24 * 3600


IDEMPOTENCY_KEY_PREFIX = "racecap-email"


class Limiter(Protocol):
    """What ``racecap.ratelimit.SendRateLimiter`` offers: block until a send slot is ours."""

    def acquire(self) -> float: ...


class OutOfTime(Exception):
    """Too little of the invocation is left to send safely; the queue will redeliver."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_s: float = 0.2
    cap_s: float = 1.6
    # Never start an attempt (or a backoff) that could run past the Lambda timeout.
    reserve_s: float = 2.0

    def backoff(self, attempt: int) -> float:
        """Equal jitter: half the exponential step fixed, half random (spreads instances apart)."""
        step = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        return step / 2 + random.uniform(0, step / 2)


class Notifier:
    def __init__(
        self,
        mailer: Mailer,
        limiter: Limiter,
        persistence: BasePersistenceLayer,
        *,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        deliveries: DeliveryLog | None = None,
        prepare: Callable[[EmailMessage], EmailMessage | None] | None = None,
    ) -> None:
        self._mailer = mailer
        self._batch = threading.local()  # the deliveries of the batch being handled (``batched``)
        self._prepare = prepare
        self._deliveries = deliveries
        self._limiter = limiter
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._config = IdempotencyConfig(
            event_key_jmespath="dedupKey",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=DEDUP_WINDOW_S,
            response_hook=_on_duplicate,
        )
        self._send_once = idempotent_function(
            data_keyword_argument="message",
            persistence_store=persistence,
            config=self._config,
            key_prefix=IDEMPOTENCY_KEY_PREFIX,
        )(self._deliver)

    @contextmanager
    def batched(self) -> Iterator[None]:
        """Log the deliveries of the records handled inside (one SQS batch) together, when the
        batch is done: one or two write requests a batch instead of one an email. The cost: a
        process that dies mid-batch loses the log of what that batch had sent (a sent email is
        never sent again for it: the deduplication records are written per email), as a crash
        between a send and its own put did before, over a longer window; logged and counted.
        Per thread: the local stack runs concurrent pollers' batches in one process."""
        self._batch.pending = []
        try:
            yield
        finally:
            pending, self._batch.pending = self._batch.pending, None
            if pending and self._deliveries is not None:
                try:
                    self._deliveries.record_many(pending)
                except Exception:
                    logger.exception("delivery log write failed", extra={"deliveries": len(pending)})
                    metrics.add_metric(name="EmailDeliveryLogFailed", unit="Count", value=len(pending))

    def handle_record(self, record: SQSRecord, lambda_context: LambdaContext | None = None) -> str:
        """Deliver one SQS record's email; return the SES message id (the first one, for a duplicate)."""
        log = {"sqsMessageId": record.message_id}
        try:
            message = parse_message(record.body)
            log.update(dedupKey=message.dedupKey, kind=message.kind)
            if self._prepare is not None:
                prepared = self._prepare(message)
                if prepared is None:
                    logger.info("nothing to send for this message", extra=log)
                    metrics.add_metric(name="EmailNotNeeded", unit="Count", value=1)
                    return ""
                message = prepared
            rendered = render(message)
            deadline = math.inf
            if lambda_context is not None:
                self._config.register_lambda_context(lambda_context)
                deadline = self._clock() + lambda_context.get_remaining_time_in_millis() / 1000
            message_id: str = self._send_once(message=message, rendered=rendered, deadline=deadline)
            return message_id
        except PoisonMessage as exc:
            logger.error("poison email; the queue will dead-letter it", extra={**log, "error": f"{exc}"})
            metrics.add_metric(name="EmailPoison", unit="Count", value=1)
            raise
        except IdempotencyAlreadyInProgressError:
            logger.info("the same email is being sent by another instance; will check again", extra=log)
            raise
        except (MailThrottled, OutOfTime) as exc:
            logger.warning("email deferred; the queue will redeliver it", extra={**log, "error": f"{exc}"})
            raise

    def _deliver(self, *, message: EmailMessage, rendered: RenderedEmail, deadline: float) -> str:
        tags = tags_for(message)
        attempt = 0
        while True:
            attempt += 1
            if deadline - self._clock() < self._retry.reserve_s:
                raise OutOfTime(f"{deadline - self._clock():.1f}s left in the invocation")
            self._limiter.acquire()
            try:
                message_id = self._mailer.send(message.to, rendered, tags)
            except MailThrottled:
                metrics.add_metric(name="EmailThrottled", unit="Count", value=1)
                delay = self._retry.backoff(attempt)
                out_of_time = deadline - self._clock() - delay < self._retry.reserve_s
                if attempt >= self._retry.max_attempts or out_of_time:
                    raise
                self._sleep(delay)
                continue
            metrics.add_metric(name="EmailSent", unit="Count", value=1)
            self._log_delivery(message, message_id)
            logger.info(
                "email sent",
                extra={
                    "dedupKey": message.dedupKey,
                    "kind": message.kind,
                    "sesMessageId": message_id,
                    "attempts": attempt,
                },
            )
            return message_id

    def _log_delivery(self, message: EmailMessage, message_id: str) -> None:
        """Best effort, after the send: failing here would make the queue send it again,
        and a runner getting a second email is worse than the audit flagging a missing one
        (the failure is logged and counted, so the audit's finding can be explained)."""
        registration_id = message.data.get("registrationId")
        if self._deliveries is None or not isinstance(registration_id, str) or not registration_id:
            return
        delivery = Delivery(registration_id, message.kind, message.dedupKey, message_id, datetime.now(UTC))
        pending: list[Delivery] | None = getattr(self._batch, "pending", None)
        if pending is not None:
            pending.append(delivery)  # written with the rest of the batch (``batched``)
            return
        try:
            self._deliveries.record(
                delivery.registration_id, delivery.kind, delivery.dedup_key, delivery.ses_message_id, delivery.at
            )
        except Exception:
            log = {"dedupKey": message.dedupKey, "sesMessageId": message_id}
            logger.exception("delivery log write failed", extra=log)
            metrics.add_metric(name="EmailDeliveryLogFailed", unit="Count", value=1)


def _on_duplicate(response: Any, idempotent_data: DataRecord) -> Any:
    logger.info("duplicate email suppressed", extra={"sesMessageId": response})
    metrics.add_metric(name="EmailDuplicate", unit="Count", value=1)
    return response
