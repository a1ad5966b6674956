"""The stage's smoke director (``make smoke``): a user of the directors' pool who is never
mailed, a secret naming that pool, its app client and a generated password, and two managed
policies that grant exactly what running and enrolling need — on these two resources only."""

from __future__ import annotations

import json
from typing import Any

from racecap_cdk import constants as c

import blueprint

from .conftest import TemplateView
from .test_stack import _listify


def _only(view: TemplateView, cfn_type: str, **match: Any) -> str:
    found = [
        lid for lid, r in view.of_type(cfn_type).items() if all(r["Properties"].get(k) == v for k, v in match.items())
    ]
    assert len(found) == 1, f"{cfn_type} {match}: {found}"
    return found[0]


def _pool(view: TemplateView) -> str:
    [pool] = view.of_type("AWS::Cognito::UserPool")
    return pool


def _secret(view: TemplateView) -> str:
    return view.ref_target(view.json["Outputs"][c.OUTPUT_SMOKE_SECRET]["Value"])


def _policy(view: TemplateView, output: str) -> list[dict[str, Any]]:
    lid = view.ref_target(view.json["Outputs"][output]["Value"])
    assert view.resources[lid]["Type"] == "AWS::IAM::ManagedPolicy"
    statements: list[dict[str, Any]] = view.props(lid)["PolicyDocument"]["Statement"]
    return statements


def test_the_smoke_director_is_a_user_of_the_directors_pool_that_is_never_mailed(view: TemplateView) -> None:
    user = view.props(_only(view, "AWS::Cognito::UserPoolUser", Username=blueprint.SMOKE_DIRECTOR.username))
    assert view.ref_target(user["UserPoolId"]) == _pool(view)
    assert user["MessageAction"] == "SUPPRESS"
    # The pool it signs in to requires TOTP and its client allows SRP only: no shortcut for the smoke test.
    pool = view.props(_pool(view))
    assert pool["MfaConfiguration"] == "ON" and pool["EnabledMfas"] == ["SOFTWARE_TOKEN_MFA"]
    [client] = view.of_type("AWS::Cognito::UserPoolClient").values()
    assert set(client["Properties"]["ExplicitAuthFlows"]) == {"ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"}


def test_its_secret_names_the_pool_and_client_and_generates_a_password_the_pool_accepts(view: TemplateView) -> None:
    props = view.props(_secret(view))
    generated = props["GenerateSecretString"]
    assert generated["GenerateStringKey"] == "password"
    assert generated["PasswordLength"] >= 12 and generated["RequireEachIncludedType"] is True
    joined = json.dumps(generated["SecretStringTemplate"])
    assert blueprint.SMOKE_DIRECTOR.username in joined
    assert _pool(view) in joined
    assert next(iter(view.of_type("AWS::Cognito::UserPoolClient"))) in joined


def test_running_the_smoke_test_may_read_that_one_secret_and_nothing_else(view: TemplateView) -> None:
    [statement] = _policy(view, c.OUTPUT_SMOKE_RUNNER_POLICY)
    assert statement["Effect"] == "Allow"
    assert _listify(statement["Action"]) == ["secretsmanager:GetSecretValue"]
    assert [view.ref_target(r) for r in _listify(statement["Resource"])] == [_secret(view)]


def test_enrolling_may_set_the_password_in_this_pool_and_write_that_secret_only(view: TemplateView) -> None:
    granted = {}
    for statement in _policy(view, c.OUTPUT_SMOKE_ENROLLER_POLICY):
        assert statement["Effect"] == "Allow"
        for action in _listify(statement["Action"]):
            granted[action] = [view.ref_target(r) for r in _listify(statement["Resource"])]
    assert granted == {
        "secretsmanager:GetSecretValue": [_secret(view)],
        "secretsmanager:PutSecretValue": [_secret(view)],
        "cognito-idp:AdminSetUserPassword": [_pool(view)],
    }
