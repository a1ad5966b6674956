"""The workflow port's contract (``Workflow``): the same cases against ``FakeWorkflow`` and
``StepFunctionsWorkflow`` on the local ASL server, so the window unit tests' fake behaves as
Step Functions does for starting, repeating, stopping and looking at executions by name."""

from __future__ import annotations

import uuid

import pytest

from tests.contract.workflows_under_test import WorkflowUnderTest


@pytest.fixture
def name() -> str:
    return f"race_{uuid.uuid4().hex[:10]}-w1"


def test_a_started_execution_runs_under_its_name(workflow: WorkflowUnderTest, name):
    w = workflow.workflow
    assert w.status(name) == "UNKNOWN"
    arn = w.start(name, {"raceId": "r", "mode": "slow"})
    assert arn == w.execution_arn(name) and arn.endswith(f":{name}") and ":execution:" in arn
    assert w.status(name) == "RUNNING"
    assert w.start(name, {"raceId": "r", "mode": "slow"}) == arn  # a retried start: the same one
    assert w.status(name) == "RUNNING"
    w.stop(name, "contract test")


def test_a_stopped_execution_is_aborted_and_a_second_stop_is_harmless(workflow: WorkflowUnderTest, name):
    w = workflow.workflow
    w.start(name, {"mode": "slow"})
    w.stop(name, "replaced by window.open (dana)")
    assert w.status(name) == "ABORTED"
    w.stop(name, "again")
    assert w.status(name) == "ABORTED"
    assert w.start(name, {"mode": "slow"}) == w.execution_arn(name)  # a name is never run twice
    assert w.status(name) == "ABORTED"


def test_stopping_a_name_that_never_started_is_no_error(workflow: WorkflowUnderTest, name):
    workflow.workflow.stop(name, "nothing to stop")
    assert workflow.workflow.status(name) == "UNKNOWN"


def test_an_ended_execution_keeps_its_status_when_started_again(workflow: WorkflowUnderTest, name):
    w = workflow.workflow
    w.start(name, {"mode": "quick"})
    assert workflow.ended(name) == "SUCCEEDED"
    assert w.start(name, {"mode": "quick"}) == w.execution_arn(name)
    assert w.status(name) == "SUCCEEDED"
