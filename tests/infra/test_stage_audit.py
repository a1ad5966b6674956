"""What the audit of a deployed stage relies on: an output naming the function whose
configuration describes the stage, that function's environment naming everything the
audit reads, and the email sender allowed to keep its delivery log."""

from __future__ import annotations

from racecap_cdk import constants as c

import blueprint

from .conftest import TemplateView
from .test_stack import _function_role, _listify, _referenced, _role_statements


def test_the_stage_names_its_audit_function(view: TemplateView) -> None:
    output = view.json["Outputs"][c.OUTPUT_AUDIT_FUNCTION]["Value"]
    target = view.ref_target(output)
    assert view.resources[target]["Type"] == "AWS::Lambda::Function" and "Ref" in output
    assert view.tag(target) == blueprint.AUDIT_FUNCTION


def test_the_audit_functions_environment_names_every_table_queue_and_secret_the_audit_reads() -> None:
    env = blueprint.function_env(blueprint.function(blueprint.AUDIT_FUNCTION))
    tables = {r.table for r in env.values() if isinstance(r, blueprint.TableName)}
    queues = {r.queue for r in env.values() if isinstance(r, blueprint.QueueUrl)}
    secrets = {r.secret for r in env.values() if isinstance(r, blueprint.SecretId)}
    assert {"Races", "Inventory", "Registrations"} <= tables
    assert queues == {q.id for q in blueprint.QUEUES}  # every DLQ is found through its queue
    assert "PaymentProvider" in secrets and "PAYMENTS_API_BASE" in env


def test_the_email_sender_writes_its_delivery_log_and_reads_the_registrations_it_sends_links_to(
    view: TemplateView,
) -> None:
    """Since issue 39 the sender resolves "find my registration" itself (registration.links says
    why there and not in the API): it reads the race's email claim and that registration."""
    statements = _role_statements(view, _function_role(view, "EmailSender"))
    on_registrations = [
        set(_listify(st["Action"]))
        for st in statements
        if "Registrations" in _referenced(view, _listify(st["Resource"]), "AWS::DynamoDB::Table")
    ]
    actions = set().union(*on_registrations)
    assert {"dynamodb:PutItem", "dynamodb:GetItem"} <= actions
