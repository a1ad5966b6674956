"""EventBridge rules from ``blueprint.SCHEDULES``: invoke a function every N minutes
(the local stack's scheduler thread does the same).

EventBridge invokes Lambda asynchronously. A tick that EventBridge cannot deliver, or
that fails inside the function, is not retried (the next tick comes a period later) but
parked in the schedule's failures queue, whose depth is alarmed like a dead-letter queue.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import Duration, Tags
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import suppress

FAILURES_RETENTION = Duration.days(14)
WHY_SQS_MANAGED = (
    "Holds only failed schedule ticks (a timestamp, no runner data): SQS managed encryption, which "
    "EventBridge can write to without a key policy."
)
WHY_NO_REDRIVE = "This queue is itself the failure destination of the schedule: nothing consumes it, so no redrive."


class Schedules(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.Function]) -> None:
        super().__init__(scope, construct_id)
        self.rules: dict[str, events.Rule] = {}
        self.failures: dict[str, sqs.Queue] = {}
        for decl in blueprint.SCHEDULES:
            fn = functions[decl.function]
            failures = sqs.Queue(
                self,
                decl.failures_queue_id,
                retention_period=FAILURES_RETENTION,
                encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True,
            )
            Tags.of(failures).add(c.BLUEPRINT_TAG, decl.failures_queue_id)
            suppress(failures, "checkov", "CKV_AWS_27", WHY_SQS_MANAGED)
            suppress(failures, "cfn-lint", "ES6000", WHY_NO_REDRIVE)
            self.failures[decl.failures_queue_id] = failures
            # A missed tick is harmless: the next one comes a period later, so no retries,
            # and a tick older than one period is stale.
            invoke_config = lambda_.EventInvokeConfig(
                self,
                f"{decl.id}{c.ASYNC_INVOKE_SUFFIX}",
                function=fn,
                qualifier="$LATEST",
                retry_attempts=0,
                max_event_age=Duration.minutes(decl.every_minutes),
                on_failure=destinations.SqsDestination(failures),
            )
            # By ARN, as the schedule's invoke permission names it (so scanners can pair them).
            cast(lambda_.CfnEventInvokeConfig, invoke_config.node.default_child).add_property_override(
                "FunctionName", fn.function_arn
            )
            rule = events.Rule(
                self,
                decl.id,
                description=f"Invoke {decl.function} every {decl.every_minutes} min",
                schedule=events.Schedule.rate(Duration.minutes(decl.every_minutes)),
                targets=[targets.LambdaFunction(fn, retry_attempts=0, dead_letter_queue=failures)],
            )
            Tags.of(rule).add(c.BLUEPRINT_TAG, decl.id)
            self.rules[decl.id] = rule
