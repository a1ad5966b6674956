"""The directors' races and events: list, create, edit, add an event, copy, publish, unpublish."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, director_of, owner_of
from racecap.observability import tracer
from racecap.setup.models import (
    MAX_EVENTS,
    AdminRaceList,
    AdminRaceView,
    CopyRequest,
    EventDraft,
    EventPatch,
    PublishRequest,
    RaceDraft,
    RacePatch,
    UnpublishRequest,
)
from racecap.setup.wiring import race_admin

router = Router()
_director = director_of(router)
_owned = owner_of(router)


# -- races and events -------------------------------------------------------------------------
@router.get("/api/admin/races", summary="Your races", tags=["Admin: races"], security=SECURITY)
@tracer.capture_method
def list_races() -> Response[AdminRaceList]:
    return as_json(200, race_admin().list_races(_director()))


@router.post(
    "/api/admin/races",
    summary="Create a race with its events",
    description="A new race is a draft, closed to runners, until you publish it (or create it UNLISTED or "
    "LISTED, if it is complete). Registration stays closed until you schedule the window or open it now.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={201: {"description": "Created"}, 400: {"description": "VALIDATION_ERROR with fields"}},
)
@tracer.capture_method
def create_race(body: Annotated[RaceDraft, Body()]) -> Response[AdminRaceView]:
    director = _director()
    race = race_admin().create_race(director.sub, body, director=director)
    return as_json(201, race_admin().get(director, race.raceId))


@router.get(
    "/api/admin/races/<raceId>",
    summary="One of your races",
    tags=["Admin: races"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def get_race(raceId: str) -> Response[AdminRaceView]:
    return as_json(200, race_admin().get(_director(), raceId))


@router.patch(
    "/api/admin/races/<raceId>",
    summary="Edit a race",
    description="Send only the fields to change. New registration times also move a scheduled window.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 400: {"description": "VALIDATION_ERROR"}, 409: {"description": "CONFLICT"}},
)
@tracer.capture_method
def edit_race(raceId: str, body: Annotated[RacePatch, Body()]) -> Response[AdminRaceView]:
    return as_json(200, race_admin().update_race(_director(), raceId, body))


@router.post(
    "/api/admin/races/<raceId>/events",
    summary="Add an event to a race",
    description=f"A race has at most {MAX_EVENTS} events (409 TOO_MANY_EVENTS beyond).",
    tags=["Admin: races"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        201: {"description": "Created"},
        400: {"description": "VALIDATION_ERROR with fields (priceCents under the provider's minimum)"},
        409: {"description": "TOO_MANY_EVENTS or CONFLICT"},
    },
)
@tracer.capture_method
def add_event(raceId: str, body: Annotated[EventDraft, Body()]) -> Response[AdminRaceView]:
    return as_json(201, race_admin().add_event(_director(), raceId, body))


@router.patch(
    "/api/admin/races/<raceId>/events/<eventId>",
    summary="Edit an event: name, price, cap",
    description="Raising the cap adds places at once; lowering it below the places taken is refused "
    "(409 CAP_BELOW_TAKEN).",
    tags=["Admin: races"],
    security=SECURITY,
    responses={
        **NOT_YOURS,
        400: {"description": "VALIDATION_ERROR with fields (priceCents under the provider's minimum)"},
        409: {"description": "CAP_BELOW_TAKEN or CONFLICT"},
    },
)
@tracer.capture_method
def edit_event(raceId: str, eventId: str, body: Annotated[EventPatch, Body()]) -> Response[AdminRaceView]:
    return as_json(200, race_admin().update_event(_director(), raceId, eventId, body))


@router.post(
    "/api/admin/races/<raceId>/copy",
    summary="Copy a race: next year's edition as a new draft",
    description="Settings and events (places, prices, age rules) are copied; the race date moves to `raceDate` "
    "(default: a year later) and the registration window with it. No registrations come along.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 201: {"description": "The new draft"}, 400: {"description": "VALIDATION_ERROR"}},
)
@tracer.capture_method
def copy_race(raceId: str, body: Annotated[CopyRequest | None, Body()] = None) -> Response[AdminRaceView]:
    director = _director()
    copy = race_admin().copy_race(director, raceId, body or CopyRequest())
    return as_json(201, race_admin().get(director, copy.raceId))


@router.post(
    "/api/admin/races/<raceId>/publish",
    summary="Publish a race: open by its link (UNLISTED) or also on the race list (LISTED)",
    description="Checks the race is ready for runners first: 409 RACE_INCOMPLETE with `fields` naming what is "
    "missing. Repeating it changes nothing.",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "RACE_INCOMPLETE (fields say what is missing), or CONFLICT"}},
)
@tracer.capture_method
def publish_race(raceId: str, body: Annotated[PublishRequest | None, Body()] = None) -> Response[AdminRaceView]:
    asked = body or PublishRequest()
    return as_json(200, race_admin().publish(_director(), raceId, asked.listing, asked.expectedVersion))


@router.post(
    "/api/admin/races/<raceId>/unpublish",
    summary="Back to a draft, closed to runners (only while no place is held or taken)",
    tags=["Admin: races"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CONFLICT: places are held or taken (make it UNLISTED instead)"}},
)
@tracer.capture_method
def unpublish_race(raceId: str, body: Annotated[UnpublishRequest | None, Body()] = None) -> Response[AdminRaceView]:
    return as_json(200, race_admin().unpublish(_director(), raceId, body.expectedVersion if body else None))
