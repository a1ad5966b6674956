"""The payment provider's keys: declared once, created by CDK with no value in the template,
referenced by ARN in the environment, readable only by the functions the blueprint grants."""

from __future__ import annotations

import json
import re
from typing import Any

import blueprint
from tests.infra.conftest import TemplateView

KEY_SHAPES = re.compile(r"\b(sk|rk|pk)_(test|live)_[A-Za-z0-9]+|whsec_[A-Za-z0-9]+")


def _secret_reads(view: TemplateView) -> dict[str, set[str]]:
    """Function blueprint id -> the secrets (blueprint ids) its role may read."""
    functions = view.tagged("AWS::Lambda::Function")
    role_of = {view.ref_target(props["Role"]): fn_id for fn_id, (_, props) in functions.items()}
    secrets = {lid: view.tag(lid) for lid in view.of_type("AWS::SecretsManager::Secret")}
    reads: dict[str, set[str]] = {fn_id: set() for fn_id in functions}
    for lid in view.of_type("AWS::IAM::Policy"):
        props = view.props(lid)
        for role in props.get("Roles", []):
            fn_id = role_of.get(view.ref_target(role))
            if fn_id is None:
                continue
            for st in props["PolicyDocument"]["Statement"]:
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                if "secretsmanager:GetSecretValue" in actions:
                    resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
                    reads[fn_id] |= {str(secrets[view.ref_target(r)]) for r in resources}
    return reads


def test_each_declared_secret_exists_once_with_no_value_in_the_template(view: TemplateView) -> None:
    secrets = view.tagged("AWS::SecretsManager::Secret")
    assert set(secrets) == {s.id for s in blueprint.SECRETS}
    for _, props in secrets.values():
        assert "SecretString" not in props  # the value is set out of band, never here
        assert "GenerateSecretString" in props  # a random placeholder until then
    assert not KEY_SHAPES.search(json.dumps(view.json)), "something key-shaped is inlined in the template"


def test_functions_get_the_secrets_arn_never_its_value(view: TemplateView) -> None:
    secrets = set(view.of_type("AWS::SecretsManager::Secret"))
    for fn_id, (_, props) in view.tagged("AWS::Lambda::Function").items():
        env: dict[str, Any] = props["Environment"]["Variables"]
        assert view.ref_target(env["PAYMENTS_SECRET_ID"]) in secrets, fn_id
        plain = [v for v in env.values() if isinstance(v, str)]
        assert not any(KEY_SHAPES.search(v) for v in plain), fn_id


def test_only_the_functions_granted_read_secret_may_read_it(view: TemplateView) -> None:
    expected = {
        fn.id: {g.secret for g in fn.grants if isinstance(g, blueprint.ReadSecret)} for fn in blueprint.FUNCTIONS
    }
    assert _secret_reads(view) == expected
    assert expected["AdminApi"] == {"PaymentProvider"}
    # The sweeper also signs the claim links of the waitlist offers its run makes.
    assert expected["HoldSweeper"] == {"PaymentProvider", "FairnessSigningKey"}
    # RegistrationApi also checks the fairness tokens (device, admission) that QueueApi signs.
    assert expected["RegistrationApi"] == {"PaymentProvider", "FairnessSigningKey"}
    # The waiting room calls no provider: it only signs and checks the fairness tokens.
    assert expected["QueueApi"] == {"FairnessSigningKey"}
    # MyRegistrationApi refunds under the race's policy and signs the runners' links.
    assert expected["MyRegistrationApi"] == {"PaymentProvider", "FairnessSigningKey"}


def test_the_provider_calling_functions_have_a_route_out(view: TemplateView) -> None:
    from tests.infra.test_network_and_cost import _routes_of_subnet

    nat_instances = set(view.of_type("AWS::EC2::Instance"))
    functions = view.tagged("AWS::Lambda::Function")
    callers = [fn_id for fn_id, secrets in _secret_reads(view).items() if "PaymentProvider" in secrets]
    assert callers
    for fn_id in callers:
        for subnet in functions[fn_id][1]["VpcConfig"]["SubnetIds"]:
            routes = _routes_of_subnet(view, view.ref_target(subnet))
            out = [r for r in routes if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
            assert [view.ref_target(r["InstanceId"]) in nat_instances for r in out] == [True], fn_id
