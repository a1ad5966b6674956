"""Blueprint grants -> IAM statements on each function's own role.

The only place a function gains access to data: each ``blueprint.Grant`` maps to the
narrowest CDK grant for that one resource (table grants include that table's indexes).
Queue triggers add consume rights themselves (``constructs/triggers.py``).
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

import blueprint

from .refs import Registry

SES_SEND_ACTIONS = ["ses:SendEmail", "ses:SendRawEmail"]
STOP_EXECUTION_ACTIONS = ["states:StopExecution", "states:DescribeExecution"]
# The pre-warm: move one provisioned function's floor and schedule its return to zero.
# Application Auto Scaling scopes writes to scalable-target ARNs whose ids it generates,
# so the ARN is a pattern; the condition keys pin the namespace and dimension (Lambda
# provisioned concurrency), and the target's resource id is the function's live alias.
WARM_START_WRITE_ACTIONS = [
    "application-autoscaling:RegisterScalableTarget",
    "application-autoscaling:PutScheduledAction",
    "application-autoscaling:DeleteScheduledAction",
]
# Describe actions take no resource-level scoping at all.
WARM_START_READ_ACTIONS = [
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:DescribeScheduledActions",
]
# A presigned PUT carries the signer's rights: exactly PutObject. Reading: exactly GetObject.
BUCKET_ACTIONS = {"put": ["s3:PutObject"], "read": ["s3:GetObject"]}


def apply_grants(registry: Registry) -> None:
    for decl in blueprint.FUNCTIONS:
        fn = registry.functions[decl.id]
        for grant in decl.grants:
            _apply(registry, fn, grant)


def _apply(registry: Registry, fn: lambda_.Function, grant: blueprint.Grant) -> None:
    match grant:
        case blueprint.TableAccess(table=table_id, mode="read"):
            registry.tables[table_id].grant_read_data(fn)
        case blueprint.TableAccess(table=table_id, mode="write"):
            registry.tables[table_id].grant_write_data(fn)
        case blueprint.TableAccess(table=table_id, mode="readwrite"):
            registry.tables[table_id].grant_read_write_data(fn)
        case blueprint.QueueAccess(queue=queue_id, mode="send"):
            registry.queues[queue_id].grant_send_messages(fn)
        case blueprint.QueueAccess(queue=queue_id, mode="consume"):
            registry.queues[queue_id].grant_consume_messages(fn)
        case blueprint.SendEmail():
            stack = Stack.of(fn)
            identities = stack.format_arn(service="ses", resource="identity", resource_name="*")
            fn.add_to_role_policy(iam.PolicyStatement(actions=SES_SEND_ACTIONS, resources=[identities]))
        case blueprint.StartExecution(state_machine=sm_id):
            registry.state_machines[sm_id].grant_start_execution(fn)
        case blueprint.StopExecution(state_machine=sm_id):
            # On this state machine's executions only (execution:<name>:*).
            registry.state_machines[sm_id].grant_execution(fn, *STOP_EXECUTION_ACTIONS)
        case blueprint.BucketAccess(bucket=bucket_id, mode=mode, prefix=prefix):
            bucket = registry.buckets[bucket_id]
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=BUCKET_ACTIONS[mode], resources=[bucket.arn_for_objects(f"{prefix}*")])
            )
        case blueprint.ReadSecret(secret=secret_id):
            registry.secrets[secret_id].grant_read(fn)
        case blueprint.ScaleWarmStart(function=function_id):
            if blueprint.function(function_id).warm_start != "provisioned":
                raise TypeError(f"{function_id} has no provisioned warm starts to scale")
            targets = Stack.of(fn).format_arn(
                service="application-autoscaling", resource="scalable-target", resource_name="*"
            )
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=WARM_START_WRITE_ACTIONS,
                    resources=[targets],
                    conditions={
                        "StringEquals": {
                            "application-autoscaling:service-namespace": "lambda",
                            "application-autoscaling:scalable-dimension": "lambda:function:ProvisionedConcurrency",
                        }
                    },
                )
            )
            fn.add_to_role_policy(iam.PolicyStatement(actions=WARM_START_READ_ACTIONS, resources=["*"]))
        case _:
            raise TypeError(f"unknown blueprint grant: {grant!r}")
