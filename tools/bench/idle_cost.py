"""(f) What a deployed stage costs per month when nobody registers: computed from the template.

    python -m tools.bench.idle_cost          # synthesizes the CDK app, prints the budget line by line
    python -m tools.bench.idle_cost --json   # (``make bench`` records it as ``f_idle_monthly_cost``)

Every resource of the synthesized template is either priced here (a fixed hourly or monthly
charge: interface endpoints, NAT, instances and their disks and public IPv4 addresses, the
cache's minimum, WAF, KMS keys, secrets, dashboards, alarms, SnapStart, provisioned
concurrency) or listed in ``USAGE_ONLY`` (billed per request, per GB or not at all). A
resource type in neither fails ``idle_budget``: a new fixed cost cannot slip in unpriced.

Prices: us-east-1 on-demand, 730 hours a month, free tiers ignored (check before quoting).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tools.bench.section import Bench, Section

ROOT = Path(__file__).resolve().parents[2]
HOURS = 730
TARGET_USD = 30.0

PRICE = {
    "interface_endpoint_az_hour": 0.01,
    "nat_gateway_hour": 0.045,
    "public_ipv4_hour": 0.005,
    "gp3_gb_month": 0.08,
    "valkey_serverless_gb_hour": 0.084,  # ElastiCache Serverless for Valkey, data stored
    "valkey_serverless_min_gb": 0.1,  # billed for at least 100 MB
    "redis_serverless_gb_hour": 0.125,
    "redis_serverless_min_gb": 1.0,
    "waf_web_acl_month": 5.0,
    "waf_rule_month": 1.0,
    "kms_key_month": 1.0,
    "secret_month": 0.40,
    "dashboard_month": 3.0,
    "alarm_month": 0.10,
    "snapstart_cache_gb_s": 0.0000015046,  # Python/.NET SnapStart: the cached snapshot, per GB-second
    "provisioned_concurrency_gb_s_arm64": 0.0000033334,
    "provisioned_concurrency_gb_s_x86": 0.0000041667,
}
INSTANCE_HOUR = {"t4g.nano": 0.0042, "t4g.micro": 0.0084, "t4g.small": 0.0168, "t3.nano": 0.0052, "t3.micro": 0.0104}
DEFAULT_ROOT_VOLUME_GB = 8  # Amazon Linux 2023's root volume when the template does not size it

# Billed per use (or free): nothing on a quiet day.
USAGE_ONLY = frozenset(
    {
        "AWS::ApiGatewayV2::Api",
        "AWS::ApiGatewayV2::Authorizer",
        "AWS::ApiGatewayV2::Integration",
        "AWS::ApiGatewayV2::Route",
        "AWS::ApiGatewayV2::Stage",
        "AWS::CloudFront::Distribution",
        "AWS::CloudFront::OriginAccessControl",
        "AWS::Cognito::UserPool",
        "AWS::Cognito::UserPoolClient",
        "AWS::Cognito::UserPoolUser",  # billed per monthly active user: the smoke director, when it runs
        "AWS::DynamoDB::Table",
        "AWS::EC2::FlowLog",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::Route",
        "AWS::EC2::RouteTable",
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::SecurityGroupEgress",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::Subnet",
        "AWS::EC2::SubnetRouteTableAssociation",
        "AWS::EC2::VPC",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::EgressOnlyInternetGateway",
        "AWS::EC2::VPCCidrBlock",
        "AWS::Events::Rule",
        "AWS::IAM::InstanceProfile",
        "AWS::IAM::ManagedPolicy",
        "AWS::IAM::Policy",
        "AWS::IAM::Role",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Lambda::LayerVersion",
        "AWS::Lambda::Permission",
        "AWS::Lambda::EventInvokeConfig",  # retry and on-failure settings: no charge of its own
        "AWS::Lambda::Alias",
        "AWS::Lambda::Function",  # priced only with SnapStart (below)
        "AWS::Logs::LogGroup",
        "AWS::S3::Bucket",
        "AWS::S3::BucketPolicy",
        "AWS::SQS::Queue",
        "AWS::SQS::QueuePolicy",
        "AWS::StepFunctions::StateMachine",
        "Custom::CDKBucketDeployment",
        "AWS::SecretsManager::SecretTargetAttachment",
        "AWS::KMS::Alias",
        "AWS::WAFv2::WebACLAssociation",
        "AWS::Scheduler::Schedule",
        "AWS::CloudWatch::CompositeAlarm",
        "AWS::SNS::Topic",
        "AWS::SNS::Subscription",
        "AWS::SNS::TopicPolicy",
        "AWS::CDK::Metadata",
        "AWS::Lambda::Url",
        "AWS::CloudFront::CachePolicy",
        "AWS::CloudFront::OriginRequestPolicy",
        "AWS::CloudFront::ResponseHeadersPolicy",
        "AWS::CloudFront::Function",  # the console's index rewrite: per invocation, nothing idle
        "Custom::S3BucketNotifications",
        "Custom::AWS",
    }
)


@dataclass(frozen=True)
class Line:
    item: str
    resource: str  # logical id
    quantity: str
    monthly_usd: float


class UnpricedResource(ValueError):
    """The template holds a resource type this model neither prices nor knows to be usage-only."""


def idle_budget(template: Mapping[str, Any]) -> list[Line]:
    """One line per fixed monthly charge of ``template`` (a CloudFormation template as JSON)."""
    resources: dict[str, Any] = template["Resources"]
    lines: list[Line] = []
    unpriced: set[str] = set()
    for lid, res in sorted(resources.items()):
        kind, props = res["Type"], res.get("Properties", {})
        priced = _price(lid, kind, props, resources)
        if priced is None:
            if kind not in USAGE_ONLY:
                unpriced.add(kind)
            continue
        lines.extend(priced)
    if unpriced:
        raise UnpricedResource(f"no price for {sorted(unpriced)}: add them to tools/bench/idle_cost.py")
    return lines


def _price(lid: str, kind: str, props: dict[str, Any], resources: dict[str, Any]) -> list[Line] | None:
    p = PRICE
    match kind:
        case "AWS::EC2::VPCEndpoint":
            if props.get("VpcEndpointType", "Gateway") != "Interface":
                return [Line("VPC gateway endpoint (free)", lid, "1", 0.0)]
            azs = len(props.get("SubnetIds", [])) or 1
            service = _service(props.get("ServiceName"))
            return [
                Line(
                    f"interface endpoint {service}",
                    lid,
                    f"{azs} AZ x {HOURS} h",
                    azs * HOURS * p["interface_endpoint_az_hour"],
                )
            ]
        case "AWS::EC2::NatGateway":
            return [Line("NAT gateway", lid, f"{HOURS} h", HOURS * p["nat_gateway_hour"])]
        case "AWS::EC2::EIP":
            return [Line("public IPv4 address (Elastic IP)", lid, f"{HOURS} h", HOURS * p["public_ipv4_hour"])]
        case "AWS::EC2::Instance":
            itype = props.get("InstanceType", "?")
            if itype not in INSTANCE_HOUR:
                raise UnpricedResource(f"no hourly price for instance type {itype}")
            disk = (
                sum(
                    int(m.get("Ebs", {}).get("VolumeSize", DEFAULT_ROOT_VOLUME_GB))
                    for m in props.get("BlockDeviceMappings", [])
                )
                or DEFAULT_ROOT_VOLUME_GB
            )
            out = [
                Line(f"EC2 {itype}", lid, f"{HOURS} h", HOURS * INSTANCE_HOUR[itype]),
                Line("  its gp3 root volume", lid, f"{disk} GB", disk * p["gp3_gb_month"]),
            ]
            if _public_ip(props, resources):
                out.append(Line("  its public IPv4 address", lid, f"{HOURS} h", HOURS * p["public_ipv4_hour"]))
            return out
        case "AWS::ElastiCache::ServerlessCache":
            engine = props.get("Engine", "valkey")
            rate, minimum = (
                (p["valkey_serverless_gb_hour"], p["valkey_serverless_min_gb"])
                if engine == "valkey"
                else (p["redis_serverless_gb_hour"], p["redis_serverless_min_gb"])
            )
            return [
                Line(
                    f"ElastiCache Serverless ({engine}) minimum storage",
                    lid,
                    f"{minimum} GB x {HOURS} h",
                    minimum * HOURS * rate,
                )
            ]
        case "AWS::WAFv2::WebACL":
            rules = len(props.get("Rules", []))
            return [
                Line("WAF web ACL", lid, "1", p["waf_web_acl_month"]),
                Line("  its rules", lid, str(rules), rules * p["waf_rule_month"]),
            ]
        case "AWS::KMS::Key":
            return [Line("KMS customer managed key", lid, "1", p["kms_key_month"])]
        case "AWS::SecretsManager::Secret":
            return [Line("Secrets Manager secret", lid, "1", p["secret_month"])]
        case "AWS::CloudWatch::Dashboard":
            return [Line("CloudWatch dashboard", lid, "1", p["dashboard_month"])]
        case "AWS::CloudWatch::Alarm":
            metrics = max(1, sum(1 for m in props.get("Metrics", []) if "MetricStat" in m))
            return [Line("CloudWatch alarm", lid, f"{metrics} metric(s)", metrics * p["alarm_month"])]
        case "AWS::Lambda::Function":
            memory_gb = int(props.get("MemorySize", 128)) / 1024
            if props.get("SnapStart", {}).get("ApplyOn") == "PublishedVersions":
                seconds = HOURS * 3600
                return [
                    Line(
                        "Lambda SnapStart cache",
                        lid,
                        f"{memory_gb:g} GB x {HOURS} h",
                        memory_gb * seconds * p["snapstart_cache_gb_s"],
                    )
                ]
            return None
        case "AWS::ApplicationAutoScaling::ScalableTarget":
            # RegistrationApi's provisioned concurrency: a floor of 0 outside registration
            # windows (docs/cold-starts.md); a window's scheduled action is not idle cost.
            if props.get("ScalableDimension") == "lambda:function:ProvisionedConcurrency" and not props.get(
                "MinCapacity"
            ):
                return [Line("Lambda provisioned concurrency, floor 0 (raised per window)", lid, "0", 0.0)]
            return None
        case "AWS::Lambda::Version":
            pc = props.get("ProvisionedConcurrencyConfig", {}).get("ProvisionedConcurrentExecutions")
            if not pc:
                return [Line("Lambda version (free)", lid, "1", 0.0)]
            fn = resources.get(_ref(props.get("FunctionName")) or "", {}).get("Properties", {})
            memory_gb = int(fn.get("MemorySize", 128)) / 1024
            arm = "arm64" in fn.get("Architectures", [])
            rate = p["provisioned_concurrency_gb_s_arm64" if arm else "provisioned_concurrency_gb_s_x86"]
            return [
                Line(
                    "Lambda provisioned concurrency",
                    lid,
                    f"{pc} x {memory_gb:g} GB x {HOURS} h",
                    int(pc) * memory_gb * HOURS * 3600 * rate,
                )
            ]
    return None


def _service(name: Any) -> str:
    if isinstance(name, str):
        return name.rsplit(".", 1)[-1]
    if isinstance(name, dict) and "Fn::Join" in name:
        return str(name["Fn::Join"][1][-1]).rsplit(".", 1)[-1]
    return "?"


def _ref(value: Any) -> str | None:
    return value.get("Ref") if isinstance(value, dict) else None


def _public_ip(props: dict[str, Any], resources: dict[str, Any]) -> bool:
    """An instance gets a public IPv4 address if its interface asks or its subnet maps one."""
    for nic in props.get("NetworkInterfaces", []):
        if nic.get("AssociatePublicIpAddress") in (True, "true"):
            return True
    subnet = resources.get(_ref(props.get("SubnetId")) or "", {})
    return subnet.get("Properties", {}).get("MapPublicIpOnLaunch") in (True, "true")


def total(lines: list[Line]) -> float:
    return round(sum(line.monthly_usd for line in lines), 2)


def synthesized_template() -> dict[str, Any]:
    """The stack's template, synthesized offline as ``make synth`` would (without cdk-nag)."""
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    for path in (str(ROOT), str(ROOT / "cdk")):
        if path not in sys.path:
            sys.path.insert(0, path)
    from aws_cdk.assertions import Template
    from racecap_cdk.app import build_app

    with tempfile.TemporaryDirectory() as out:
        _, stack = build_app(out, nag=False, **{"aws:cdk:disable-asset-staging": True})
        synthesized = dict(Template.from_stack(stack).to_json())
    return synthesized


def report(template: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The budget as the bench records it: lines, the monthly total and the target."""
    lines = idle_budget(template or synthesized_template())
    # The total of the lines as shown (cents), so the report adds up line by line.
    monthly = round(sum(round(line.monthly_usd, 2) for line in lines), 2)
    return {
        "lines": [{**asdict(line), "monthly_usd": round(line.monthly_usd, 2)} for line in lines],
        "idle_monthly_usd": monthly,
        "target_usd": TARGET_USD,
        "within_target": monthly <= TARGET_USD,
        "assumptions": f"us-east-1 on-demand, {HOURS} h/month, free tiers ignored; usage-billed resources at $0",
    }


def _measure(bench: Bench) -> dict[str, Any]:
    budget = report()
    bench.say("(f) idle cost of a stage per month, from the synthesized template:\n" + render(budget))
    return budget


SECTION = Section(
    "f_idle_monthly_cost",
    "cold",
    _measure,
    targets=lambda r: {"idle_cost_within_30_usd_per_month": bool(r["f_idle_monthly_cost"]["within_target"])},
)


def render(budget: dict[str, Any]) -> str:
    rows = [f"  {ln['item']:<52} {ln['quantity']:>20}  ${ln['monthly_usd']:>7.2f}" for ln in budget["lines"]]
    rows.append(f"  {'idle cost of a stage per month':<52} {'':>20}  ${budget['idle_monthly_usd']:>7.2f}")
    rows.append(f"  (target <= ${budget['target_usd']:.0f}: {'met' if budget['within_target'] else 'NOT met'})")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    budget = report()
    print(json.dumps(budget, indent=2) if args.json else render(budget))


if __name__ == "__main__":
    main()
