"""EventBridge rules from ``blueprint.SCHEDULES``: invoke a function every N minutes
(the local stack's scheduler thread does the same).

EventBridge invokes Lambda asynchronously. A tick that EventBridge cannot deliver, or
that fails inside the function, is not retried (the next tick comes a period later) but
parked in the schedule's failures queue, whose depth is alarmed like a dead-letter queue.
"""

from __future__ import annotations

from aws_cdk import Duration, Tags
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

import blueprint

from .. import constants as c
from .async_failures import failures_queue

WHY_SQS_MANAGED = (
    "Holds only failed schedule ticks (a timestamp, no runner data): SQS managed encryption, which "
    "EventBridge can write to without a key policy."
)


class Schedules(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.Function]) -> None:
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        self.failures: dict[str, sqs.Queue] = {}
        for decl in blueprint.SCHEDULES:
            fn = functions[decl.function]
            # A missed tick is harmless: the next one comes a period later, so no retries,
            # and a tick older than one period is stale.
            failures = failures_queue(
                self,
                decl.failures_queue_id,
                fn,
                config_id=f"{decl.id}{c.ASYNC_INVOKE_SUFFIX}",
                retry_attempts=0,
                max_event_age=Duration.minutes(decl.every_minutes),
                why_sqs_managed=WHY_SQS_MANAGED,
            )
            self.failures[decl.failures_queue_id] = failures
            rule = events.Rule(
                self,
                decl.id,
                description=f"Invoke {decl.function} every {decl.every_minutes} min",
                schedule=events.Schedule.rate(Duration.minutes(decl.every_minutes)),
                targets=[targets.LambdaFunction(fn, retry_attempts=0, dead_letter_queue=failures)],
            )
            Tags.of(rule).add(c.BLUEPRINT_TAG, decl.id)
            self.rules[decl.id] = rule
