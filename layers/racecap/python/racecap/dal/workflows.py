"""Step Functions: start, stop and look at the registration-window workflow's executions.

On the local stack the same client reaches the local ASL interpreter through
``AWS_ENDPOINT_URL_SFN``; nothing here knows which one it talks to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class StepFunctionsWorkflow:
    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self._sfn = client
        self._arn = state_machine_arn

    def execution_arn(self, name: str) -> str:
        # Execution ARNs are the state machine's with ":execution:" in place of ":stateMachine:".
        return self._arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"

    def start(self, name: str, payload: Mapping[str, str]) -> str:
        """Start ``name``; a repeat with the same input is the same execution (AWS's own rule)."""
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        try:
            return str(self._sfn.start_execution(stateMachineArn=self._arn, name=name, input=text)["executionArn"])
        except self._sfn.exceptions.ExecutionAlreadyExists:
            # Names are never reused for other input (they carry a sequence number), so an
            # existing execution of this name is this very start, retried after it finished.
            return self.execution_arn(name)

    def stop(self, name: str, cause: str) -> None:
        try:
            self._sfn.stop_execution(executionArn=self.execution_arn(name), cause=cause[:256])
        except self._sfn.exceptions.ExecutionDoesNotExist:
            pass  # never started (a crash before StartExecution): nothing to stop

    def status(self, name: str) -> str:
        try:
            return str(self._sfn.describe_execution(executionArn=self.execution_arn(name))["status"])
        except self._sfn.exceptions.ExecutionDoesNotExist:
            return "UNKNOWN"
