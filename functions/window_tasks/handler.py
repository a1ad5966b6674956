"""WindowTasks: the Task states of the RegistrationWindow workflow (warm, open, close).

Errors propagate as exceptions: their class names are what the ASL's Retry/Catch match.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, Field
from racecap.config import get_settings
from racecap.observability import logger, metrics, tracer
from racecap.wiring import window_tasks

get_settings()


class WindowTask(BaseModel):
    task: str = Field(pattern="^(warm|open|close)$")
    raceId: str = Field(min_length=1)
    # The workflow execution running the task ($$.Execution.Name): a replaced one no-ops.
    execution: str | None = None


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    task = WindowTask.model_validate(event)
    return window_tasks().run(task.task, task.raceId, task.execution)
