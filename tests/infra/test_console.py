"""The director's console on AWS: its /admin/* behaviour with its own CSP (declared once in
blueprint.console_security_headers, as the local gateway sends it), its config.json, and the
results upload bucket's CORS, which lets the site's origin PUT and nothing else."""

from __future__ import annotations

import os
from typing import Any

import boto3
import pytest
from botocore.config import Config
from racecap_cdk import constants as c

import blueprint
from tests.infra.conftest import Synth, TemplateView

# Pseudo parameters (when the stage's are not concrete): the CSP may depend on the stage,
# never on a resource (the bucket's CORS depends on the distribution).
PSEUDO = {"AWS::AccountId": "111122223333", "AWS::Region": "eu-west-1", "AWS::URLSuffix": "amazonaws.com"}


def _text(value: Any, view: TemplateView | None = None, allow: dict[str, str] | None = None) -> str:
    """A template string with pseudo parameters (and the resources in ``allow``) filled in."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        ref = value["Ref"]
        if ref in PSEUDO:
            return PSEUDO[ref]
        if allow and ref in allow:
            return allow[ref]
        raise AssertionError(f"depends on resource {ref}")
    if "Fn::GetAtt" in value and allow and value["Fn::GetAtt"][0] in allow:
        return allow[value["Fn::GetAtt"][0]]
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(_text(p, view, allow) for p in parts)
    raise AssertionError(f"not a plain or pseudo-parameter string: {value!r}")


def _distribution(view: TemplateView) -> tuple[str, dict[str, Any]]:
    ((lid, dist),) = view.of_type("AWS::CloudFront::Distribution").items()
    return lid, dist["Properties"]["DistributionConfig"]


def test_the_console_behaviour_sends_the_blueprints_console_policy(synth: Synth) -> None:
    view, stack = synth.view, synth.stack
    _, config = _distribution(view)
    (behaviour,) = [b for b in config["CacheBehaviors"] if b["PathPattern"] == f"{blueprint.CONSOLE_PATH}*"]
    policy = view.props(view.ref_target(behaviour["ResponseHeadersPolicyId"]))["ResponseHeadersPolicyConfig"]
    csp = _text(policy["SecurityHeadersConfig"]["ContentSecurityPolicy"]["ContentSecurityPolicy"])
    uploads = next(b for b in blueprint.BUCKETS if b.browser_uploads)
    region = _text(stack.region)
    bucket = uploads.aws_name(stack.stack_name, _text(stack.account), region)
    _, props = view.tagged("AWS::S3::Bucket")[uploads.id]
    assert _text(props["BucketName"]) == bucket  # the bucket the CSP names is that bucket
    expected = blueprint.console_content_security_policy(blueprint.ConsoleOrigins.aws(region, bucket))
    assert csp == expected
    # connect-src: itself, Cognito's user-pool endpoint and the upload bucket; nothing else.
    (connect,) = [d for d in csp.split("; ") if d.startswith("connect-src ")]
    assert connect.split()[1:] == [
        "'self'",
        f"https://cognito-idp.{region}.amazonaws.com",
        f"https://{bucket}.s3.amazonaws.com",
    ]
    assert "unsafe-inline" not in csp and "stripe" not in csp
    assert policy["SecurityHeadersConfig"]["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"
    # /admin and /admin/ reach the console's page (a viewer-request function).
    (assoc,) = behaviour["FunctionAssociations"]
    code = view.props(view.ref_target(assoc["FunctionARN"]))["FunctionCode"]
    assert f"'{blueprint.CONSOLE_PATH}index.html'" in code


def test_the_upload_host_in_the_csp_is_the_one_botocore_presigns(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CSP names https://<bucket>.s3.amazonaws.com: the host a Lambda's S3 client signs
    # (in SigV4, as racecap.clients configures it). AWS's own endpoint, whatever a local
    # stack's environment in this process says (make test's workers run several suites).
    for name in [k for k in os.environ if k.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)
    for region in ("us-east-1", "eu-west-1"):
        s3 = boto3.client(
            "s3",
            region_name=region,
            aws_access_key_id="x",
            aws_secret_access_key="y",
            config=Config(signature_version="s3v4"),
        )
        url = s3.generate_presigned_url("put_object", Params={"Bucket": "b-1", "Key": "k"}, ExpiresIn=60)
        origin = url.split("/k?", 1)[0]
        assert origin == blueprint.ConsoleOrigins.aws(region, "b-1").uploads
        assert f"%2F{region}%2Fs3%2Faws4_request" in url


def test_the_console_config_names_the_pool_its_client_and_cognitos_endpoint(view: TemplateView) -> None:
    # admin/config.json is deployed with the pages (Source.json_data): its values are markers
    # the deployment fills in with the user pool's and app client's ids and Cognito's endpoint.
    markers = [
        m
        for d in view.of_type("Custom::CDKBucketDeployment").values()
        for ms in d["Properties"].get("SourceMarkers", [])
        for m in ms.values()
    ]
    targets = {
        view.resources[ref["Ref"]]["Type"]
        for m in markers
        for ref in m["Fn::Join"][1]
        if isinstance(ref, dict) and "Ref" in ref and ref["Ref"] in view.resources
    }
    assert targets == {"AWS::Cognito::UserPool", "AWS::Cognito::UserPoolClient"}
    endpoint = next(m for m in markers if "cognito-idp." in str(m))
    assert _text(endpoint).strip('"').startswith("https://cognito-idp.")
    assert _text(endpoint).strip('"').endswith(".amazonaws.com")


def test_the_upload_bucket_lets_the_site_origin_put_and_nothing_else(view: TemplateView) -> None:
    dist_id, _ = _distribution(view)
    for decl in blueprint.BUCKETS:
        _, props = view.tagged("AWS::S3::Bucket")[decl.id]
        rules = props.get("CorsConfiguration", {}).get("CorsRules", [])
        if not decl.browser_uploads:
            assert rules == [], decl.id
            continue
        (rule,) = rules
        assert rule["AllowedMethods"] == ["PUT"]
        assert rule["AllowedHeaders"] == ["content-type"]
        (origin,) = rule["AllowedOrigins"]
        assert _text(origin, view, {dist_id: "d111.cloudfront.net"}) == "https://d111.cloudfront.net"
    assert c.CONSOLE_HEADERS_POLICY_ID
