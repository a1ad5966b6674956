"""EmailSender: drains the Emails queue into SES at the account's send rate, once per email.

Partial batch responses: a record that fails (throttled for too long, poison, a duplicate
still in flight elsewhere) is reported alone and comes back from the queue; the rest of
the batch is deleted. See ``emails.sender`` for the per-record rules.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.registration.wiring import notifier

get_settings()  # validate the environment at cold start, not mid-burst
# The sender (SES and DynamoDB clients, and Powertools' idempotency, which imports boto3) is
# built by the first batch, as every other function builds its clients on first use: the
# import stays under the cold-start target (issue 30: it was 406 ms with them), and a queue
# consumer's first batch waits for it instead, which no runner sees.


def record_handler(record: SQSRecord, lambda_context: LambdaContext) -> str:
    return notifier().handle_record(record, lambda_context)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    # A processor per invocation: it holds one batch's state, and the local stack runs
    # concurrent pollers' invocations in one process.
    processor = BatchProcessor(event_type=EventType.SQS)
    with notifier().batched():  # the batch's delivery log in one write (emails.sender)
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
