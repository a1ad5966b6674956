"""What the results API says (pydantic, so the OpenAPI document describes it)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from racecap.models import JsonInt, Model

UploadStatus = Literal["WAITING_FOR_FILE", "PROCESSING", "READY", "REJECTED"]


# -- directors --------------------------------------------------------------------------
class UploadRequest(Model):
    """How the next file is read; every field has a default."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    categories: list[str] = Field(
        default=["F", "M", "X"],
        min_length=1,
        max_length=20,
        description="The values the category (gender division) column may hold, compared in capitals.",
    )
    ageGroupYears: JsonInt = Field(default=5, ge=1, le=50, description="Width of the age groups: 5 gives 40-44.")
    rankBy: Literal["chip", "gun"] = Field(default="chip", description="Which time decides the places.")
    teamScoring: JsonInt = Field(
        default=3,
        ge=1,
        le=25,
        description="Team standings (an event with team entries): the sum of each team's best teamScoring times.",
    )


class LineError(Model):
    line: int = Field(description="Line of the file; the header is line 1.")
    reason: str


class UploadView(Model):
    uploadId: str
    raceId: str
    eventId: str
    status: UploadStatus
    createdAt: datetime
    finishedAt: datetime | None = None
    rows: int | None = Field(default=None, description="Runners in the file, once READY.")
    version: int | None = Field(default=None, description="The results version the file became, once READY.")
    errorCount: int = 0
    errors: list[LineError] = Field(default_factory=list, description="The first 500 problems, by line.")
    message: str | None = None


class UploadTicket(UploadView):
    uploadUrl: str = Field(description="PUT the CSV file here (Content-Type: text/csv) before expiresAt.")
    uploadMethod: Literal["PUT"] = "PUT"
    uploadHeaders: dict[str, str]
    expiresAt: datetime


class EventResultsAdminView(Model):
    raceId: str
    eventId: str
    version: int | None = Field(description="The newest valid upload's version (what publishing shows).")
    published: bool
    publishedAt: datetime | None = None
    rows: int | None = None
    uploads: list[UploadView] = Field(description="The latest uploads, newest first.")


# -- runners ----------------------------------------------------------------------------
class EventResultsPointer(Model):
    eventId: str
    name: str
    published: bool
    version: int | None = Field(description="Fetch the versioned URLs with this; None while unpublished.")
    finishers: int | None = None


class RaceResultsView(Model):
    """The small, short-cached answer: which version of each event's results is current."""

    raceId: str
    raceName: str
    events: list[EventResultsPointer]


class ResultRow(Model):
    place: int | None = Field(description="Overall place; None for DNF, DNS and DQ.")
    genderPlace: int | None
    ageGroupPlace: int | None
    bib: int
    name: str
    gender: str | None = Field(description="The category column (the gender division).")
    age: int | None = Field(description="Age on race day, from the registration.")
    ageGroup: str | None
    status: Literal["FINISHED", "DNF", "DNS", "DQ"]
    chipTime: str | None
    gunTime: str | None


class ResultsPage(Model):
    raceId: str
    eventId: str
    eventName: str
    version: int
    page: int
    size: int
    total: int = Field(description="Runners matching the filters.")
    pages: int
    gender: str | None
    ageGroup: str | None
    genders: list[str] = Field(description="Values the gender filter takes.")
    ageGroups: list[str] = Field(description="Values the age-group filter takes.")
    results: list[ResultRow]


class Split(Model):
    name: str
    time: str | None


class RunnerResult(ResultRow):
    splits: list[Split]
    of: dict[str, int | None] = Field(description="How many placed in each ranking: overall, gender, ageGroup.")


class RunnerResultView(Model):
    raceId: str
    eventId: str
    eventName: str
    version: int
    result: RunnerResult


class Suggestion(Model):
    bib: int
    name: str
    place: int | None
    gender: str | None
    ageGroup: str | None
    status: str


class SuggestionList(Model):
    version: int
    q: str
    suggestions: list[Suggestion] = Field(max_length=10)


class TeamMemberResult(Model):
    bib: int
    name: str
    time: str | None = Field(description="The member's ranking time; null if they did not finish.")
    scored: bool = Field(description="Whether this time counts in the team's total.")


class TeamStandingRow(Model):
    place: int | None = Field(description="Null: fewer than teamScoring members finished.")
    team: str
    total: str | None = Field(description="The sum of the counted times, H:MM:SS.")
    totalMs: int | None
    members: list[TeamMemberResult]


class TeamStandingsView(Model):
    raceId: str
    eventId: str
    version: int
    teamScoring: int = Field(description="How many members' times count per team.")
    teams: list[TeamStandingRow]
