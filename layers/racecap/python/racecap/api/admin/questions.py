"""An event's registration questions and waiver."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.api.admin.common import SECURITY, as_json, director_of, owner_of
from racecap.errors import EventNotFound
from racecap.models import Director
from racecap.observability import tracer
from racecap.questions.models import QuestionSetDraft, QuestionSetView
from racecap.questions.wiring import questions
from racecap.races.models import Event, Race

router = Router()
_director = director_of(router)
_owned = owner_of(router)


# -- registration questions ----------------------------------------------------------------------
def _owned_event(race_id: str, event_id: str) -> tuple[Director, Race, Event]:
    director, race, events = _owned(race_id)
    event = next((e for e in events if e.eventId == event_id), None)
    if event is None:
        raise EventNotFound(f"Race {race_id} has no event {event_id}.")
    return director, race, event


NO_EVENT: dict[int, OpenAPIResponse] = {404: {"description": "RACE_NOT_FOUND (or not yours), EVENT_NOT_FOUND"}}


@router.get(
    "/api/admin/races/<raceId>/events/<eventId>/questions",
    summary="The event's registration questions as runners are asked them now",
    tags=["Admin: questions"],
    security=SECURITY,
    responses=NO_EVENT,
)
@tracer.capture_method
def get_questions(raceId: str, eventId: str) -> Response[QuestionSetView]:
    _, race, event = _owned_event(raceId, eventId)
    return as_json(200, questions().view(race, event))


@router.put(
    "/api/admin/races/<raceId>/events/<eventId>/questions",
    summary="Save the event's questions as a new version",
    description="Send the whole set: your questions in order and the built-ins to ask. Each save is the "
    "next version; registrations keep the version they answered. With `expectedVersion`, a save built "
    "on an older version is refused (409).",
    tags=["Admin: questions"],
    security=SECURITY,
    responses={
        **NO_EVENT,
        400: {"description": "VALIDATION_ERROR with fields (e.g. questions.2.options)"},
        409: {"description": "CONFLICT: another save came first"},
    },
)
@tracer.capture_method
def save_questions(raceId: str, eventId: str, body: Annotated[QuestionSetDraft, Body()]) -> Response[QuestionSetView]:
    director, race, event = _owned_event(raceId, eventId)
    return as_json(200, questions().save(director, race, event, body))


@router.get(
    "/api/admin/races/<raceId>/events/<eventId>/questions/<version>",
    summary="One saved version of the event's questions (what older registrations answered)",
    tags=["Admin: questions"],
    security=SECURITY,
    responses={404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND or QUESTIONS_VERSION_NOT_FOUND"}},
)
@tracer.capture_method
def get_questions_version(
    raceId: str, eventId: str, version: Annotated[int, Path(ge=1, le=1_000_000)]
) -> Response[QuestionSetView]:
    _, race, event = _owned_event(raceId, eventId)
    return as_json(200, questions().view(race, event, version))
