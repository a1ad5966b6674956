"""Where an asynchronous invocation that failed is kept: a queue, Lambda's on-failure
destination for the function (``blueprint.async_failure_queues``), alarmed like a
dead-letter queue by Monitoring. Schedules and S3 object triggers both invoke this way."""

from __future__ import annotations

from typing import cast

from aws_cdk import Duration, Tags
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .. import constants as c
from ..scanners import suppress

FAILURES_RETENTION = Duration.days(14)
WHY_NO_REDRIVE = "This queue is itself a failure destination: nothing consumes it, so no redrive."


def failures_queue(
    scope: Construct,
    queue_id: str,
    fn: lambda_.IFunction,
    *,
    config_id: str,
    retry_attempts: int,
    max_event_age: Duration,
    why_sqs_managed: str,
) -> sqs.Queue:
    """The queue ``queue_id`` and the function's EventInvokeConfig sending failures to it."""
    failures = sqs.Queue(
        scope,
        queue_id,
        retention_period=FAILURES_RETENTION,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
    )
    Tags.of(failures).add(c.BLUEPRINT_TAG, queue_id)
    suppress(failures, "checkov", "CKV_AWS_27", why_sqs_managed)
    suppress(failures, "cfn-lint", "ES6000", WHY_NO_REDRIVE)
    invoke_config = lambda_.EventInvokeConfig(
        scope,
        config_id,
        function=fn,
        qualifier="$LATEST",
        retry_attempts=retry_attempts,
        max_event_age=max_event_age,
        on_failure=destinations.SqsDestination(failures),
    )
    # By ARN, as the invoker's permission names it (so scanners can pair them).
    cast(lambda_.CfnEventInvokeConfig, invoke_config.node.default_child).add_property_override(
        "FunctionName", fn.function_arn
    )
    return failures
