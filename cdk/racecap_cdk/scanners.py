"""Suppressions for the template scanners (cfn-lint with the serverless rules, checkov),
written next to the resource they are about, each with its reason.

Both tools read a resource's CloudFormation ``Metadata``: checkov its ``checkov.skip``
list (id + comment), cfn-lint its ``cfn-lint.config.ignore_checks``. cfn-lint has no
comment field, so the reasons go beside it under ``racecap:why``; tests/infra/test_scanners.py
fails on any suppression without one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

Tool = Literal["checkov", "cfn-lint"]

# Reasons shared by several resources.
WHY_LOGS_NO_CMK = (
    "Logs carry ids and outcomes, never a runner's email, name or date of birth (handlers log ids; the "
    "workflow's logs exclude execution data): encrypted at rest with CloudWatch Logs' own keys."
)
WHY_CDK_DEPENDS_ON = (
    "CDK's explicit DependsOn on the role (and its policy): the policy must exist before Lambda or Step "
    "Functions validates what the role may do; the extra edge is harmless."
)
WHY_KEY = "racecap:why"


def _cfn(construct: IConstruct) -> CfnResource:
    node = construct if isinstance(construct, CfnResource) else construct.node.default_child
    if not isinstance(node, CfnResource):
        raise TypeError(f"{construct.node.path} is not a CloudFormation resource")
    return node


def suppress(construct: IConstruct, tool: Tool, check: str, reason: str) -> None:
    if not reason.strip():
        raise ValueError("every suppression needs its reason")
    res = _cfn(construct)
    if tool == "checkov":
        meta = res.get_metadata("checkov") or {"skip": []}
        if check not in {s["id"] for s in meta["skip"]}:
            meta["skip"].append({"id": check, "comment": reason})
        res.add_metadata("checkov", meta)
    else:
        meta = res.get_metadata("cfn-lint") or {"config": {"ignore_checks": []}}
        if check not in meta["config"]["ignore_checks"]:
            meta["config"]["ignore_checks"].append(check)
        res.add_metadata("cfn-lint", meta)
        why = res.get_metadata(WHY_KEY) or {}
        why[check] = reason
        res.add_metadata(WHY_KEY, why)


BUCKET_DEPLOYMENT_PREFIX = "Custom::CDKBucketDeployment"
NOTIFICATIONS_HANDLER_PREFIX = "BucketNotificationsHandler"
WHY_NOTIFICATIONS_HANDLER = (
    "CDK's BucketNotificationsHandler (a singleton aws-cdk-lib owns): it only configures bucket notifications "
    "during deployments, called synchronously by CloudFormation, with the settings CDK gives it."
)
WHY_UPLOADS_BUCKET = (
    "Upload buckets hold transient inputs expired by a lifecycle rule; each object is reachable only through a "
    "presigned URL whose issue is audited, and each processed version is kept by the processor."
)
WHY_CDK_HANDLER = (
    "CDK's BucketDeployment handler (a singleton aws-cdk-lib owns): it runs only during deployments, "
    "synchronously from CloudFormation, outside the VPC, with the role and settings CDK gives it."
)


def suppress_cdk_internals(stack: Stack, upload_buckets: Iterable[IConstruct]) -> None:
    """What aws-cdk-lib generates and we do not configure (the site's deployment handler, the bucket
    notifications handler), and the upload buckets' S3 -> Lambda wiring.

    Typed on ``Stack`` with the buckets passed in: every construct imports this module, so it
    cannot import the stack (or the buckets construct) back."""
    for child in stack.node.children:
        if child.node.id.startswith(BUCKET_DEPLOYMENT_PREFIX) and isinstance(child, lambda_.Function):
            for check in ("CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173"):
                suppress(child, "checkov", check, WHY_CDK_HANDLER)
            for check in ("W3005", "WS1000", "WS1004"):
                suppress(child, "cfn-lint", check, WHY_CDK_HANDLER)
            if child.role is not None:
                suppress(child.role.node.find_child("DefaultPolicy"), "checkov", "CKV_AWS_111", WHY_CDK_HANDLER)
        elif child.node.id.startswith(NOTIFICATIONS_HANDLER_PREFIX):
            function = child.node.find_child("Resource")
            for check in ("CKV_AWS_116", "CKV_AWS_117", "CKV_AWS_115", "CKV_AWS_173"):
                suppress(function, "checkov", check, WHY_NOTIFICATIONS_HANDLER)
            for check in ("W3005", "WS1000", "WS1004", "ES1005"):
                suppress(function, "cfn-lint", check, WHY_NOTIFICATIONS_HANDLER)
    for bucket in upload_buckets:
        suppress(bucket, "checkov", "CKV_AWS_18", WHY_UPLOADS_BUCKET)
        suppress(bucket, "checkov", "CKV_AWS_21", WHY_UPLOADS_BUCKET)
