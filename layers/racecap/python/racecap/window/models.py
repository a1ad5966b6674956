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


# What the window is doing now, in one word (``WindowControl.view``): a console shows this
# rather than guessing from registrationState, which says SCHEDULED for a race nobody scheduled.
WindowPhase = Literal["NOT_SCHEDULED", "SCHEDULED", "WARMING", "OPEN", "CLOSED"]


WindowAction = Literal["schedule", "open", "close"]


class WorkflowView(Model):
    execution: str
    executionArn: str
    mode: Literal["schedule", "open"]
    status: str = Field(description="RUNNING, SUCCEEDED, FAILED, ABORTED, TIMED_OUT, or UNKNOWN")
    opensAt: datetime
    closesAt: datetime
    warmUpAt: datetime = Field(description="When the workflow warms the caches and checks the shards.")
    startedAt: datetime
    startedBy: str


class WindowView(Model):
    raceId: str
    status: PublicRaceStatus
    registrationState: RegistrationState
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    workflow: WorkflowView | None = Field(description="The window's current workflow; null when none runs.")
    phase: WindowPhase = Field(
        description="NOT_SCHEDULED: not open and no workflow will open it; SCHEDULED: a running workflow opens it "
        "at registrationOpensAt; WARMING: that workflow's warm-up time has come, the opening is next; OPEN; CLOSED."
    )
    actions: list[WindowAction] = Field(
        description="The window actions that would change something now and are not refused: schedule and open "
        "while the closing time is ahead and the race is published (a draft is closed to runners; the calls "
        "still accept it), close while registration is open or a workflow runs."
    )
    changed: bool = Field(description="False when the call found the window already as asked (a repeat).")
