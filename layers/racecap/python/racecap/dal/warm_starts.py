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

import re
from datetime import UTC, datetime
from typing import Any, Protocol

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
