"""One Lambda function per ``blueprint.FUNCTIONS`` entry, each with its own role.

Python on arm64, traced, inside the VPC's isolated subnets, with two layers: the
pinned dependencies (``make layers``: Powertools at the version the tests run, pydantic,
redis, ...) and our own ``racecap`` package. The role starts with only logs, ENIs and X-Ray; what the function
may touch is added from its blueprint grants (``racecap_cdk.grants``).
"""

from __future__ import annotations

import re
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

import blueprint

from .. import constants as c
from ..bytecode import code_asset
from ..refs import RefResolver
from ..scanners import WHY_CDK_DEPENDS_ON, WHY_LOGS_NO_CMK, suppress
from .network import Network

RUNTIME = lambda_.Runtime(c.PYTHON_RUNTIME, lambda_.RuntimeFamily.PYTHON)

# Lambda needs these to attach a function to a VPC; none supports resource-level scoping.
_ENI_ACTIONS = [
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
]

WHY_ENV_KEY = (
    "The environment holds resource names, URLs and the origin-verify value (not personal data), encrypted "
    "at rest by Lambda's AWS managed key; a customer managed key would add a KMS call to every cold start."
)
WHY_STAR_POLICY = (
    "Resource '*' only for Lambda's VPC ENI actions and X-Ray, which support no resource-level scoping; every "
    "data action names its table, queue or state machine (tests/infra/test_stack.py)."
)
WHY_OWN_LOG_GROUP = (
    "The function logs to its own log group (LoggingConfig.LogGroup, retention one month), not to "
    "/aws/lambda/<name>, which this rule looks for."
)
WHY_UNCAPPED = (
    "Reserved concurrency deliberately unset: an API function must scale with the opening burst (the stage "
    "throttles first), and the window tasks run a few times per race; a cap would only carve capacity out of "
    "the account's pool."
)


def why_no_dead_letter_queue(decl: blueprint.Function) -> str:
    """How this function's failures are kept, given how the blueprint invokes it."""
    if blueprint.routes_for(decl.id):
        return "Invoked synchronously by API Gateway: the caller gets the error; nothing to dead-letter."
    if any(t.function == decl.id for t in blueprint.QUEUE_TRIGGERS):
        return "Invoked by an SQS event source: a failing record goes to its queue's own dead-letter queue."
    if any(s.function == decl.id for s in blueprint.SCHEDULES):
        return "Invoked by a schedule: async failures go to its EventInvokeConfig on-failure destination."
    if any(t.function == decl.id for t in blueprint.OBJECT_TRIGGERS):
        return (
            "Invoked asynchronously by S3 object notifications: Lambda retries an event twice, then sends it "
            "to the trigger's failures queue (its EventInvokeConfig on-failure destination)."
        )
    if any(
        isinstance(ref, blueprint.FunctionArn) and ref.function == decl.id
        for sm in blueprint.STATE_MACHINES
        for ref in sm.substitutions.values()
    ):
        return "Invoked synchronously by Step Functions, whose Retry and Catch handle its failures."
    raise ValueError(f"{decl.id}: no invoker declared, so no answer for where its failures go")


_DEPS_README = """\
Filled by `make layers`: the pinned run-time dependencies (requirements.txt) installed
for python3.12/arm64 under python/. Created empty by the CDK app so synth works offline.
"""


class DepsLayerError(RuntimeError):
    """The built deps layer does not carry the pinned Powertools (rebuild it: ``make layers``)."""


def pinned_version(package: str, requirements: str) -> str:
    """The ``==`` pin of ``package`` (extras allowed) in a requirements file's text."""
    match = re.search(rf"^{re.escape(package)}(\[[^\]]*\])?==([^\s;#]+)", requirements, re.MULTILINE)
    if match is None:
        raise DepsLayerError(f"{package} is not pinned with == in the requirements")
    return match.group(2)


def check_deps_layer(layer_dir: Path, requirements: str) -> None:
    """A built layer (``python/`` present) must hold exactly the pinned Powertools."""
    site = layer_dir / "python"
    if not site.is_dir():
        return  # not built: synth offline / tests; `make deploy` always builds it first
    pin = pinned_version("aws-lambda-powertools", requirements)
    found = sorted(p.name for p in site.glob("aws_lambda_powertools-*.dist-info"))
    if found != [f"aws_lambda_powertools-{pin}.dist-info"]:
        raise DepsLayerError(f"deps layer has {found or 'no Powertools'}, requirements.txt pins {pin}: run make layers")


def _deps_layer_dir() -> str:
    if not c.DEPS_LAYER_DIR.exists():
        c.DEPS_LAYER_DIR.mkdir(parents=True)
        (c.DEPS_LAYER_DIR / "README.md").write_text(_DEPS_README)
    check_deps_layer(c.DEPS_LAYER_DIR, c.REQUIREMENTS_FILE.read_text())
    return str(c.DEPS_LAYER_DIR)


class Functions(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, network: Network, resolve: RefResolver) -> None:
        super().__init__(scope, construct_id)
        self._network = network
        self._resolve = resolve
        self.layers = self._layers()
        self.by_id: dict[str, lambda_.Function] = {}
        # What callers invoke: the "live" alias of a warm-started function, else the function.
        self.entry_points: dict[str, lambda_.IFunction] = {}
        self.roles: dict[str, iam.Role] = {}
        for decl in blueprint.FUNCTIONS:
            self.by_id[decl.id] = self._function(decl)
            self.entry_points[decl.id] = self._entry_point(decl, self.by_id[decl.id])

    def _layers(self) -> list[lambda_.ILayerVersion]:
        return [
            # Lambda extracts layers in this order and later ones win on /opt clashes: our code
            # last. (cdk.json must not set recognizeLayerVersion: that flag sorts layers by
            # construct path. tests/infra asserts the order.)
            self._layer(c.DEPS_LAYER_ID, _deps_layer_dir(), "Racecap pinned run-time dependencies"),
            self._layer(c.PROJECT_LAYER_ID, str(c.PROJECT_LAYER_DIR), "Racecap domain and adapters (racecap)"),
        ]

    def _layer(self, layer_id: str, path: str, description: str) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            layer_id,
            code=code_asset(path),
            description=description,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[lambda_.Architecture.ARM_64],
        )

    def _entry_point(self, decl: blueprint.Function, fn: lambda_.Function) -> lambda_.IFunction:
        """SnapStart snapshots published versions only, and provisioned concurrency is set on
        an alias: both need the HTTP API to call a version through an alias."""
        if decl.warm_start is None:
            return fn
        alias = lambda_.Alias(fn, c.LIVE_ALIAS_ID, alias_name=c.LIVE_ALIAS_NAME, version=fn.current_version)
        if decl.warm_start == "provisioned":
            # Zero outside registration windows (no idle cost); a window's scheduled action
            # (docs/cold-starts.md) raises the floor just before it opens.
            alias.add_auto_scaling(min_capacity=0, max_capacity=decl.provisioned_max)
        return alias

    def _function(self, decl: blueprint.Function) -> lambda_.Function:
        scope = Construct(self, decl.id)
        log_group = logs.LogGroup(
            scope,
            c.LOG_GROUP_ID,
            retention=c.LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            scope,
            c.ROLE_ID,
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Racecap {decl.id}: only what its blueprint grants allow",
        )
        log_group.grant_write(role)
        role.add_to_policy(iam.PolicyStatement(actions=_ENI_ACTIONS, resources=["*"]))
        fn = lambda_.Function(
            scope,
            c.FUNCTION_ID,
            description=decl.description,
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            code=code_asset(decl.path),
            handler=decl.handler,
            memory_size=decl.memory_mb,
            timeout=Duration.seconds(decl.timeout_s),
            reserved_concurrent_executions=decl.reserved_concurrency,
            tracing=lambda_.Tracing.ACTIVE,
            environment=self._resolve.resolve_all(blueprint.function_env(decl)),
            layers=self.layers,
            role=role,
            log_group=log_group,
            vpc=self._network.vpc,
            vpc_subnets=self._network.subnets,
            security_groups=self._network.security_groups(decl.needs_cache),
        )
        if decl.warm_start == "snapstart":
            # Lambda takes SnapStart for python3.12+ (since Nov 2024); this CDK release's
            # SnapStartConf still refuses Python runtimes, hence the property itself.
            cfn = fn.node.default_child
            assert isinstance(cfn, lambda_.CfnFunction)
            cfn.add_property_override("SnapStart", {"ApplyOn": "PublishedVersions"})
        # The role's policy must exist before Lambda validates the VPC configuration.
        fn.node.add_dependency(role)
        suppress(log_group, "checkov", "CKV_AWS_158", WHY_LOGS_NO_CMK)
        suppress(fn, "checkov", "CKV_AWS_173", WHY_ENV_KEY)
        suppress(fn, "checkov", "CKV_AWS_116", why_no_dead_letter_queue(decl))
        if decl.reserved_concurrency is None:
            suppress(fn, "checkov", "CKV_AWS_115", WHY_UNCAPPED)
        suppress(role.node.find_child("DefaultPolicy"), "checkov", "CKV_AWS_111", WHY_STAR_POLICY)
        suppress(fn, "cfn-lint", "W3005", WHY_CDK_DEPENDS_ON)
        suppress(fn, "cfn-lint", "WS1004", WHY_OWN_LOG_GROUP)
        Tags.of(scope).add(c.BLUEPRINT_TAG, decl.id)
        self.roles[decl.id] = role
        return fn
