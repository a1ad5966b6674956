"""The API's shapes for team entries."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from racecap.logic.validation import PaymentMethodId, RunnerDetails
from racecap.models import JsonInt, Model
from racecap.teams.rules import MAX_TEAM_SIZE, MIN_TEAM_SIZE


class TeamHoldRequest(Model):
    model_config = ConfigDict(extra="forbid")

    places: JsonInt = Field(
        ge=MIN_TEAM_SIZE,
        le=MAX_TEAM_SIZE,
        description="The team's size: within the event's teamMinSize..teamMaxSize. All places are held or none.",
    )


class TeamRegistrationRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    teamName: str = Field(min_length=1, max_length=80, pattern=r"\S")
    members: list[RunnerDetails] = Field(
        min_length=MIN_TEAM_SIZE,
        max_length=MAX_TEAM_SIZE,
        description="Every member's details, the captain first: as many as the places held.",
    )
    paymentMethod: PaymentMethodId | None = Field(
        default=None, description="As on a single registration: confirm the team's one payment on the server."
    )
