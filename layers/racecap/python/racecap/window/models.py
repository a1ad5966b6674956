"""The registration window's record and its API shapes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from racecap.models import Model, _Record
from racecap.races.models import PublicRaceStatus, RegistrationState


class WindowRecord(_Record):
    """Which workflow execution runs a race's registration window (Races ``RACE#<id> / WINDOW``)."""

    raceId: str
    startedAt: str
    startedBy: str
    seq: int = 0  # moves on with every change (the condition that keeps two clicks apart)
    execution: str | None = None  # None: no workflow (closed by hand)
    mode: Literal["schedule", "open"] | None = None
    opensAt: str | None = None
    closesAt: str | None = None


class WorkflowView(Model):
    execution: str
    executionArn: str
    mode: Literal["schedule", "open"]
    status: str = Field(description="RUNNING, SUCCEEDED, FAILED, ABORTED, TIMED_OUT, or UNKNOWN")
    opensAt: datetime
    closesAt: datetime
    startedAt: datetime
    startedBy: str


class WindowView(Model):
    raceId: str
    status: PublicRaceStatus
    registrationState: RegistrationState
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    workflow: WorkflowView | None = Field(description="The window's current workflow; null when none runs.")
    changed: bool = Field(description="False when the call found the window already as asked (a repeat).")
