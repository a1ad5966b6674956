"""Infrastructure test fixtures: the CDK app is synthesized once per session (it takes
seconds) and read back as plain JSON through a small view that maps every resource to
the blueprint declaration it renders (the ``racecap:blueprint-id`` tag)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App
from aws_cdk.assertions import Template
from racecap_cdk import constants as c
from racecap_cdk.app import build_app
from racecap_cdk.stack import RacecapStack

import blueprint

Resource = dict[str, Any]


class TemplateView:
    """Read-only helpers over ``Template.to_json()``."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.json = template
        self.resources: dict[str, Resource] = template["Resources"]
        self.parameters: dict[str, Any] = template.get("Parameters", {})

    def of_type(self, cfn_type: str) -> dict[str, Resource]:
        return {lid: r for lid, r in self.resources.items() if r["Type"] == cfn_type}

    def props(self, logical_id: str) -> dict[str, Any]:
        props: dict[str, Any] = self.resources[logical_id].get("Properties", {})
        return props

    def tag(self, logical_id: str) -> str | None:
        tags = self.props(logical_id).get("Tags", [])
        return next((t["Value"] for t in tags if t["Key"] == c.BLUEPRINT_TAG), None)

    def tagged(self, cfn_type: str) -> dict[str, tuple[str, dict[str, Any]]]:
        """Blueprint id -> (logical id, properties) for every tagged resource of a type."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for lid in self.of_type(cfn_type):
            bp_id = self.tag(lid)
            if bp_id is not None:
                assert bp_id not in out, f"two {cfn_type} resources tagged {bp_id}"
                out[bp_id] = (lid, self.props(lid))
        return out

    def ref_target(self, value: Any) -> str:
        """The logical id a ``Ref`` / ``Fn::GetAtt`` points to."""
        if isinstance(value, dict) and "Ref" in value:
            return str(value["Ref"])
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
        raise AssertionError(f"not a reference: {value!r}")

    def label(self, value: Any) -> str:
        """A template value as a resource-independent label (see ``blueprint_label``)."""
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and "Fn::Join" in value:
            _, parts = value["Fn::Join"]
            if parts[0] == "rediss://" and parts[2] == f":{c.CACHE_PORT}" and len(parts) == 3:
                target = self.ref_target(parts[1])
                assert self.resources[target]["Type"] == "AWS::ElastiCache::ServerlessCache"
                assert parts[1]["Fn::GetAtt"][1] == "Endpoint.Address"
                return "CacheUrl"
            if parts[0] == "{{resolve:secretsmanager:" and parts[2] == ":SecretString:::}}" and len(parts) == 3:
                target = self.ref_target(parts[1])
                assert self.resources[target]["Type"] == "AWS::SecretsManager::Secret"
                return "OriginSecret"
            if parts[0] == "function:" and parts[2] == f":{blueprint.LIVE_ALIAS}" and len(parts) == 3:
                target = self.ref_target(parts[1])
                assert self.resources[target]["Type"] == "AWS::Lambda::Function" and "Ref" in parts[1]
                return f"WarmStartTarget:{self.tag(target)}"
            raise AssertionError(f"unexpected Fn::Join: {value!r}")
        target = self.ref_target(value)
        if target in self.parameters:
            return f"Param:{target}={self.parameters[target].get('Default')}"
        kind = self.resources[target]["Type"]
        is_ref = "Ref" in value
        attr = None if is_ref else value["Fn::GetAtt"][1]
        bp_id = self.tag(target)
        match kind, is_ref, attr:
            case "AWS::DynamoDB::Table", True, None:
                return f"TableName:{bp_id}"
            case "AWS::SQS::Queue", True, None:
                return f"QueueUrl:{bp_id}"
            case "AWS::S3::Bucket", True, None:
                return f"BucketName:{bp_id}"
            case "AWS::SecretsManager::Secret", True, None:
                return f"SecretId:{bp_id}"
            case "AWS::Lambda::Function", False, "Arn":
                return f"FunctionArn:{bp_id}"
            case "AWS::StepFunctions::StateMachine", True, None:
                return f"StateMachineArn:{bp_id}"
        raise AssertionError(f"no label for {value!r} ({kind})")


def blueprint_label(ref: blueprint.Ref) -> str:
    """The same labels as ``TemplateView.label``, from the blueprint side. Used as the
    ``resolve`` callable of ``local.provision`` so both sides render comparably."""
    match ref:
        case str():
            return ref
        case blueprint.TableName(table=t):
            return f"TableName:{t}"
        case blueprint.QueueUrl(queue=q):
            return f"QueueUrl:{q}"
        case blueprint.BucketName(bucket=b):
            return f"BucketName:{b}"
        case blueprint.SecretId(secret=sec):
            return f"SecretId:{sec}"
        case blueprint.FunctionArn(function=f):
            return f"FunctionArn:{f}"
        case blueprint.StateMachineArn(state_machine=s):
            return f"StateMachineArn:{s}"
        case blueprint.CacheUrl():
            return "CacheUrl"
        case blueprint.OriginSecret():
            return "OriginSecret"
        case blueprint.WarmStartTarget(function=f):
            return f"WarmStartTarget:{f}"
        case blueprint.Param(name=name, default=default):
            return f"Param:{name}={default}"
    raise TypeError(ref)


@dataclass
class Synth:
    app: App
    stack: RacecapStack
    template: Template
    view: TemplateView


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    # Asset staging copies every function/layer directory; hashing them is enough here.
    app, stack = build_app(
        str(tmp_path_factory.mktemp("cdk.out")), nag=False, **{"aws:cdk:disable-asset-staging": True}
    )
    template = Template.from_stack(stack)
    return Synth(app, stack, template, TemplateView(template.to_json()))


@pytest.fixture(scope="session")
def view(synth: Synth) -> TemplateView:
    return synth.view


@pytest.fixture(scope="session")
def label() -> Any:
    return blueprint_label
