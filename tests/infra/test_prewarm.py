"""The window's pre-warm on AWS: the floor it moves is the one CDK registers, its role may
move that kind of floor and nothing else, and a failed raise or lower never stops the
opening or the closing."""

from __future__ import annotations

import json
from typing import Any

from racecap_cdk.grants import WARM_START_READ_ACTIONS, WARM_START_WRITE_ACTIONS

import blueprint

from .conftest import TemplateView
from .test_stack import _function_role, _listify, _role_statements

SCALING = "application-autoscaling:"


def _asl() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(blueprint.state_machine("RegistrationWindow").path.read_text())
    return data


def _scaling_statements(view: TemplateView, fn_id: str) -> list[dict[str, Any]]:
    return [
        st
        for st in _role_statements(view, _function_role(view, fn_id))
        if any(a.startswith(SCALING) for a in _listify(st["Action"]))
    ]


def test_the_floor_moved_is_the_provisioned_functions_registered_target(view: TemplateView) -> None:
    (provisioned,) = [f for f in blueprint.FUNCTIONS if f.warm_start == "provisioned"]
    targets = view.of_type("AWS::ApplicationAutoScaling::ScalableTarget")
    (target,) = targets.values()
    props = target["Properties"]
    assert props["ServiceNamespace"] == "lambda"
    assert props["ScalableDimension"] == "lambda:function:ProvisionedConcurrency"
    # Zero between openings: an idle stage pays for no warm environment.
    assert props["MinCapacity"] == 0
    assert props["MaxCapacity"] == provisioned.provisioned_max
    _, window_tasks = view.tagged("AWS::Lambda::Function")["WindowTasks"]
    env = window_tasks["Environment"]["Variables"]
    assert view.label(env["WARM_START_TARGET"]) == f"WarmStartTarget:{provisioned.id}"
    assert int(env["WARM_START_MAX"]) == provisioned.provisioned_max
    # The resource id CDK registers is the same function's live alias.
    parts = props["ResourceId"]["Fn::Join"][1]
    assert parts[0] == "function:" and parts[-1] == f":{blueprint.LIVE_ALIAS}"


def test_only_window_tasks_may_move_a_floor_and_only_lambda_provisioned_concurrency(view: TemplateView) -> None:
    for fn in blueprint.FUNCTIONS:
        statements = _scaling_statements(view, fn.id)
        if fn.id != "WindowTasks":
            assert statements == [], f"{fn.id} may call Application Auto Scaling"
            continue
        writes = [st for st in statements if set(_listify(st["Action"])) & set(WARM_START_WRITE_ACTIONS)]
        reads = [st for st in statements if st not in writes]
        (write,) = writes
        assert sorted(_listify(write["Action"])) == sorted(WARM_START_WRITE_ACTIONS)
        # Not Deregister, not scaling policies, not another service's targets.
        assert write["Condition"] == {
            "StringEquals": {
                "application-autoscaling:service-namespace": "lambda",
                "application-autoscaling:scalable-dimension": "lambda:function:ProvisionedConcurrency",
            }
        }
        (resource,) = _listify(write["Resource"])
        assert resource["Fn::Join"][1][-1].endswith(":scalable-target/*")
        # CDK merges these into the role's other '*' statement (ENIs, X-Ray).
        (read,) = reads
        assert _listify(read["Resource"]) == ["*"]
        scaling_reads = sorted(a for a in _listify(read["Action"]) if a.startswith(SCALING))
        assert scaling_reads == sorted(WARM_START_READ_ACTIONS)
        assert all(a.startswith(f"{SCALING}Describe") for a in scaling_reads)


def test_the_workflow_raises_before_the_opening_and_lowers_after_it_never_failing_for_it() -> None:
    states = _asl()["States"]
    path, at = [], "WaitForWarmUp"
    while "Next" in states[at]:
        path.append(at)
        at = states[at]["Next"]
    assert path == [
        "WaitForWarmUp",
        "WarmUp",
        "RaiseWarmStarts",
        "WaitForOpening",
        "Open",
        "WaitForCoolDown",
        "LowerWarmStarts",
        "WaitForClosing",
        "Close",
    ]
    assert states["RaiseWarmStarts"]["Parameters"]["task"] == "prewarm"
    assert states["RaiseWarmStarts"]["Parameters"]["coolDownAt.$"] == "$.coolDownAt"
    assert states["LowerWarmStarts"]["Parameters"]["task"] == "cooldown"
    assert states["WaitForCoolDown"]["TimestampPath"] == "$.coolDownAt"
    for name in ("RaiseWarmStarts", "LowerWarmStarts"):
        (catch,) = states[name]["Catch"]
        assert catch["ErrorEquals"] == ["States.ALL"]
        assert catch["Next"] == states[name]["Next"]  # on with the window, never WindowFailed
        assert catch["ResultPath"] not in ("$", None)  # the input (the times) survives
