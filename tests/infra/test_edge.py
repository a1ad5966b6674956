"""Issue 11 (the AWS side): a WAF web ACL on CloudFront, in us-east-1 whatever the stage's
region, with a rate rule answering 429 JSON + Retry-After, the AWS common rules with the
large-body paths exempted from their body-size rule, a load-generator bypass; and the
API's own URL closed to requests that did not come through CloudFront."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Template
from racecap_cdk import constants as c
from racecap_cdk.app import build_app
from racecap_cdk.constructs import edge

import blueprint

from .conftest import Synth, TemplateView

NO_STAGING = {"aws:cdk:disable-asset-staging": True}


def _acl(template: dict[str, Any]) -> dict[str, Any]:
    (acl,) = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::WAFv2::WebACL"]
    return acl


def _rules(acl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["Name"]: r for r in sorted(acl["Rules"], key=lambda r: r["Priority"])}


@pytest.fixture(scope="module")
def edge_template(synth: Synth) -> dict[str, Any]:
    assert synth.stack.edge is not None
    return Template.from_stack(synth.stack.edge).to_json()


def test_web_acl_is_for_cloudfront_in_us_east_1(synth: Synth, edge_template: dict[str, Any]) -> None:
    assert synth.stack.edge is not None and synth.stack.edge.region == "us-east-1"
    acl = _acl(edge_template)
    assert acl["Scope"] == "CLOUDFRONT"
    assert acl["DefaultAction"] == {"Allow": {}}


def test_a_stage_in_another_region_still_gets_its_web_acl_from_us_east_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("CDK_DEFAULT_REGION", "eu-west-1")
    _, stack = build_app(str(tmp_path_factory.mktemp("eu")), nag=False, **NO_STAGING)
    assert stack.region == "eu-west-1"
    assert stack.edge is not None and stack.edge.region == "us-east-1"
    main = Template.from_stack(stack).to_json()
    (dist,) = [r["Properties"] for r in main["Resources"].values() if r["Type"] == "AWS::CloudFront::Distribution"]
    # Read across regions by CDK's export reader, not written by hand.
    target = dist["DistributionConfig"]["WebACLId"]["Fn::GetAtt"][0]
    assert main["Resources"][target]["Type"] == "Custom::CrossRegionExportReader"


def test_the_distribution_uses_the_edge_web_acl(view: TemplateView, edge_template: dict[str, Any]) -> None:
    (dist,) = view.of_type("AWS::CloudFront::Distribution")
    web_acl = view.props(dist)["DistributionConfig"]["WebACLId"]
    (export,) = [o["Export"]["Name"] for o in edge_template["Outputs"].values() if "WebAcl" in json.dumps(o["Value"])]
    assert web_acl == {"Fn::ImportValue": export}
    assert "CFR2" not in (blueprint.ROOT / "cdk" / "racecap_cdk" / "nag.py").read_text()


def test_rate_rule_blocks_with_a_429_in_the_contracts_shape(edge_template: dict[str, Any]) -> None:
    acl = _acl(edge_template)
    rule = _rules(acl)["RatePerAddress"]
    rate = rule["Statement"]["RateBasedStatement"]
    assert rate["AggregateKeyType"] == "IP"
    assert (rate["Limit"], rate["EvaluationWindowSec"]) == (edge.RATE_LIMIT, edge.RATE_WINDOW_S)
    assert rate["ScopeDownStatement"]["ByteMatchStatement"]["SearchString"] == "/api/"
    response = rule["Action"]["Block"]["CustomResponse"]
    assert response["ResponseCode"] == 429
    assert response["ResponseHeaders"] == [{"Name": "Retry-After", "Value": str(edge.RATE_WINDOW_S)}]
    body = acl["CustomResponseBodies"][response["CustomResponseBodyKey"]]
    assert body["ContentType"] == "APPLICATION_JSON"
    assert set(json.loads(body["Content"])) == {"error", "message"}


def test_common_rules_exempt_the_large_body_paths_from_the_size_rule(edge_template: dict[str, Any]) -> None:
    rules = _rules(_acl(edge_template))
    common = rules["AwsCommonRules"]["Statement"]["ManagedRuleGroupStatement"]
    assert (common["VendorName"], common["Name"]) == ("AWS", "AWSManagedRulesCommonRuleSet")
    assert common["RuleActionOverrides"] == [{"Name": "SizeRestrictions_BODY", "ActionToUse": {"Count": {}}}]
    assert rules["AwsCommonRules"]["OverrideAction"] == {"None": {}}
    size = rules["BodySize"]
    assert list(rules).index("BodySize") > list(rules).index("AwsCommonRules")  # labels exist by then
    label, exempt = size["Statement"]["AndStatement"]["Statements"]
    assert label["LabelMatchStatement"]["Key"] == "awswaf:managed:aws:core-rule-set:SizeRestrictions_Body"
    webhook, uploads = exempt["NotStatement"]["Statement"]["OrStatement"]["Statements"]
    assert webhook["ByteMatchStatement"]["SearchString"] == "/api/payments/webhook"
    assert webhook["ByteMatchStatement"]["PositionalConstraint"] == "EXACTLY"
    pattern = re.compile(uploads["RegexMatchStatement"]["RegexString"])
    assert pattern.search("/api/admin/races/r1/results")
    assert pattern.search("/api/admin/races/r1/results/upload")
    assert not pattern.search("/api/admin/races/r1/events")
    assert not pattern.search("/api/races/r1/results")  # the public results pages get no exemption
    assert size["Action"]["Block"]["CustomResponse"]["ResponseCode"] == 413


def test_no_load_generator_bypass_unless_configured(edge_template: dict[str, Any]) -> None:
    assert "LoadGenerators" not in _rules(_acl(edge_template))
    assert not [r for r in edge_template["Resources"].values() if r["Type"] == "AWS::WAFv2::IPSet"]


def test_load_generators_bypass_every_rule(tmp_path_factory: pytest.TempPathFactory) -> None:
    cidrs = "203.0.113.7/32, 198.51.100.0/28"
    _, stack = build_app(
        str(tmp_path_factory.mktemp("lg")), nag=False, **NO_STAGING, **{c.LOAD_GENERATOR_CONTEXT: cidrs}
    )
    assert stack.edge is not None
    template = Template.from_stack(stack.edge).to_json()
    rules = list(_rules(_acl(template)).values())
    first = rules[0]
    assert first["Name"] == "LoadGenerators" and first["Action"] == {"Allow": {}}
    (ipset_id,) = [lid for lid, r in template["Resources"].items() if r["Type"] == "AWS::WAFv2::IPSet"]
    assert template["Resources"][ipset_id]["Properties"]["Addresses"] == ["203.0.113.7/32", "198.51.100.0/28"]
    assert first["Statement"]["IPSetReferenceStatement"]["Arn"] == {"Fn::GetAtt": [ipset_id, "Arn"]}


def test_every_rule_is_measured(edge_template: dict[str, Any]) -> None:
    acl = _acl(edge_template)
    for rule in acl["Rules"]:
        assert rule["VisibilityConfig"]["CloudWatchMetricsEnabled"] is True


# ---------------------------------------------------------------------------
# The API's own URL refuses requests that did not come through CloudFront
# ---------------------------------------------------------------------------
def test_cloudfront_sends_the_origin_secret_to_the_api(view: TemplateView) -> None:
    (dist,) = view.of_type("AWS::CloudFront::Distribution")
    origins = view.props(dist)["DistributionConfig"]["Origins"]
    (api,) = [o for o in origins if "CustomOriginConfig" in o]
    (header,) = api["OriginCustomHeaders"]
    assert header["HeaderName"] == blueprint.ORIGIN_VERIFY_HEADER
    assert view.label(header["HeaderValue"]) == "OriginSecret"
    assert api["CustomOriginConfig"]["OriginSSLProtocols"] == ["TLSv1.2"]


@pytest.mark.parametrize("fn", [f for f in blueprint.FUNCTIONS if blueprint.routes_for(f.id)], ids=lambda f: f.id)
def test_api_functions_know_the_same_secret(view: TemplateView, fn: blueprint.Function) -> None:
    _, props = view.tagged("AWS::Lambda::Function")[fn.id]
    value = props["Environment"]["Variables"]["ORIGIN_VERIFY_SECRET"]
    assert view.label(value) == "OriginSecret"
    secret = view.ref_target(value["Fn::Join"][1][1])
    assert secret.startswith(c.ORIGIN_SECRET_ID)
    assert view.resources[secret]["Type"] == "AWS::SecretsManager::Secret"
