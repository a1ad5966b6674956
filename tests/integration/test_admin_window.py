"""The registration window through the real ASL interpreter: scheduled with short times,
opened and closed on demand, idempotent, and safe against a replaced execution."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
import requests

from local import provision
from local.stack import LocalStack

from .admin import iso, wait_until
from .flows import hold

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sfn(stack: LocalStack) -> Any:
    return boto3.client(
        "stepfunctions",
        endpoint_url=stack.aws_env()["AWS_ENDPOINT_URL_SFN"],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _window(director: Any, race_id: str) -> dict[str, Any]:
    resp = director.get(f"/api/admin/races/{race_id}/window")
    assert resp.status_code == 200, resp.text
    return resp.json()


def _act(director: Any, race_id: str, action: str) -> dict[str, Any]:
    resp = director.post(f"/api/admin/races/{race_id}/window/{action}")
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.fixture(scope="module")
def scaling(stack: LocalStack) -> Any:
    return boto3.client(
        "application-autoscaling",
        endpoint_url=stack.aws_env()["AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING"],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _warm_floor(scaling: Any) -> tuple[int, list[dict[str, Any]]]:
    """The registration API's provisioned-environment floor and its scheduled actions."""
    target = {"ServiceNamespace": "lambda", "ScalableDimension": "lambda:function:ProvisionedConcurrency"}
    rid = provision.warm_start_target("RegistrationApi")
    (found,) = scaling.describe_scalable_targets(**target, ResourceIds=[rid])["ScalableTargets"]
    actions = scaling.describe_scheduled_actions(**target, ResourceId=rid)["ScheduledActions"]
    return int(found["MinCapacity"]), actions


def _public_status(api: requests.Session, race_id: str) -> str:
    return str(api.get(f"/api/races/{race_id}").json()["status"])


def test_a_scheduled_window_warms_opens_and_closes_on_time(
    director: Any, api: requests.Session, sfn: Any, scaling: Any
) -> None:
    fay = director("fay")
    # Warm every function first: a cold start must not eat the few seconds the window is open.
    fay.create_race((5,))
    hold(api, "race_none", "evt_none")
    now = datetime.now(UTC)
    opens, closes = now + timedelta(seconds=5), now + timedelta(seconds=14)
    race = fay.create_race((5,), registrationOpensAt=iso(opens), registrationClosesAt=iso(closes))
    rid, eid = race["raceId"], race["events"][0]["eventId"]

    scheduled = _act(fay, rid, "schedule")
    assert scheduled["changed"] is True
    assert scheduled["workflow"]["status"] == "RUNNING"
    assert scheduled["workflow"]["mode"] == "schedule"
    again = _act(fay, rid, "schedule")  # a repeat finds the same schedule running
    assert again["changed"] is False
    assert again["workflow"]["execution"] == scheduled["workflow"]["execution"]

    assert hold(api, rid, eid).json()["error"] == "REGISTRATION_CLOSED"
    wait_until(lambda: _public_status(api, rid) == "OPEN", timeout=15, every=0.25)
    assert datetime.now(UTC) >= opens - timedelta(seconds=0.5)
    assert fay.get(f"/api/admin/races/{rid}").json()["registrationState"] == "OPEN"  # the Open task ran
    assert hold(api, rid, eid).status_code == 201
    # Pre-warmed for the race's burst (5 places: one environment), with the floor's return
    # to zero scheduled at the cool-down time (here the closing, under 30 min away).
    floor, actions = _warm_floor(scaling)
    assert floor >= 1
    (backstop,) = [a for a in actions if a["ScheduledActionName"] == f"racecap-cooldown-{rid}"]
    assert backstop["ScalableTargetAction"]["MinCapacity"] == 0
    assert backstop["Schedule"] == f"at({closes.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')})"

    wait_until(lambda: fay.get(f"/api/admin/races/{rid}").json()["registrationState"] == "CLOSED", timeout=15)
    assert datetime.now(UTC) >= closes - timedelta(seconds=0.5)
    assert hold(api, rid, eid).json()["error"] == "REGISTRATION_CLOSED"
    arn = scheduled["workflow"]["executionArn"]
    wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] == "SUCCEEDED", timeout=10)
    tasks = [
        e["stateEnteredEventDetails"]["name"]
        for e in sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"] == "TaskStateEntered"
    ]
    assert tasks == ["WarmUp", "RaiseWarmStarts", "Open", "LowerWarmStarts", "Close"]
    # Lowered after the opening (unless another test's opening still holds the shared
    # floor: the cool-down keeps it for them); nothing left scheduled for this race.
    floor, actions = _warm_floor(scaling)
    assert [a for a in actions if rid in a["ScheduledActionName"]] == []
    if not actions:
        assert floor == 0


def test_open_now_and_close_now_replace_the_workflow_and_repeat_harmlessly(
    director: Any, api: requests.Session, sfn: Any
) -> None:
    gus = director("gus")
    race = gus.create_race((5,))  # opens tomorrow, closes in a month
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    first = _act(gus, rid, "schedule")["workflow"]
    assert _public_status(api, rid) == "NOT_YET_OPEN"

    opened = _act(gus, rid, "open")
    assert (opened["changed"], opened["status"], opened["registrationState"]) == (True, "OPEN", "OPEN")
    assert opened["workflow"]["mode"] == "open"
    assert opened["registrationClosesAt"] == race["registrationClosesAt"]  # still closes as planned
    assert datetime.fromisoformat(opened["registrationOpensAt"]) <= datetime.now(UTC)
    assert sfn.describe_execution(executionArn=first["executionArn"])["status"] == "ABORTED"
    # Open at once: within the version stamp's in-process second (see racecap.cache).
    wait_until(lambda: hold(api, rid, eid).status_code == 201, timeout=3)

    repeat = _act(gus, rid, "open")
    assert repeat["changed"] is False
    assert repeat["workflow"]["execution"] == opened["workflow"]["execution"]

    closed = _act(gus, rid, "close")
    assert (closed["changed"], closed["status"], closed["workflow"]) == (True, "CLOSED", None)
    assert sfn.describe_execution(executionArn=opened["workflow"]["executionArn"])["status"] == "ABORTED"
    wait_until(lambda: hold(api, rid, eid).json().get("error") == "REGISTRATION_CLOSED", timeout=3)
    assert _act(gus, rid, "close")["changed"] is False

    actions = [e["action"] for e in gus.get(f"/api/admin/races/{rid}/audit").json()["entries"]]
    assert actions == ["window.close", "window.open", "window.schedule", "race.create"]

    # "schedule" resumes the plan: it opened already (open now moved the opening), so it reopens.
    _act(gus, rid, "schedule")
    wait_until(lambda: _public_status(api, rid) == "OPEN", timeout=15)


def test_a_replaced_execution_can_no_longer_change_the_race(director: Any, stack: LocalStack) -> None:
    hal = director("hal")
    race = hal.create_race((5,))
    rid = race["raceId"]
    old = _act(hal, rid, "schedule")["workflow"]["execution"]
    _act(hal, rid, "open")
    # The old execution's Close task, arriving late (a StopExecution that lost a race):
    late = requests.post(
        f"{stack.url}/2015-03-31/functions/WindowTasks/invocations",
        json={"task": "close", "raceId": rid, "execution": old},
        timeout=30,
    )
    assert late.json() == {"raceId": rid, "skipped": "superseded"}
    assert hal.get(f"/api/admin/races/{rid}").json()["registrationState"] == "OPEN"


def test_new_times_move_a_running_schedule(director: Any, sfn: Any) -> None:
    ida = director("ida")
    race = ida.create_race((5,))
    rid = race["raceId"]
    first = _act(ida, rid, "schedule")["workflow"]
    later = iso(datetime.now(UTC) + timedelta(days=20))
    resp = ida.patch(f"/api/admin/races/{rid}", json={"registrationClosesAt": later})
    assert resp.status_code == 200, resp.text
    window = _window(ida, rid)["workflow"]
    assert window["execution"] != first["execution"]
    assert datetime.fromisoformat(window["closesAt"]) == datetime.fromisoformat(later)
    assert window["status"] == "RUNNING"
    assert sfn.describe_execution(executionArn=first["executionArn"])["status"] == "ABORTED"


def test_a_window_that_is_over_cannot_be_scheduled_or_opened(director: Any, backend: Any) -> None:
    jo = director("jo")
    race = jo.create_race((5,))
    rid = race["raceId"]
    # Time passes: the closing time is now behind us (set directly, as validation forbids it).
    backend.store().update_race(rid, {"registrationClosesAt": datetime.now(UTC) - timedelta(minutes=1)})
    for action in ("schedule", "open"):
        resp = jo.post(f"/api/admin/races/{rid}/window/{action}")
        assert resp.status_code == 409, resp.text
        assert "registrationClosesAt" in resp.json()["message"]
    assert jo.post(f"/api/admin/races/{rid}/window/close").status_code == 200
