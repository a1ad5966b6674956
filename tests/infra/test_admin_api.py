"""The admin API on AWS: the director routes' JWT authorizer is wired to the Cognito user pool
and its app client (checking what the local authorizer, ``local/auth.py``, checks), and only
AdminApi may start and stop the registration-window workflow."""

from __future__ import annotations

import json

import blueprint

from .conftest import TemplateView


def test_every_director_route_uses_the_one_cognito_jwt_authorizer(view: TemplateView) -> None:
    (authorizer_lid,) = view.of_type("AWS::ApiGatewayV2::Authorizer")
    props = view.props(authorizer_lid)
    assert props["AuthorizerType"] == "JWT"
    assert props["IdentitySource"] == ["$request.header.Authorization"]
    (pool_lid,) = view.of_type("AWS::Cognito::UserPool")
    (client_lid,) = view.of_type("AWS::Cognito::UserPoolClient")
    jwt = props["JwtConfiguration"]
    assert jwt["Audience"] == [{"Ref": client_lid}]
    issuer = json.dumps(jwt["Issuer"])
    assert "cognito-idp." in issuer and pool_lid in issuer

    director = {r.route_key for r in blueprint.ROUTES if r.auth == "director"}
    assert director, "the admin API declares director routes"
    for route in view.of_type("AWS::ApiGatewayV2::Route").values():
        props = route["Properties"]
        if props["RouteKey"] in director:
            assert props["AuthorizerId"] == {"Ref": authorizer_lid}
        else:
            assert "AuthorizerId" not in props


def test_directors_cannot_sign_themselves_up(view: TemplateView) -> None:
    (pool,) = view.of_type("AWS::Cognito::UserPool").values()
    assert pool["Properties"]["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert pool["Properties"]["MfaConfiguration"] == "ON"


def test_admin_api_reaches_the_window_workflow_by_its_arn(view: TemplateView) -> None:
    _, props = view.tagged("AWS::Lambda::Function")["AdminApi"]
    arn = props["Environment"]["Variables"]["WINDOW_STATE_MACHINE_ARN"]
    assert view.label(arn) == "StateMachineArn:RegistrationWindow"


def test_only_admin_api_may_start_and_stop_window_executions(view: TemplateView) -> None:
    (machine_lid,) = view.of_type("AWS::StepFunctions::StateMachine")
    for fn in blueprint.FUNCTIONS:
        _, props = view.tagged("AWS::Lambda::Function")[fn.id]
        role = view.ref_target(props["Role"])
        states = [
            st
            for lid in view.of_type("AWS::IAM::Policy")
            if any(view.ref_target(r) == role for r in view.props(lid)["Roles"])
            for st in view.props(lid)["PolicyDocument"]["Statement"]
            if any(str(a).startswith("states:") for a in _listify(st["Action"]))
        ]
        if fn.id != "AdminApi":
            assert states == [], fn.id
            continue
        actions = {a: json.dumps(st["Resource"]) for st in states for a in _listify(st["Action"])}
        assert set(actions) == {"states:StartExecution", "states:StopExecution", "states:DescribeExecution"}
        assert actions["states:StartExecution"] == json.dumps({"Ref": machine_lid})
        for action in ("states:StopExecution", "states:DescribeExecution"):
            assert ":execution:" in actions[action] and machine_lid in actions[action]


def _listify(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]
