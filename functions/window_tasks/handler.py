"""WindowTasks: the Task states of the RegistrationWindow workflow (warm, open, close, and
the pre-warm of provisioned environments before the opening and its cool-down after).

Errors propagate as exceptions: their class names are what the ASL's Retry/Catch match.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.waitlist.wiring import waitlist_closing
from racecap.window.wiring import warm_starts, window_tasks

get_settings()


class WindowTask(BaseModel):
    task: str = Field(pattern="^(warm|open|close|prewarm|cooldown)$")
    raceId: str = Field(min_length=1)
    # The workflow execution running the task ($$.Execution.Name): a replaced one no-ops.
    execution: str | None = None
    # prewarm: when the floor must be back to zero even if the workflow is stopped.
    coolDownAt: str | None = None


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    task = WindowTask.model_validate(event)
    if task.task in ("prewarm", "cooldown"):
        return warm_starts().run(task.task, task.raceId, task.execution, task.coolDownAt)
    done = window_tasks().run(task.task, task.raceId, task.execution)
    if task.task == "close" and done.get("registrationState") == "CLOSED":
        # Every event's waitlist closes with registration (safe to repeat: a retried task too).
        race_events = window_tasks().events(task.raceId)
        waitlist_closing().closed(task.raceId, race_events)
    return done
