"""The window capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import ConfigurationError, get_settings

if TYPE_CHECKING:
    from racecap.window.prewarm import WarmStarts
    from racecap.window.service import WindowControl, WindowTasks
    from racecap.window.store import DynamoWindows


@lru_cache(maxsize=1)
def windows() -> DynamoWindows:
    from racecap.window.store import DynamoWindows

    return DynamoWindows(clients.dynamodb(), get_settings().races_table)


@lru_cache(maxsize=1)
def window_tasks() -> WindowTasks:
    from racecap.cache import shared as cache
    from racecap.fairness.wiring import opening_queue
    from racecap.places.wiring import inventory
    from racecap.races.wiring import catalog, race_store
    from racecap.window.service import WindowTasks

    return WindowTasks(race_store(), inventory(), catalog(), cache(), windows(), opened=opening_queue().opened)


@lru_cache(maxsize=1)
def warm_starts() -> WarmStarts:
    from racecap.races.wiring import race_store
    from racecap.window.prewarm import WarmStarts
    from racecap.window.store import AutoScalingWarmStarts

    settings = get_settings()
    target = settings.warm_start_target
    scaler = AutoScalingWarmStarts(clients.aws("application-autoscaling"), target) if target else None
    return WarmStarts(race_store(), windows(), scaler, settings.warm_start_max)


@lru_cache(maxsize=1)
def window_control() -> WindowControl:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.fairness.wiring import opening_queue
    from racecap.races.wiring import catalog, race_store
    from racecap.window.service import WindowControl
    from racecap.window.store import StepFunctionsWorkflow

    arn = get_settings().window_state_machine_arn
    if arn is None:
        raise ConfigurationError("WINDOW_STATE_MACHINE_ARN is not set for this function")
    workflow = StepFunctionsWorkflow(clients.aws("stepfunctions"), arn)
    return WindowControl(
        race_store(), windows(), workflow, transact, audit_trail(), catalog(), opened=opening_queue().opened
    )
