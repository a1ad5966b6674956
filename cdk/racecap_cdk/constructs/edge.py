"""The edge in front of CloudFront: a WAF web ACL, and the secret that proves a request
came through CloudFront.

A web ACL for CloudFront must be created in us-east-1 whatever the stage's region, so it
lives in its own small stack (``EdgeStack``, always us-east-1); the main stack reads its
ARN across regions. Rules, in order (the first terminating match wins):

1. ``LoadGenerators``: requests from the team's load generators (an IP set from the
   ``loadGeneratorCidrs`` context value, e.g. the NAT addresses of Artillery's Fargate
   tasks) are allowed past every rule below, so a burst test measures Racecap, not the WAF.
2. ``RatePerAddress``: an address making over ``RATE_LIMIT`` API requests in
   ``RATE_WINDOW_S`` seconds gets a 429 JSON answer in the contract's shape, with
   ``Retry-After``. Deliberately generous: mobile carriers put many runners behind one
   address; the API's own per-client limits are the fine-grained layer.
3. ``AwsKnownBadInputs``: the AWS managed known-bad-inputs group (Log4j lookups, ...).
4. ``AwsCommonRules``: the AWS managed common rule group, its body-size rule counted only.
5. ``BodySize``: that body-size rule re-applied everywhere except the paths that carry
   large bodies legitimately (the payment provider's webhooks, results uploads).
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_wafv2 as waf
from constructs import Construct

from .. import constants as c
from ..scanners import suppress

WHY_ORIGIN_VALUE_AWS_MANAGED_KEY = (
    "A random value that only proves a request came through CloudFront; no personal data. Encrypted with "
    "Secrets Manager's AWS managed key, which CloudFormation's dynamic references can always read."
)

RATE_LIMIT = 1500
RATE_WINDOW_S = 60
RATE_RETRY_AFTER_S = RATE_WINDOW_S
COMMON_RULES = "AWSManagedRulesCommonRuleSet"
KNOWN_BAD_INPUTS = "AWSManagedRulesKnownBadInputsRuleSet"
BODY_SIZE_RULE = "SizeRestrictions_BODY"
BODY_SIZE_LABEL = "awswaf:managed:aws:core-rule-set:SizeRestrictions_Body"
# Paths whose bodies may be larger than the common rule group's 8 KB.
PAYMENT_WEBHOOK_PATH = "/api/payments/webhook"
RESULTS_UPLOAD_PATTERN = r"^/api/admin/.+/results"
RATE_LIMITED_BODY_KEY = "RateLimited"
TOO_LARGE_BODY_KEY = "PayloadTooLarge"
RATE_LIMITED = {"error": "RATE_LIMITED", "message": "Too many requests from your address; wait and retry."}
TOO_LARGE = {"error": "PAYLOAD_TOO_LARGE", "message": "The request body is too large."}


def _visibility(name: str) -> waf.CfnWebACL.VisibilityConfigProperty:
    return waf.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=f"racecap-{name}", sampled_requests_enabled=True
    )


def _uri(text: str, constraint: str) -> dict[str, Any]:
    return {
        "byteMatchStatement": {
            "fieldToMatch": {"uriPath": {}},
            "positionalConstraint": constraint,
            "searchString": text,
            "textTransformations": [{"priority": 0, "type": "NONE"}],
        }
    }


def _json_block(status: int, body_key: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"responseCode": status, "customResponseBodyKey": body_key}
    if headers:
        response["responseHeaders"] = [{"name": k, "value": v} for k, v in headers.items()]
    return {"block": {"customResponse": response}}


class EdgeStack(Stack):
    """us-east-1 only: the web ACL CloudFront uses."""

    def __init__(self, scope: Construct, construct_id: str, *, load_generator_cidrs: list[str], **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        if self.region != "us-east-1":
            raise ValueError(f"a CloudFront web ACL must be created in us-east-1, not {self.region}")
        rules: list[Any] = []
        self.load_generators: waf.CfnIPSet | None = None
        if load_generator_cidrs:
            self.load_generators = waf.CfnIPSet(
                self,
                c.LOAD_GENERATORS_ID,
                scope="CLOUDFRONT",
                ip_address_version="IPV4",
                addresses=load_generator_cidrs,
                description="Load generators of the team - Artillery - allowed past the rules of the WAF",
            )
            rules.append(
                {
                    "name": "LoadGenerators",
                    "statement": {"ipSetReferenceStatement": {"arn": self.load_generators.attr_arn}},
                    "action": {"allow": {}},
                }
            )
        rules += [
            {
                "name": "RatePerAddress",
                "statement": {
                    "rateBasedStatement": {
                        "limit": RATE_LIMIT,
                        "evaluationWindowSec": RATE_WINDOW_S,
                        "aggregateKeyType": "IP",
                        # Only API calls count: the site's assets are cached at the edge.
                        "scopeDownStatement": _uri("/api/", "STARTS_WITH"),
                    }
                },
                "action": _json_block(429, RATE_LIMITED_BODY_KEY, {"Retry-After": str(RATE_RETRY_AFTER_S)}),
            },
            {
                # Known bad inputs (Log4j JNDI lookups and the like) are blocked outright.
                "name": "AwsKnownBadInputs",
                "statement": {"managedRuleGroupStatement": {"vendorName": "AWS", "name": KNOWN_BAD_INPUTS}},
                "overrideAction": {"none": {}},
            },
            {
                "name": "AwsCommonRules",
                "statement": {
                    "managedRuleGroupStatement": {
                        "vendorName": "AWS",
                        "name": COMMON_RULES,
                        # Counted, not blocked: the BodySize rule decides, path by path.
                        "ruleActionOverrides": [{"name": BODY_SIZE_RULE, "actionToUse": {"count": {}}}],
                    }
                },
                "overrideAction": {"none": {}},
            },
            {
                "name": "BodySize",
                "statement": {
                    "andStatement": {
                        "statements": [
                            {"labelMatchStatement": {"scope": "LABEL", "key": BODY_SIZE_LABEL}},
                            {
                                "notStatement": {
                                    "statement": {
                                        "orStatement": {
                                            "statements": [
                                                _uri(PAYMENT_WEBHOOK_PATH, "EXACTLY"),
                                                {
                                                    "regexMatchStatement": {
                                                        "fieldToMatch": {"uriPath": {}},
                                                        "regexString": RESULTS_UPLOAD_PATTERN,
                                                        "textTransformations": [{"priority": 0, "type": "NONE"}],
                                                    }
                                                },
                                            ]
                                        }
                                    }
                                }
                            },
                        ]
                    }
                },
                "action": _json_block(413, TOO_LARGE_BODY_KEY),
            },
        ]
        for priority, rule in enumerate(rules):
            rule["priority"] = priority
            rule["visibilityConfig"] = _visibility(rule["name"])
        self.web_acl = waf.CfnWebACL(
            self,
            c.WEB_ACL_ID,
            scope="CLOUDFRONT",
            default_action=waf.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=_visibility("web-acl"),
            custom_response_bodies={
                RATE_LIMITED_BODY_KEY: waf.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON", content=json.dumps(RATE_LIMITED)
                ),
                TOO_LARGE_BODY_KEY: waf.CfnWebACL.CustomResponseBodyProperty(
                    content_type="APPLICATION_JSON", content=json.dumps(TOO_LARGE)
                ),
            },
            rules=rules,
            description="Racecap: rate limit per address, AWS common rules, load-generator bypass",
        )


def origin_secret(scope: Construct) -> secretsmanager.Secret:
    """The value CloudFront sends in the origin-verify header (blueprint.OriginSecret)."""
    secret = secretsmanager.Secret(
        scope,
        c.ORIGIN_SECRET_ID,
        description="Racecap: CloudFront's origin-verify header value; the API refuses requests without it",
        generate_secret_string=secretsmanager.SecretStringGenerator(exclude_punctuation=True, password_length=48),
    )
    suppress(secret, "checkov", "CKV_AWS_149", WHY_ORIGIN_VALUE_AWS_MANAGED_KEY)
    return secret
