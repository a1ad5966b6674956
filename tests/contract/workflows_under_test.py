"""The workflows the contract suite runs against: ``FakeWorkflow`` and the Step Functions
adapter (``StepFunctionsWorkflow``) on the local ASL server (``local/stepfunctions``),
with a small state machine that waits an hour, or ends at once for ``{"mode": "quick"}``."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from racecap.window.store import StepFunctionsWorkflow, Workflow

from local import servers
from local.stack import ROOT, node_binary
from tests.fakes.races import FakeWorkflow

ASL = {
    "StartAt": "How",
    "States": {
        "How": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.mode", "StringEquals": "quick", "Next": "Done"}],
            "Default": "Wait",
        },
        "Wait": {"Type": "Wait", "Seconds": 3600, "Next": "Done"},
        "Done": {"Type": "Succeed"},
    },
}


@dataclass
class WorkflowUnderTest:
    name: str
    workflow: Workflow
    ended: Callable[[str], str]  # a quick execution's final status, once it has ended


def fake_workflows() -> Iterator[WorkflowUnderTest]:
    fake = FakeWorkflow()

    def ended(name: str) -> str:
        fake.finish(name)  # the fake does not run ASL: the state machine's end, by hand
        return fake.status(name)

    yield WorkflowUnderTest("fake", fake, ended)


def local_sfn_workflows() -> Iterator[WorkflowUnderTest]:
    node = node_binary()
    if node is None:
        pytest.skip("Node 22 not installed (local/install.sh installs it)")
    modules = os.environ.get("RACECAP_NODE_MODULES", str(ROOT / "local" / "node" / "node_modules"))
    with tempfile.TemporaryDirectory(prefix="racecap-contract-sfn-") as work:
        port = servers.free_port()
        cmd = [node, str(ROOT / "local/stepfunctions/server.mjs"), "--port", str(port)]
        cmd += ["--lambda-endpoint", "http://127.0.0.1:9"]  # this machine calls no function
        server = servers.spawn(
            "stepfunctions", cmd, port, Path(work), env={**os.environ, "RACECAP_NODE_MODULES": modules}
        )
        try:
            sfn: Any = boto3.session.Session(
                aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
            ).client("stepfunctions", endpoint_url=f"http://127.0.0.1:{port}")
            arn = sfn.create_state_machine(
                name="contract-window",
                definition=json.dumps(ASL),
                roleArn="arn:aws:iam::000000000000:role/contract",
            )["stateMachineArn"]
            workflow = StepFunctionsWorkflow(sfn, arn)

            def ended(name: str) -> str:
                deadline = time.monotonic() + 20
                while (status := workflow.status(name)) == "RUNNING" and time.monotonic() < deadline:
                    time.sleep(0.05)
                return status

            yield WorkflowUnderTest("local-sfn", workflow, ended)
        finally:
            server.stop()


WORKFLOWS: dict[str, Callable[[], Iterator[WorkflowUnderTest]]] = {
    "fake": fake_workflows,
    "local-sfn": local_sfn_workflows,
}
