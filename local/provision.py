"""The local side of the declaration: blueprint objects -> the exact requests the local
stack sends to DynamoDB Local and ElasticMQ, and the local values of blueprint refs.

The pure functions here are what ``tests/infra/test_parity.py`` compares with the
synthesized CloudFormation template; ``provision()`` is what ``make run`` calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import blueprint

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

ACCOUNT = "000000000000"
REGION = "us-east-1"
SECONDS_PER_DAY = 86_400
PLACEHOLDER = re.compile(r"\$\{(\w+)\}")

Resolver = Callable[[blueprint.Ref], str]


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def _key_schema(partition: blueprint.Key, sort: blueprint.Key | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": partition.name, "KeyType": "HASH"}]
    if sort is not None:
        schema.append({"AttributeName": sort.name, "KeyType": "RANGE"})
    return schema


def create_table_params(table: blueprint.Table) -> dict[str, Any]:
    """Keyword arguments for ``dynamodb.create_table``."""
    keys = [table.partition_key, table.sort_key]
    for index in table.indexes:
        keys += [index.partition_key, index.sort_key]
    attributes: dict[str, str] = {}
    for key in keys:
        if key is not None:
            attributes.setdefault(key.name, key.type)
    params: dict[str, Any] = {
        "TableName": table.local_name,
        "BillingMode": "PAY_PER_REQUEST",
        "KeySchema": _key_schema(table.partition_key, table.sort_key),
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t in attributes.items()],
    }
    if table.indexes:
        params["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index.name,
                "KeySchema": _key_schema(index.partition_key, index.sort_key),
                "Projection": index.projection,
            }
            for index in table.indexes
        ]
    return params


def ttl_params(table: blueprint.Table) -> dict[str, Any] | None:
    """Keyword arguments for ``dynamodb.update_time_to_live``, or None without TTL."""
    if table.ttl_attribute is None:
        return None
    return {
        "TableName": table.local_name,
        "TimeToLiveSpecification": {"Enabled": True, "AttributeName": table.ttl_attribute},
    }


# ---------------------------------------------------------------------------
# Queues
# ---------------------------------------------------------------------------
def queue_arn(name: str, account: str = ACCOUNT, region: str = REGION) -> str:
    return f"arn:aws:sqs:{region}:{account}:{name}"


def create_queue_requests(queue: blueprint.Queue, account: str = ACCOUNT, region: str = REGION) -> list[dict[str, Any]]:
    """Keyword arguments for ``sqs.create_queue``: the dead-letter queue first, then the
    queue that redrives into it."""
    redrive = {
        "deadLetterTargetArn": queue_arn(queue.dlq_local_name, account, region),
        "maxReceiveCount": queue.max_receive_count,
    }
    return [
        {
            "QueueName": queue.dlq_local_name,
            "Attributes": {"MessageRetentionPeriod": str(queue.dlq_retention_days * SECONDS_PER_DAY)},
        },
        {
            "QueueName": queue.local_name,
            "Attributes": {
                "VisibilityTimeout": str(queue.visibility_timeout_s),
                "MessageRetentionPeriod": str(queue.retention_days * SECONDS_PER_DAY),
                "RedrivePolicy": json.dumps(redrive),
            },
        },
    ]


# ---------------------------------------------------------------------------
# Buckets
# ---------------------------------------------------------------------------
def lifecycle_rules(bucket: blueprint.Bucket) -> list[dict[str, Any]]:
    """The bucket's lifecycle rules, as ``put_bucket_lifecycle_configuration`` takes them."""
    return [
        {
            "ID": "expire",
            "Status": "Enabled",
            "Filter": {"Prefix": ""},
            "Expiration": {"Days": bucket.expire_days},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        }
    ]


def object_event(trigger: blueprint.ObjectTrigger, key: str, size: int, etag: str) -> dict[str, Any]:
    """The S3 ObjectCreated notification Lambda receives (one record; the key URL-encoded)."""
    from datetime import UTC, datetime
    from urllib.parse import quote_plus

    name = blueprint.bucket(trigger.bucket).local_name
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": REGION,
                "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                "eventName": "ObjectCreated:Put",
                "userIdentity": {"principalId": "local"},
                "requestParameters": {"sourceIPAddress": "127.0.0.1"},
                "responseElements": {"x-amz-request-id": "local", "x-amz-id-2": "local"},
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": f"{trigger.function}-{trigger.bucket}",
                    "bucket": {"name": name, "ownerIdentity": {"principalId": "local"}, "arn": f"arn:aws:s3:::{name}"},
                    "object": {"key": quote_plus(key, safe="/"), "size": size, "eTag": etag, "sequencer": "0"},
                },
            }
        ]
    }


# ---------------------------------------------------------------------------
# References, environments, state machines
# ---------------------------------------------------------------------------
def function_arn(function_id: str, account: str = ACCOUNT, region: str = REGION) -> str:
    return f"arn:aws:lambda:{region}:{account}:function:{blueprint.function(function_id).id}"


def state_machine_arn(sm_id: str, account: str = ACCOUNT, region: str = REGION) -> str:
    return f"arn:aws:states:{region}:{account}:stateMachine:{blueprint.state_machine(sm_id).local_name}"


def warm_start_target(function_id: str) -> str:
    """The scalable target's resource id (a local function's name is its blueprint id)."""
    return f"function:{blueprint.function(function_id).id}:{blueprint.LIVE_ALIAS}"


def provision_warm_starts(client: Any) -> None:
    """What the CDK app's ``add_auto_scaling(min_capacity=0, max_capacity=provisioned_max)``
    registers for each provisioned function, in moto's Application Auto Scaling: the
    window's pre-warm moves the same floor here as on AWS, and the local gateway keeps that
    many of the function's environments initialised (``local/environments.py``)."""
    for fn in blueprint.FUNCTIONS:
        if fn.warm_start == "provisioned":
            client.register_scalable_target(
                ServiceNamespace="lambda",
                ResourceId=warm_start_target(fn.id),
                ScalableDimension="lambda:function:ProvisionedConcurrency",
                MinCapacity=0,
                MaxCapacity=fn.provisioned_max,
            )


# The local stack's stand-in for the origin secret, passed like a deploy parameter.
ORIGIN_SECRET_PARAM = "OriginSecret"  # noqa: S105 (a parameter name, not a secret)


def local_resolver(queue_urls: Mapping[str, str], cache_url: str, params: Mapping[str, str] | None = None) -> Resolver:
    """How the local stack resolves blueprint refs: local names, URLs and fake ARNs.

    ``params`` overrides ``Param`` defaults (as a CloudFormation parameter would)."""
    overrides = dict(params or {})

    def resolve(ref: blueprint.Ref) -> str:
        match ref:
            case str():
                return ref
            case blueprint.TableName(table=table_id):
                return blueprint.table(table_id).local_name
            case blueprint.QueueUrl(queue=queue_id):
                return queue_urls[queue_id]
            case blueprint.BucketName(bucket=bucket_id):
                return blueprint.bucket(bucket_id).local_name
            case blueprint.SecretId(secret=secret_id):
                return blueprint.secret(secret_id).local_name
            case blueprint.CacheUrl():
                return cache_url
            case blueprint.OriginSecret():
                return overrides[ORIGIN_SECRET_PARAM]
            case blueprint.FunctionArn(function=function_id):
                return function_arn(function_id)
            case blueprint.StateMachineArn(state_machine=sm_id):
                return state_machine_arn(sm_id)
            case blueprint.WarmStartTarget(function=function_id):
                return warm_start_target(function_id)
            case blueprint.Param(name=name, default=default):
                return overrides.get(name, default)
        raise TypeError(f"unknown blueprint reference: {ref!r}")

    return resolve


def function_environment(fn: blueprint.Function, resolve: Resolver) -> dict[str, str]:
    """The environment variables a function runs with (the CDK app sets the same keys)."""
    return {name: resolve(ref) for name, ref in blueprint.function_env(fn).items()}


def state_machine_definition(sm: blueprint.StateMachine, resolve: Resolver) -> str:
    """The ASL text with every ``${Name}`` replaced, as CloudFormation's
    DefinitionSubstitutions do. An unknown placeholder is an error, not a silent leftover."""
    text = sm.path.read_text()

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in sm.substitutions:
            raise KeyError(f"{sm.definition_file}: no blueprint substitution for ${{{name}}}")
        return resolve(sm.substitutions[name])

    return PLACEHOLDER.sub(substitute, text)


# ---------------------------------------------------------------------------
# Provisioning (idempotent: safe on every `make run`)
# ---------------------------------------------------------------------------
def provision(dynamodb_client: DynamoDBClient, sqs_client: SQSClient) -> dict[str, str]:
    """Create every blueprint table (with TTL) and queue (with its DLQ) that is missing.

    Returns queue id -> queue URL, dead-letter queues included (under ``Queue.dlq_id``)."""
    for table in blueprint.TABLES:
        _ensure_table(dynamodb_client, table)
    urls: dict[str, str] = {}
    for queue in blueprint.QUEUES:
        urls.update(_ensure_queue(sqs_client, queue))
    return urls


def provision_buckets(client: Any) -> None:
    """Create every blueprint bucket that is missing, with its lifecycle rules."""
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    for bucket in blueprint.BUCKETS:
        if bucket.local_name not in existing:
            client.create_bucket(Bucket=bucket.local_name)
        client.put_bucket_lifecycle_configuration(
            Bucket=bucket.local_name,
            LifecycleConfiguration={"Rules": lifecycle_rules(bucket)},
        )


def provision_upload_cors(client: Any, site_origins: list[str]) -> None:
    """As on AWS (cdk Buckets.allow_uploads_from): the buckets browsers upload to let the
    site's origin(s) PUT with a Content-Type, nothing else (moto answers the preflight from it)."""
    for bucket in blueprint.BUCKETS:
        if bucket.browser_uploads:
            rule = {"AllowedMethods": ["PUT"], "AllowedOrigins": site_origins, "AllowedHeaders": ["content-type"]}
            client.put_bucket_cors(
                Bucket=bucket.local_name, CORSConfiguration={"CORSRules": [{**rule, "MaxAgeSeconds": 600}]}
            )


def provision_secrets(client: Any, values: Mapping[str, Mapping[str, str]]) -> None:
    """Create (or overwrite) every blueprint secret with its local value, as an operator's
    ``put-secret-value`` would on AWS. ``values``: secret id -> its JSON object."""
    for secret in blueprint.SECRETS:
        value = dict(values[secret.id])
        if set(value) != set(secret.fields):
            raise ValueError(f"secret {secret.id} needs exactly {secret.fields}, got {sorted(value)}")
        body = json.dumps(value)
        try:
            client.create_secret(Name=secret.local_name, Description=secret.description, SecretString=body)
        except client.exceptions.ResourceExistsException:
            client.put_secret_value(SecretId=secret.local_name, SecretString=body)


def _ensure_table(client: DynamoDBClient, table: blueprint.Table) -> None:
    params = create_table_params(table)
    try:
        client.describe_table(TableName=params["TableName"])
    except client.exceptions.ResourceNotFoundException:
        client.create_table(**params)
        client.get_waiter("table_exists").wait(
            TableName=params["TableName"], WaiterConfig={"Delay": 1, "MaxAttempts": 30}
        )
    ttl = ttl_params(table)
    if ttl is None:
        return
    status = client.describe_time_to_live(TableName=ttl["TableName"])["TimeToLiveDescription"]
    if status.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        client.update_time_to_live(**ttl)


def _ensure_queue(client: SQSClient, queue: blueprint.Queue) -> dict[str, str]:
    dlq_request, _ = create_queue_requests(queue)
    dlq_url = _upsert_queue(client, dlq_request)
    # Build the redrive from the DLQ's real ARN (whatever account/region ElasticMQ reports).
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    region, account = dlq_arn.split(":")[3:5]
    _, main_request = create_queue_requests(queue, account=account, region=region)
    return {queue.dlq_id: dlq_url, queue.id: _upsert_queue(client, main_request)}


def _upsert_queue(client: SQSClient, request: dict[str, Any]) -> str:
    try:
        url = client.get_queue_url(QueueName=request["QueueName"])["QueueUrl"]
    except client.exceptions.QueueDoesNotExist:
        return client.create_queue(QueueName=request["QueueName"], Attributes=request["Attributes"])["QueueUrl"]
    # Existing queue: bring its attributes to the declaration (create_queue would refuse).
    client.set_queue_attributes(QueueUrl=url, Attributes=request["Attributes"])
    return url
