"""One Lambda function per ``blueprint.FUNCTIONS`` entry, each with its own role.

Python on arm64, traced, inside the VPC's isolated subnets, with three layers: the
Powertools public layer, the pinned dependencies (``make layers``) and our own
``racecap`` package. The role starts with only logs, ENIs and X-Ray; what the function
may touch is added from its blueprint grants (``racecap_cdk.grants``).
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack, Tags
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

import blueprint

from .. import constants as c
from ..refs import RefResolver
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

_DEPS_README = """\
Filled by `make layers`: the pinned run-time dependencies (requirements.txt) installed
for python3.12/arm64 under python/. Created empty by the CDK app so synth works offline.
"""


def _deps_layer_dir() -> str:
    if not c.DEPS_LAYER_DIR.exists():
        c.DEPS_LAYER_DIR.mkdir(parents=True)
        (c.DEPS_LAYER_DIR / "README.md").write_text(_DEPS_README)
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
            lambda_.LayerVersion.from_layer_version_arn(
                self, c.POWERTOOLS_LAYER_ID, c.POWERTOOLS_LAYER_ARN.format(region=Stack.of(self).region)
            ),
            # Lambda extracts layers in this order and later ones win on /opt clashes: our pinned
            # deps over the public layer. (cdk.json must not set recognizeLayerVersion: that flag
            # sorts layers by construct path. tests/infra asserts the order.)
            self._layer(c.DEPS_LAYER_ID, _deps_layer_dir(), "Racecap pinned run-time dependencies"),
            self._layer(c.PROJECT_LAYER_ID, str(c.PROJECT_LAYER_DIR), "Racecap domain and adapters (racecap)"),
        ]

    def _layer(self, layer_id: str, path: str, description: str) -> lambda_.LayerVersion:
        return lambda_.LayerVersion(
            self,
            layer_id,
            code=lambda_.Code.from_asset(path, exclude=c.ASSET_EXCLUDES),
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
            # (README, "Cold starts") raises the floor just before it opens.
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
            code=lambda_.Code.from_asset(str(decl.path), exclude=c.ASSET_EXCLUDES),
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
        Tags.of(scope).add(c.BLUEPRINT_TAG, decl.id)
        self.roles[decl.id] = role
        return fn
