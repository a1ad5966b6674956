"""The one place blueprint references become CloudFormation values.

The local stack resolves the same ``blueprint.Ref`` values to local names and URLs
(``local/provision.py``); here they become tokens. Functions and state machines can
refer to each other, so their references resolve lazily, at synth time, once both exist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import jsii
from aws_cdk import CfnParameter, IStableStringProducer, Lazy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

import blueprint


@jsii.implements(IStableStringProducer)
class _Late:
    def __init__(self, produce: Callable[[], str]) -> None:
        self._produce = produce

    def produce(self) -> str | None:
        return self._produce()


@dataclass
class Registry:
    """What the stack has built so far, by blueprint id."""

    tables: dict[str, dynamodb.Table] = field(default_factory=dict)
    queues: dict[str, sqs.Queue] = field(default_factory=dict)
    dead_letter_queues: dict[str, sqs.Queue] = field(default_factory=dict)
    buckets: dict[str, s3.Bucket] = field(default_factory=dict)
    secrets: dict[str, secretsmanager.Secret] = field(default_factory=dict)
    functions: dict[str, lambda_.Function] = field(default_factory=dict)
    state_machines: dict[str, sfn.StateMachine] = field(default_factory=dict)
    cache_url: str | None = None
    origin_secret: secretsmanager.ISecret | None = None


class RefResolver:
    """Turns a ``blueprint.Ref`` into a string (literal or token) for this stack."""

    def __init__(self, scope: Construct, registry: Registry) -> None:
        self._scope = scope
        self._registry = registry
        self._params: dict[str, CfnParameter] = {}

    def __call__(self, ref: blueprint.Ref) -> str:
        reg = self._registry
        match ref:
            case str():
                return ref
            case blueprint.TableName(table=table_id):
                return reg.tables[table_id].table_name
            case blueprint.QueueUrl(queue=queue_id):
                return reg.queues[queue_id].queue_url
            case blueprint.BucketName(bucket=bucket_id):
                return reg.buckets[bucket_id].bucket_name
            case blueprint.SecretId(secret=secret_id):
                return reg.secrets[secret_id].secret_arn
            case blueprint.CacheUrl():
                if reg.cache_url is None:
                    raise KeyError("the cache must be built before anything refers to it")
                return reg.cache_url
            case blueprint.OriginSecret():
                if reg.origin_secret is None:
                    raise KeyError("the origin secret must be built before anything refers to it")
                # A CloudFormation dynamic reference: the value never appears in the template.
                return reg.origin_secret.secret_value.unsafe_unwrap()
            case blueprint.FunctionArn(function=function_id):
                blueprint.function(function_id)  # fail now on a typo, not at synth
                return Lazy.string(_Late(lambda: reg.functions[function_id].function_arn))
            case blueprint.StateMachineArn(state_machine=sm_id):
                blueprint.state_machine(sm_id)
                return Lazy.string(_Late(lambda: reg.state_machines[sm_id].state_machine_arn))
            case blueprint.WarmStartTarget(function=function_id):
                blueprint.function(function_id)
                return Lazy.string(
                    _Late(lambda: f"function:{reg.functions[function_id].function_name}:{blueprint.LIVE_ALIAS}")
                )
            case blueprint.Param():
                return self._param(ref).value_as_string
        raise TypeError(f"unknown blueprint reference: {ref!r}")

    def resolve_all(self, refs: dict[str, blueprint.Ref]) -> dict[str, str]:
        return {name: self(ref) for name, ref in refs.items()}

    def _param(self, param: blueprint.Param) -> CfnParameter:
        # One CloudFormation parameter per blueprint Param name, however many users.
        if param.name not in self._params:
            self._params[param.name] = CfnParameter(self._scope, param.name, type="String", default=param.default)
        return self._params[param.name]
