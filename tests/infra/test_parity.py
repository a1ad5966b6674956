"""THE PARITY TEST: what the synthesized CloudFormation template declares is what the
local stack creates.

Each test extracts a structure from the template JSON (found through the
``racecap:blueprint-id`` tag, never through the blueprint's own values) and the same
structure from what the local stack sends (``local.provision``, which ``local/stack.py``
uses), then compares the two. References are rendered on both sides as labels such as
``TableName:Races`` or ``Param:EmailFrom=<default>`` (see ``conftest.TemplateView.label``),
so a function pointed at the wrong table, or a changed parameter default, fails here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from racecap_cdk import constants as c
from racecap_cdk.constructs.state_machines import read_definition

import blueprint
from local import provision

from .conftest import TemplateView

Label = Callable[[blueprint.Ref], str]

# SQS attributes both sides may set; anything either side sets must match on the other.
QUEUE_ATTRIBUTES = (
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "FifoQueue",
)


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
def _table_shape(params: dict[str, Any]) -> dict[str, Any]:
    """The comparable core of a table, from CloudFormation props or create_table kwargs."""
    return {
        "BillingMode": params.get("BillingMode"),
        "KeySchema": params["KeySchema"],
        "AttributeDefinitions": sorted(params["AttributeDefinitions"], key=lambda a: a["AttributeName"]),
        "GlobalSecondaryIndexes": sorted(
            (
                {"IndexName": g["IndexName"], "KeySchema": g["KeySchema"], "Projection": g["Projection"]}
                for g in params.get("GlobalSecondaryIndexes", [])
            ),
            key=lambda g: g["IndexName"],
        ),
    }


def test_the_same_tables_exist_on_both_sides(view: TemplateView) -> None:
    local_names = {provision.create_table_params(t)["TableName"] for t in blueprint.TABLES}
    cloud = view.tagged("AWS::DynamoDB::Table")
    assert {blueprint.table(i).local_name for i in cloud} == local_names
    assert len(view.of_type("AWS::DynamoDB::Table")) == len(cloud), "an untagged table crept in"


@pytest.mark.parametrize("table", blueprint.TABLES, ids=lambda t: t.id)
def test_table_keys_indexes_and_billing_match(view: TemplateView, table: blueprint.Table) -> None:
    _, cloud = view.tagged("AWS::DynamoDB::Table")[table.id]
    local = provision.create_table_params(table)
    assert _table_shape(cloud) == _table_shape(local)


@pytest.mark.parametrize("table", blueprint.TABLES, ids=lambda t: t.id)
def test_table_ttl_matches(view: TemplateView, table: blueprint.Table) -> None:
    _, cloud = view.tagged("AWS::DynamoDB::Table")[table.id]
    local = provision.ttl_params(table)
    assert cloud.get("TimeToLiveSpecification") == (local and local["TimeToLiveSpecification"])


# ---------------------------------------------------------------------------
# Queues
# ---------------------------------------------------------------------------
def _cloud_queue(view: TemplateView, queue_id: str) -> dict[str, Any]:
    _, props = view.tagged("AWS::SQS::Queue")[queue_id]
    shape: dict[str, Any] = {k: int(props[k]) for k in QUEUE_ATTRIBUTES if k in props}
    if "RedrivePolicy" in props:
        redrive = props["RedrivePolicy"]
        dlq = view.tag(view.ref_target(redrive["deadLetterTargetArn"]))
        shape["RedrivePolicy"] = {"maxReceiveCount": int(redrive["maxReceiveCount"]), "dlq": dlq}
    return shape


def _local_queue(request: dict[str, Any]) -> dict[str, Any]:
    attrs = request["Attributes"]
    shape: dict[str, Any] = {k: int(attrs[k]) for k in QUEUE_ATTRIBUTES if k in attrs}
    if "RedrivePolicy" in attrs:
        redrive = json.loads(attrs["RedrivePolicy"])
        dlq_name = redrive["deadLetterTargetArn"].rsplit(":", 1)[-1]
        dlq = next(q.dlq_id for q in blueprint.QUEUES if q.dlq_local_name == dlq_name)
        shape["RedrivePolicy"] = {"maxReceiveCount": int(redrive["maxReceiveCount"]), "dlq": dlq}
    return shape


def test_the_same_queues_exist_on_both_sides(view: TemplateView) -> None:
    local = {r["QueueName"] for q in blueprint.QUEUES for r in provision.create_queue_requests(q)}
    # Failures queues are AWS-only: the local scheduler and object watcher call functions directly.
    aws_only = set(blueprint.async_failure_queues())
    cloud = {bp_id: v for bp_id, v in view.tagged("AWS::SQS::Queue").items() if bp_id not in aws_only}
    by_local_name = {q.local_name: q.id for q in blueprint.QUEUES} | {
        q.dlq_local_name: q.dlq_id for q in blueprint.QUEUES
    }
    assert {by_local_name[name] for name in local} == set(cloud)
    assert len(view.of_type("AWS::SQS::Queue")) == len(cloud) + len(aws_only), "an untagged queue crept in"


@pytest.mark.parametrize("queue", blueprint.QUEUES, ids=lambda q: q.id)
def test_queue_and_its_dead_letter_queue_match(view: TemplateView, queue: blueprint.Queue) -> None:
    dlq_request, main_request = provision.create_queue_requests(queue)
    assert _cloud_queue(view, queue.id) == _local_queue(main_request)
    assert _cloud_queue(view, queue.dlq_id) == _local_queue(dlq_request)


# ---------------------------------------------------------------------------
# Functions
# ---------------------------------------------------------------------------
def test_the_same_functions_exist_on_both_sides(view: TemplateView) -> None:
    cloud = view.tagged("AWS::Lambda::Function")
    assert set(cloud) == {f.id for f in blueprint.FUNCTIONS}


@pytest.mark.parametrize("fn", blueprint.FUNCTIONS, ids=lambda f: f.id)
def test_function_runs_the_same_handler_with_the_same_environment(
    view: TemplateView, label: Label, fn: blueprint.Function
) -> None:
    _, cloud = view.tagged("AWS::Lambda::Function")[fn.id]
    cloud_env = {k: view.label(v) for k, v in cloud["Environment"]["Variables"].items()}
    local_env = provision.function_environment(fn, label)

    # The local runtime imports fn.path/<module>.py and calls <attr>: the same handler string.
    assert cloud["Handler"] == f"{fn.module}.{fn.attr}"
    assert (fn.path / f"{fn.module.replace('.', '/')}.py").is_file()
    assert cloud["Runtime"] == c.PYTHON_RUNTIME
    assert set(cloud_env) == set(local_env)
    assert cloud_env == local_env  # literal values equal, references point at the same thing


@pytest.mark.parametrize("fn", blueprint.FUNCTIONS, ids=lambda f: f.id)
def test_function_limits_match(view: TemplateView, fn: blueprint.Function) -> None:
    _, cloud = view.tagged("AWS::Lambda::Function")[fn.id]
    # The local runtime gives each invocation fn.timeout_s and fn.memory_mb (local/runtime.py),
    # and the local pollers cap consumers at fn.reserved_concurrency (local/pollers.py).
    assert cloud.get("ReservedConcurrentExecutions") == fn.reserved_concurrency
    assert cloud["Timeout"] == fn.timeout_s
    assert cloud["MemorySize"] == fn.memory_mb


# ---------------------------------------------------------------------------
# Routes: the local gateway serves exactly blueprint.ROUTES
# ---------------------------------------------------------------------------
def _cloud_routes(view: TemplateView) -> dict[str, tuple[str | None, str]]:
    """Route key -> (function blueprint id, authorization type)."""
    out: dict[str, tuple[str | None, str]] = {}
    for lid in view.of_type("AWS::ApiGatewayV2::Route"):
        props = view.props(lid)
        target = props["Target"]["Fn::Join"][1]
        assert target[0] == "integrations/"
        integration = view.props(view.ref_target(target[1]))
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert integration["PayloadFormatVersion"] == "2.0"
        target_id = view.ref_target(integration["IntegrationUri"])
        if view.resources[target_id]["Type"] == "AWS::Lambda::Alias":  # a warm-started function's
            target_id = view.ref_target(view.props(target_id)["FunctionName"])
        fn = view.tag(target_id)
        out[props["RouteKey"]] = (fn, props.get("AuthorizationType", "NONE"))
    return out


def test_the_api_serves_the_same_routes_as_the_local_gateway(view: TemplateView) -> None:
    cloud = _cloud_routes(view)
    assert set(cloud) == {r.route_key for r in blueprint.ROUTES}
    expected = {r.route_key: (r.function, "JWT" if r.auth == "director" else "NONE") for r in blueprint.ROUTES}
    assert cloud == expected


# ---------------------------------------------------------------------------
# Event-source mappings: the local pollers run blueprint.QUEUE_TRIGGERS
# ---------------------------------------------------------------------------
def test_event_source_mappings_match_the_local_pollers(view: TemplateView) -> None:
    cloud = set()
    for lid in view.of_type("AWS::Lambda::EventSourceMapping"):
        props = view.props(lid)
        cloud.add(
            (
                view.tag(view.ref_target(props["FunctionName"])),
                view.tag(view.ref_target(props["EventSourceArn"])),
                props["BatchSize"],
                props["ScalingConfig"]["MaximumConcurrency"],
                "ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
                props.get("MaximumBatchingWindowInSeconds", 0),
            )
        )
    # The local poller reads the same fields and honours batchItemFailures (local/pollers.py).
    local = {
        (t.function, t.queue, t.batch_size, t.max_concurrency, True, t.max_batching_window_s)
        for t in blueprint.QUEUE_TRIGGERS
    }
    assert cloud == local


def _rate(minutes: int) -> str:
    """EventBridge's rate() as CDK writes it: whole hours in hours, singular for one."""
    n, unit = (minutes // 60, "hour") if minutes % 60 == 0 else (minutes, "minute")
    return f"rate({n} {unit}{'' if n == 1 else 's'})"


def test_schedules_match_the_local_scheduler(view: TemplateView) -> None:
    cloud = {}
    for bp_id, (_, props) in view.tagged("AWS::Events::Rule").items():
        (target,) = props["Targets"]
        cloud[bp_id] = (view.tag(view.ref_target(target["Arn"])), props["ScheduleExpression"])
    local = {s.id: (s.function, _rate(s.every_minutes)) for s in blueprint.SCHEDULES}
    assert cloud == local


# ---------------------------------------------------------------------------
# State machines: the same ASL, the same substitutions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("sm", blueprint.STATE_MACHINES, ids=lambda s: s.id)
def test_state_machine_definition_matches_the_local_one(
    view: TemplateView, label: Label, sm: blueprint.StateMachine
) -> None:
    _, cloud = view.tagged("AWS::StepFunctions::StateMachine")[sm.id]
    assert cloud["StateMachineType"] == sm.type
    substitutions = {name: view.label(value) for name, value in cloud.get("DefinitionSubstitutions", {}).items()}
    rendered = provision.PLACEHOLDER.sub(lambda m: substitutions[m.group(1)], cloud["DefinitionString"])

    local = provision.state_machine_definition(sm, label)

    assert json.loads(rendered) == json.loads(local)
    assert provision.PLACEHOLDER.search(local) is None


def test_an_unknown_placeholder_fails_on_both_sides(tmp_path: Any) -> None:
    asl = tmp_path / "bad.asl.json"
    asl.write_text('{"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "${Nope}", "End": true}}}')
    sm = blueprint.StateMachine("Bad", str(asl), substitutions={})
    with pytest.raises(KeyError, match="Nope"):
        provision.state_machine_definition(sm, str)
    with pytest.raises(ValueError, match="Nope"):
        read_definition(sm)
