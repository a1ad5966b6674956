"""What must hold in the synthesized stack: limits from the blueprint, encryption and
recovery, one least-privilege role per function, the site/API wiring, and a clean
cdk-nag report."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk_nag import AwsSolutionsChecks
from racecap_cdk import constants as c

import blueprint

from .conftest import Synth, TemplateView

# Actions AWS only grants on "*" (Lambda VPC ENIs, X-Ray); nothing else may use "*".
STAR_RESOURCE_ACTIONS = {
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}
# Application Auto Scaling's reads take no resource either: only for a function that moves
# a warm-start floor (the window's pre-warm; tests/infra/test_prewarm.py checks its writes).
WARM_START_READS = {
    "application-autoscaling:DescribeScalableTargets",
    "application-autoscaling:DescribeScheduledActions",
}
TABLE_WRITES = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
QUEUE_CONSUMES = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}
CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # AWS managed cache policy
ALL_VIEWER_EXCEPT_HOST = "b689b0a8-53d0-40ab-baf2-68738e2966ac"  # AWS managed origin request policy


def _listify(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role_statements(view: TemplateView, role_lid: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for lid in view.of_type("AWS::IAM::Policy"):
        props = view.props(lid)
        if any(view.ref_target(r) == role_lid for r in props["Roles"]):
            statements += props["PolicyDocument"]["Statement"]
    return statements


def _referenced(view: TemplateView, resources: list[Any], cfn_type: str) -> set[str | None]:
    """Blueprint ids of the resources of ``cfn_type`` that a statement's Resource names."""
    found: set[str | None] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "Ref" in value or "Fn::GetAtt" in value:
                target = view.ref_target(value)
                if view.resources.get(target, {}).get("Type") == cfn_type:
                    found.add(view.tag(target))
                return
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(resources)
    return found


def _function_role(view: TemplateView, fn_id: str) -> str:
    _, props = view.tagged("AWS::Lambda::Function")[fn_id]
    return view.ref_target(props["Role"])


# ---------------------------------------------------------------------------
# Concurrency and queue triggers
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("fn", blueprint.FUNCTIONS, ids=lambda f: f.id)
def test_reserved_concurrency_is_the_blueprints(view: TemplateView, fn: blueprint.Function) -> None:
    _, props = view.tagged("AWS::Lambda::Function")[fn.id]
    assert props.get("ReservedConcurrentExecutions") == fn.reserved_concurrency


def test_event_sources_never_outrun_their_functions_reserved_concurrency(view: TemplateView) -> None:
    mappings = view.of_type("AWS::Lambda::EventSourceMapping")
    assert len(mappings) == len(blueprint.QUEUE_TRIGGERS)
    for lid in mappings:
        props = view.props(lid)
        fn_lid = view.ref_target(props["FunctionName"])
        fn_id = view.tag(fn_lid)
        trigger = next(t for t in blueprint.QUEUE_TRIGGERS if t.function == fn_id)
        reserved = view.props(fn_lid).get("ReservedConcurrentExecutions")
        assert reserved is not None, f"{fn_id} consumes a queue without reserved concurrency"
        assert 2 <= props["ScalingConfig"]["MaximumConcurrency"] <= reserved
        assert props["BatchSize"] == trigger.batch_size
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert view.tag(view.ref_target(props["EventSourceArn"])) == trigger.queue


# ---------------------------------------------------------------------------
# Queues and tables
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("queue", blueprint.QUEUES, ids=lambda q: q.id)
def test_every_queue_redrives_to_its_own_dead_letter_queue(view: TemplateView, queue: blueprint.Queue) -> None:
    queues = view.tagged("AWS::SQS::Queue")
    _, props = queues[queue.id]
    redrive = props["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == queue.max_receive_count
    assert view.ref_target(redrive["deadLetterTargetArn"]) == queues[queue.dlq_id][0]
    assert props["VisibilityTimeout"] == queue.visibility_timeout_s


def test_every_queue_is_encrypted_and_refuses_plain_http(view: TemplateView) -> None:
    queues = view.of_type("AWS::SQS::Queue")
    assert len(queues) == 2 * len(blueprint.QUEUES) + len(blueprint.async_failure_queues())
    ssl_only: set[str] = set()
    for lid in view.of_type("AWS::SQS::QueuePolicy"):
        props = view.props(lid)
        for st in props["PolicyDocument"]["Statement"]:
            if st["Effect"] == "Deny" and st.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}:
                ssl_only.update(view.ref_target(q) for q in props["Queues"])
    for lid, queue in queues.items():
        props = queue["Properties"]
        assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props, lid
        assert lid in ssl_only, f"{lid} accepts requests without TLS"


@pytest.mark.parametrize("table", blueprint.TABLES, ids=lambda t: t.id)
def test_tables_are_encrypted_recoverable_and_on_demand(view: TemplateView, table: blueprint.Table) -> None:
    lid, props = view.tagged("AWS::DynamoDB::Table")[table.id]
    assert props["SSESpecification"]["SSEEnabled"] is True
    # Runners' personal data under the stack's customer managed key; the rest AWS managed.
    if table.personal_data:
        assert props["SSESpecification"]["SSEType"] == "KMS"
        key = view.ref_target(props["SSESpecification"]["KMSMasterKeyId"])
        assert view.resources[key]["Type"] == "AWS::KMS::Key"
        assert view.props(key)["EnableKeyRotation"] is True
    else:
        assert "KMSMasterKeyId" not in props["SSESpecification"]
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    policy = view.resources[lid]["DeletionPolicy"]
    assert policy == ("Delete" if table.id in c.DISPOSABLE_TABLES else "Retain")


# ---------------------------------------------------------------------------
# Functions and their roles
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("fn", blueprint.FUNCTIONS, ids=lambda f: f.id)
def test_functions_are_python_arm64_traced_and_in_the_vpc(view: TemplateView, fn: blueprint.Function) -> None:
    _, props = view.tagged("AWS::Lambda::Function")[fn.id]
    assert props["Runtime"] == c.PYTHON_RUNTIME == "python3.12"
    assert props["Architectures"] == ["arm64"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert len(props["VpcConfig"]["SubnetIds"]) == 2
    layers = props["Layers"]
    # Lambda extracts layers in order; later ones win: our pinned deps, then our code. Every
    # layer is built by this stack: no ARN written by hand (a guessed version fails deploys).
    assert [view.ref_target(layer) for layer in layers] == [
        lid for lid in view.of_type("AWS::Lambda::LayerVersion") if "Deps" in lid
    ] + [lid for lid in view.of_type("AWS::Lambda::LayerVersion") if "Project" in lid]


def test_each_function_has_its_own_role(view: TemplateView) -> None:
    roles = [_function_role(view, f.id) for f in blueprint.FUNCTIONS]
    assert len(set(roles)) == len(blueprint.FUNCTIONS)
    for role in roles:
        principal = view.props(role)["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        assert principal == {"Service": "lambda.amazonaws.com"}
        assert "ManagedPolicyArns" not in view.props(role)


@pytest.mark.parametrize("fn", blueprint.FUNCTIONS, ids=lambda f: f.id)
def test_roles_reach_only_what_the_blueprint_grants(view: TemplateView, fn: blueprint.Function) -> None:
    statements = _role_statements(view, _function_role(view, fn.id))
    tables = {g.table: g.mode for g in fn.grants if isinstance(g, blueprint.TableAccess)}
    sends = {g.queue for g in fn.grants if isinstance(g, blueprint.QueueAccess) and g.mode == "send"}
    consumes = {g.queue for g in fn.grants if isinstance(g, blueprint.QueueAccess) and g.mode == "consume"}
    consumes |= {t.queue for t in blueprint.QUEUE_TRIGGERS if t.function == fn.id}
    # Lambda's on-failure destination for a function's asynchronous invocations.
    sends |= {q for q, f in blueprint.async_failure_queues().items() if f == fn.id}

    seen_tables: set[str | None] = set()
    seen_queues: set[str | None] = set()
    for st in statements:
        actions = set(_listify(st["Action"]))
        resources = _listify(st["Resource"])
        assert st["Effect"] == "Allow"
        assert not any(a.endswith(":*") or a == "*" for a in actions), st
        if "*" in resources:
            scales = any(isinstance(g, blueprint.ScaleWarmStart) for g in fn.grants)
            allowed = STAR_RESOURCE_ACTIONS | (WARM_START_READS if scales else set())
            assert actions <= allowed, f"{fn.id}: {actions - allowed} on '*'"
        on_tables = _referenced(view, resources, "AWS::DynamoDB::Table")
        on_queues = _referenced(view, resources, "AWS::SQS::Queue")
        seen_tables |= on_tables
        seen_queues |= on_queues
        for table_id in on_tables:
            assert all(a.startswith("dynamodb:") for a in actions)
            if tables.get(str(table_id)) == "read":
                assert not actions & TABLE_WRITES, f"{fn.id} may write {table_id}"
        for queue_id in on_queues:
            assert all(a.startswith("sqs:") for a in actions)
            if queue_id not in consumes:
                assert not actions & QUEUE_CONSUMES, f"{fn.id} may consume {queue_id}"

    assert seen_tables == set(tables)
    assert seen_queues == sends | consumes
    sends_email = any(isinstance(g, blueprint.SendEmail) for g in fn.grants)
    assert any("ses:SendEmail" in _listify(st["Action"]) for st in statements) == sends_email


def test_function_environment_points_at_this_stacks_resources(view: TemplateView) -> None:
    _, props = view.tagged("AWS::Lambda::Function")[blueprint.FUNCTIONS[0].id]
    cache_url = props["Environment"]["Variables"]["CACHE_URL"]
    assert view.label(cache_url) == "CacheUrl"  # rediss://<serverless endpoint>:6379


# ---------------------------------------------------------------------------
# API, site, workflows
# ---------------------------------------------------------------------------
def test_the_stage_throttles_and_logs_every_request(view: TemplateView) -> None:
    (stage,) = view.of_type("AWS::ApiGatewayV2::Stage").values()
    props = stage["Properties"]
    assert props["StageName"] == "$default"
    assert props["DefaultRouteSettings"]["ThrottlingRateLimit"] == c.API_THROTTLE_RATE
    assert props["DefaultRouteSettings"]["ThrottlingBurstLimit"] == c.API_THROTTLE_BURST
    assert "$context.requestId" in props["AccessLogSettings"]["Format"]


def test_director_routes_require_a_jwt(view: TemplateView) -> None:
    director = {r.route_key for r in blueprint.ROUTES if r.auth == "director"}
    for route in view.of_type("AWS::ApiGatewayV2::Route").values():
        props = route["Properties"]
        expected = "JWT" if props["RouteKey"] in director else "NONE"
        assert props.get("AuthorizationType", "NONE") == expected


def test_cloudfront_sends_api_calls_uncached_to_the_http_api(view: TemplateView) -> None:
    (distribution,) = view.of_type("AWS::CloudFront::Distribution").values()
    config = distribution["Properties"]["DistributionConfig"]
    (api,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == c.API_PATH_PATTERN]
    assert api["CachePolicyId"] == CACHING_DISABLED
    assert api["OriginRequestPolicyId"] == ALL_VIEWER_EXCEPT_HOST
    assert set(api["AllowedMethods"]) >= {"GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS"}
    origin = next(o for o in config["Origins"] if o["Id"] == api["TargetOriginId"])
    (api_lid,) = view.of_type("AWS::ApiGatewayV2::Api")
    assert {"Ref": api_lid} in origin["DomainName"]["Fn::Join"][1]
    assert origin["CustomOriginConfig"]["OriginProtocolPolicy"] == "https-only"
    default = config["DefaultCacheBehavior"]
    s3_origin = next(o for o in config["Origins"] if o["Id"] == default["TargetOriginId"])
    assert "OriginAccessControlId" in s3_origin


@pytest.mark.parametrize("sm", blueprint.STATE_MACHINES, ids=lambda s: s.id)
def test_state_machine_invokes_the_functions_it_names(view: TemplateView, sm: blueprint.StateMachine) -> None:
    _, props = view.tagged("AWS::StepFunctions::StateMachine")[sm.id]
    functions = view.tagged("AWS::Lambda::Function")
    role = view.ref_target(props["RoleArn"])
    invokable = [
        r
        for st in _role_statements(view, role)
        if "lambda:InvokeFunction" in _listify(st["Action"])
        for r in _listify(st["Resource"])
    ]
    for name, ref in sm.substitutions.items():
        assert f"${{{name}}}" in props["DefinitionString"]
        if isinstance(ref, blueprint.FunctionArn):
            arn = {"Fn::GetAtt": [functions[ref.function][0], "Arn"]}
            assert props["DefinitionSubstitutions"][name] == arn
            assert arn in invokable
    assert props["LoggingConfiguration"]["Level"] == "ALL"
    assert props["TracingConfiguration"] == {"Enabled": True}


# ---------------------------------------------------------------------------
# cdk-nag
# ---------------------------------------------------------------------------
def test_cdk_nag_finds_nothing_unacknowledged(synth: Synth) -> None:
    report = AwsSolutionsChecks(synth.app).validate_scope(synth.app)
    findings = [f"{v.rule_name} at {r.construct_path}" for v in report.violations for r in v.violating_resources]
    assert findings == []
    assert report.success


# ---------------------------------------------------------------------------
# Cold starts: SnapStart or provisioned concurrency per API function (docs/cold-starts.md)
# ---------------------------------------------------------------------------
def _alias_of(view: TemplateView, fn_logical_id: str) -> tuple[str, dict[str, Any]]:
    aliases = [
        (lid, props)
        for lid in view.of_type("AWS::Lambda::Alias")
        if view.ref_target((props := view.props(lid))["FunctionName"]) == fn_logical_id
    ]
    assert len(aliases) == 1, aliases
    return aliases[0]


@pytest.mark.parametrize("fn", [f for f in blueprint.FUNCTIONS if f.warm_start], ids=lambda f: f.id)
def test_given_a_warm_started_api_function_then_the_api_calls_its_live_alias_and_it_is_set_up_as_declared(
    view: TemplateView, fn: blueprint.Function
) -> None:
    fn_lid, props = view.tagged("AWS::Lambda::Function")[fn.id]
    alias_lid, alias = _alias_of(view, fn_lid)
    assert alias["Name"] == "live"
    integrations = [
        view.ref_target(view.props(i)["IntegrationUri"]) for i in view.of_type("AWS::ApiGatewayV2::Integration")
    ]
    assert alias_lid in integrations and fn_lid not in integrations
    scaling = [
        view.props(t)
        for t in view.of_type("AWS::ApplicationAutoScaling::ScalableTarget")
        if alias_lid in json.dumps(view.props(t)["ResourceId"])
    ]
    if fn.warm_start == "snapstart":
        assert props["SnapStart"] == {"ApplyOn": "PublishedVersions"}
        assert scaling == []  # the two cannot share a function
    else:
        assert "SnapStart" not in props
        assert [(t["MinCapacity"], t["MaxCapacity"]) for t in scaling] == [(0, fn.provisioned_max)]
        assert scaling[0]["ScalableDimension"] == "lambda:function:ProvisionedConcurrency"


# Runner-facing, yet cold: a runner's own entry (days after the opening, a few at a time), and the
# opening's waiting room (a cold start there is a fraction of a second of a wait counted in
# minutes, and no runner's place: before the opening the order is a lottery).
RUNNER_FACING_COLD = {"MyRegistrationApi", "QueueApi"}


def test_only_the_runner_facing_api_functions_are_warm_started() -> None:
    # Runners arrive in bursts; directors do not, and SnapStart's cache is billed every idle
    # hour, so the director-only functions stay cold (docs/cold-starts.md), and so do the two
    # runner-facing ones above.
    runner_facing = {r.function for r in blueprint.ROUTES if r.auth != "director"} - RUNNER_FACING_COLD
    assert {f.id for f in blueprint.FUNCTIONS if f.warm_start} == runner_facing
