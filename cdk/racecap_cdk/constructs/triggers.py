"""SQS event-source mappings from ``blueprint.QUEUE_TRIGGERS``: the batch size, the
maximum concurrency (kept <= the consumer's reserved concurrency, so Lambda never
throttles the poller) and partial-batch responses, exactly as the local pollers run."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

import blueprint

from .. import constants as c
from ..refs import Registry
from ..scanners import suppress

WHY_NO_ON_FAILURE = (
    "An SQS event source cannot have an on-failure destination (Lambda offers it for stream and Kafka "
    "sources): a record that keeps failing goes to the queue's own dead-letter queue after maxReceiveCount, "
    "whose depth is alarmed."
)


class QueueTriggers(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, registry: Registry) -> None:
        super().__init__(scope, construct_id)
        self.mappings: dict[tuple[str, str], lambda_.EventSourceMapping] = {}
        for trigger in blueprint.QUEUE_TRIGGERS:
            fn = registry.functions[trigger.function]
            queue = registry.queues[trigger.queue]
            queue.grant_consume_messages(fn)
            mapping = lambda_.EventSourceMapping(
                self,
                f"{trigger.function}{c.TRIGGER_ID_JOINER}{trigger.queue}",
                target=fn,
                event_source_arn=queue.queue_arn,
                batch_size=trigger.batch_size,
                max_concurrency=trigger.max_concurrency,
                max_batching_window=Duration.seconds(trigger.max_batching_window_s),
                report_batch_item_failures=True,
            )
            suppress(mapping, "cfn-lint", "ES1001", WHY_NO_ON_FAILURE)
            # Lambda checks the role can read the queue when the mapping is created.
            if fn.role is not None:
                mapping.node.add_dependency(fn.role)
            self.mappings[(trigger.function, trigger.queue)] = mapping
