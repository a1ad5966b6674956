"""An event's ballot, for its director: the settings (and the commitment they publish), and the
applications counted while it runs."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query

from racecap.api.admin.common import SECURITY, as_json, csv_page, director_of, owner_of
from racecap.ballot.models import BallotAdminView, BallotFields
from racecap.ballot.wiring import ballot_admin
from racecap.errors import EventNotFound
from racecap.observability import tracer
from racecap.participants.service import CURSOR_PATTERN
from racecap.participants.wiring import ballot_export

router = Router()
_director = director_of(router)
_owned = owner_of(router)


@router.get(
    "/api/admin/races/<raceId>/events/<eventId>/ballot",
    summary="The event's ballot: its settings, commitment, and applications counted (per day in the race's zone)",
    tags=["Admin: ballot"],
    security=SECURITY,
    responses={404: {"description": "RACE_NOT_FOUND (no such race, or not yours), EVENT_NOT_FOUND"}},
)
@tracer.capture_method
def get_ballot(raceId: str, eventId: str) -> Response[BallotAdminView]:
    return as_json(200, ballot_admin().get(_director(), raceId, eventId))


@router.put(
    "/api/admin/races/<raceId>/events/<eventId>/ballot",
    summary="Set the event's ballot: places are then drawn from applications, not held first-come",
    description=(
        "The window, the draw time, the places kept out of the draw for guaranteed entries, and the winners' days to "
        "pay. Times without an offset are the race's local times. The first save draws the secret seed and publishes "
        "its SHA-256 (the commitment) on the race page. Settings may change until the window opens, never after."
    ),
    tags=["Admin: ballot"],
    security=SECURITY,
    responses={
        400: {"description": "VALIDATION_ERROR (times out of order or past, keptPlaces not below the cap)"},
        404: {"description": "RACE_NOT_FOUND (no such race, or not yours), EVENT_NOT_FOUND"},
        409: {"description": "BALLOT_STARTED (the window opened: the settings are fixed), CONFLICT"},
    },
)
@tracer.capture_method
def set_ballot(raceId: str, eventId: str, body: Annotated[BallotFields, Body()]) -> Response[BallotAdminView]:
    return as_json(200, ballot_admin().set(_director(), raceId, eventId, body))


@router.get(
    "/api/admin/races/<raceId>/events/<eventId>/ballot/export",
    summary="The event's ballot applications as CSV: one row each, whatever its state",
    description="Columns: applicationId, state (PENDING, CONFIRMED, WITHDRAWN), groupId, groupSize, firstName, "
    "lastName, email, dateOfBirth, appliedAt, confirmedAt, withdrawnAt. Paged like the registrations' export: "
    'follow `Link: rel="next"` (or send `X-Next-Cursor` back as `cursor`) until there is none.',
    tags=["Admin: ballot"],
    security=SECURITY,
    responses={
        200: {"description": "A page of the CSV", "content": {"text/csv": {"schema": {"type": "string"}}}},
        400: {"description": "VALIDATION_ERROR (a cursor this API did not give out)"},
        404: {"description": "RACE_NOT_FOUND (no such race, or not yours), EVENT_NOT_FOUND"},
    },
)
@tracer.capture_method
def export_ballot(
    raceId: str, eventId: str, cursor: Annotated[str | None, Query(pattern=CURSOR_PATTERN)] = None
) -> Response[str]:
    _, race, events = _owned(raceId)
    event = next((e for e in events if e.eventId == eventId), None)
    if event is None:
        raise EventNotFound(f"Race {raceId} has no event {eventId}.")
    lines = ballot_export().lines(race, event, cursor=cursor)
    path = f"/api/admin/races/{raceId}/events/{eventId}/ballot/export"
    return csv_page(router, lines, path, f"{raceId}-{eventId}-ballot.csv")
