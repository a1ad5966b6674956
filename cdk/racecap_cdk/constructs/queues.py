"""One SQS queue per ``blueprint.QUEUES`` entry, each with its own dead-letter queue:
a message that keeps failing is parked, never dropped."""

from __future__ import annotations

from aws_cdk import Duration, Tags
from aws_cdk import aws_sqs as sqs
from constructs import Construct

import blueprint

from .. import constants as c


class Queues(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.by_id: dict[str, sqs.Queue] = {}
        self.dead_letters: dict[str, sqs.Queue] = {}
        for decl in blueprint.QUEUES:
            dlq = self._queue(decl.dlq_id, retention_days=decl.dlq_retention_days)
            self.dead_letters[decl.id] = dlq
            self.by_id[decl.id] = self._queue(
                decl.id,
                retention_days=decl.retention_days,
                visibility_timeout=Duration.seconds(decl.visibility_timeout_s),
                dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=decl.max_receive_count, queue=dlq),
            )

    def _queue(
        self,
        queue_id: str,
        *,
        retention_days: int,
        visibility_timeout: Duration | None = None,
        dead_letter_queue: sqs.DeadLetterQueue | None = None,
    ) -> sqs.Queue:
        queue = sqs.Queue(
            self,
            queue_id,
            retention_period=Duration.days(retention_days),
            visibility_timeout=visibility_timeout,
            dead_letter_queue=dead_letter_queue,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        Tags.of(queue).add(c.BLUEPRINT_TAG, queue_id)
        return queue
