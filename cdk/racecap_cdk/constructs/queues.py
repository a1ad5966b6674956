"""One SQS queue per ``blueprint.QUEUES`` entry, each with its own dead-letter queue:
a message that keeps failing is parked, never dropped."""

from __future__ import annotations

from aws_cdk import Duration, Tags
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import suppress

WHY_DLQ_NO_REDRIVE = "This is the dead-letter queue: the end of the line, alarmed when not empty; nothing redrives it."


class Queues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, personal_data_key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        self._key = personal_data_key
        self.by_id: dict[str, sqs.Queue] = {}
        self.dead_letters: dict[str, sqs.Queue] = {}
        for decl in blueprint.QUEUES:
            key = self._key if decl.personal_data else None
            dlq = self._queue(decl.dlq_id, key=key, retention_days=decl.dlq_retention_days)
            suppress(dlq, "cfn-lint", "ES6000", WHY_DLQ_NO_REDRIVE)
            self.dead_letters[decl.id] = dlq
            self.by_id[decl.id] = self._queue(
                decl.id,
                key=key,
                retention_days=decl.retention_days,
                visibility_timeout=Duration.seconds(decl.visibility_timeout_s),
                dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=decl.max_receive_count, queue=dlq),
            )

    def _queue(
        self,
        queue_id: str,
        *,
        key: kms.IKey | None,
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
            # Messages carry runners' details: the stack's customer managed key where declared.
            encryption=sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=key,
            enforce_ssl=True,
        )
        Tags.of(queue).add(c.BLUEPRINT_TAG, queue_id)
        return queue
