"""The floor of a provisioned function's warm environments, through Application Auto Scaling.

The CDK app registers the registration API's ``live`` alias as a scalable target with a
floor (MinCapacity) of 0; target tracking scales between the floor and the maximum. The
registration window raises the floor before an opening, so the environments are
initialised before the burst instead of during it, and puts it back to 0 after. A one-time
*scheduled action* at the cool-down time is the backstop: AWS itself lowers the floor
even if the workflow was stopped before its own cool-down step (``close now``).

On the local stack the same client reaches moto's Application Auto Scaling through
``AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from racecap.aws.items import from_item, to_item, values
from racecap.aws.keys import WINDOW_SK, race_pk, window_key
from racecap.aws.transactions import TransactItem
from racecap.window.models import WindowRecord


class WindowStore(Protocol):
    """Which workflow execution runs each race's registration window."""

    def get(self, race_id: str) -> WindowRecord | None: ...

    def replace_item(self, race_id: str, seq: int, window: WindowRecord) -> TransactItem:
        """``window`` becomes current (at ``seq + 1``), if nobody moved past ``seq`` meanwhile."""
        ...

    def guard_item(self, race_id: str, execution: str) -> TransactItem:
        """Holds only while ``execution`` is the race's current one."""
        ...


class Workflow(Protocol):
    """The registration-window workflow's executions, by name."""

    def execution_arn(self, name: str) -> str: ...

    def start(self, name: str, payload: Mapping[str, str]) -> str:
        """Start ``name`` (a repeat is the same execution); its ARN."""
        ...

    def stop(self, name: str, cause: str) -> None:
        """Stop ``name``; one that never started is no error."""
        ...

    def status(self, name: str) -> str:
        """RUNNING, SUCCEEDED, FAILED, ABORTED, ...; UNKNOWN for one that never started."""
        ...


NAMESPACE = "lambda"


DIMENSION = "lambda:function:ProvisionedConcurrency"


_AT = re.compile(r"^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$")


class WarmStartScaler(Protocol):
    def floor(self) -> int: ...
    def set_floor(self, environments: int) -> None: ...
    def schedule_floor(self, name: str, at: datetime, environments: int) -> None: ...
    def scheduled(self, prefix: str) -> dict[str, datetime]: ...
    def cancel(self, name: str) -> None: ...


class WarmStartTargetMissing(RuntimeError):
    """The function's scalable target is not registered: the stack was not deployed as declared."""


class AutoScalingWarmStarts:
    def __init__(self, client: Any, resource_id: str) -> None:
        self._aas = client
        self._target = {"ServiceNamespace": NAMESPACE, "ResourceId": resource_id, "ScalableDimension": DIMENSION}

    def floor(self) -> int:
        found = self._aas.describe_scalable_targets(
            ServiceNamespace=NAMESPACE, ResourceIds=[self._target["ResourceId"]], ScalableDimension=DIMENSION
        )["ScalableTargets"]
        if not found:
            raise WarmStartTargetMissing(self._target["ResourceId"])
        return int(found[0]["MinCapacity"])

    def set_floor(self, environments: int) -> None:
        # Only the floor changes: the maximum and the tracking policy stay as deployed.
        self._aas.register_scalable_target(**self._target, MinCapacity=environments)

    def schedule_floor(self, name: str, at: datetime, environments: int) -> None:
        self._aas.put_scheduled_action(
            **self._target,
            ScheduledActionName=name,
            Schedule=f"at({at.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S')})",  # UTC, AWS's default zone
            ScalableTargetAction={"MinCapacity": environments},
        )

    def scheduled(self, prefix: str) -> dict[str, datetime]:
        """The one-time actions on this target whose name starts with ``prefix``, by name."""
        actions = self._aas.describe_scheduled_actions(
            ServiceNamespace=NAMESPACE, ResourceId=self._target["ResourceId"], ScalableDimension=DIMENSION
        )["ScheduledActions"]
        found: dict[str, datetime] = {}
        for action in actions:
            match = _AT.match(action.get("Schedule", ""))
            if action["ScheduledActionName"].startswith(prefix) and match:
                found[action["ScheduledActionName"]] = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)
        return found

    def cancel(self, name: str) -> None:
        try:
            self._aas.delete_scheduled_action(
                ServiceNamespace=NAMESPACE,
                ScheduledActionName=name,
                ResourceId=self._target["ResourceId"],
                ScalableDimension=DIMENSION,
            )
        except self._aas.exceptions.ObjectNotFoundException:
            pass  # already gone: a repeated cool-down


class DynamoWindows:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get(self, race_id: str) -> WindowRecord | None:
        resp = self._db.get_item(TableName=self._table, Key=window_key(race_id), ConsistentRead=True)
        return WindowRecord.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def replace_item(self, race_id: str, seq: int, window: WindowRecord) -> TransactItem:
        """Make ``window`` current, provided nobody moved the sequence past ``seq`` meanwhile."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {**window.model_dump(exclude_none=True), "pk": race_pk(race_id), "sk": WINDOW_SK, "seq": seq + 1}
                ),
                "ConditionExpression": "attribute_not_exists(pk) OR seq = :seq",
                "ExpressionAttributeValues": values({":seq": seq}),
            }
        }

    def guard_item(self, race_id: str, execution: str) -> TransactItem:
        """Holds only while ``execution`` is the race's current window execution."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": window_key(race_id),
                "ConditionExpression": "execution = :e",
                "ExpressionAttributeValues": values({":e": execution}),
            }
        }


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
