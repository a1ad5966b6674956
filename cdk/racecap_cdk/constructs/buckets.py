"""One private S3 bucket per ``blueprint.BUCKETS`` entry, and its ``blueprint.OBJECT_TRIGGERS``:
S3 ObjectCreated notifications (prefix/suffix filtered) invoking the declared function,
as the local stack's object watcher (``local/pollers.py``) delivers them.

S3 invokes the function asynchronously: Lambda retries a failed event twice, then parks it
in the trigger's failures queue (alarmed like a dead-letter queue), so a failure before the
upload record could be updated is kept for the team instead of being dropped."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct

import blueprint

from .. import constants as c
from .async_failures import failures_queue

# Lambda's default for asynchronous invocations, said here: a transient failure (DynamoDB
# unavailable for a moment) gets two more tries, minutes apart.
RETRY_ATTEMPTS = 2
MAX_EVENT_AGE = Duration.hours(6)
WHY_SQS_MANAGED = (
    "Holds only failed S3 event notifications (bucket, object key and size: race, event and upload ids, "
    "no runner data): SQS managed encryption, which Lambda's destination can write to without a key policy."
)


class Buckets(Construct):
    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.by_id: dict[str, s3.Bucket] = {}
        self.failures: dict[str, sqs.Queue] = {}  # add_triggers: failures queue id -> queue
        for decl in blueprint.BUCKETS:
            bucket = s3.Bucket(
                self,
                decl.id,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                lifecycle_rules=[
                    s3.LifecycleRule(
                        id="expire",
                        expiration=Duration.days(decl.expire_days),
                        abort_incomplete_multipart_upload_after=Duration.days(1),
                    )
                ],
                removal_policy=RemovalPolicy.RETAIN,
                bucket_name=decl.aws_name(Stack.of(self).stack_name, Stack.of(self).account, Stack.of(self).region)
                if decl.browser_uploads
                else None,
            )
            Tags.of(bucket).add(c.BLUEPRINT_TAG, decl.id)
            self.by_id[decl.id] = bucket

    def add_triggers(self, functions: dict[str, lambda_.Function]) -> None:
        for trigger in blueprint.OBJECT_TRIGGERS:
            self.failures[trigger.failures_queue_id] = failures_queue(
                self,
                trigger.failures_queue_id,
                functions[trigger.function],
                config_id=f"{trigger.failures_queue_id}{c.ASYNC_INVOKE_SUFFIX}",
                retry_attempts=RETRY_ATTEMPTS,
                max_event_age=MAX_EVENT_AGE,
                why_sqs_managed=WHY_SQS_MANAGED,
            )
            self.by_id[trigger.bucket].add_event_notification(
                s3.EventType.OBJECT_CREATED,
                s3n.LambdaDestination(functions[trigger.function]),
                s3.NotificationKeyFilter(prefix=trigger.prefix, suffix=trigger.suffix or None),
            )

    def allow_uploads_from(self, site_origin: str) -> None:
        """CORS for the buckets browsers upload to: a PUT (with its Content-Type, which the
        presigned URL signs) from the site's origin only; nothing else crosses origins."""
        for decl in blueprint.BUCKETS:
            if decl.browser_uploads:
                self.by_id[decl.id].add_cors_rule(
                    allowed_methods=[s3.HttpMethods.PUT],
                    allowed_origins=[site_origin],
                    allowed_headers=["content-type"],
                    max_age=600,
                )
