"""Holding places: one place, a team's places, a hold's view, giving it back."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.api.runner.common import client_of
from racecap.codes.models import GuaranteedHoldRequest
from racecap.codes.wiring import guaranteed_entries
from racecap.fairness.identity import HOLDS_SECURITY
from racecap.fairness.limits import client_limits
from racecap.fairness.wiring import opening_queue
from racecap.holds.models import HoldCreated, HoldView, TeamHoldRequest
from racecap.holds.wiring import hold_service
from racecap.http import NO_STORE
from racecap.observability import tracer

router = Router()

# What refuses a hold besides the event itself (a single's or a team's): the device and admission
# tokens, the race's queue, the limits per device and address.
HOLD_REFUSED: dict[int, OpenAPIResponse] = {
    401: {"description": "INVALID_TOKEN, TOKEN_EXPIRED (device or admission token)"},
    403: {"description": "QUEUE_ADMISSION_REQUIRED (the race's queue is on), TOKEN_NOT_YOURS"},
    404: {"description": "RACE_NOT_FOUND or EVENT_NOT_FOUND"},
    429: {"description": "TOO_MANY_HOLDS (device or address at its limit) or TOO_MANY_REQUESTS; see Retry-After"},
}
_client = client_of(router)


@router.post(
    "/api/races/<raceId>/events/<eventId>/holds",
    summary="Hold one place for the race's hold window",
    tags=["Registration"],
    security=HOLDS_SECURITY,
    responses={
        201: {
            "description": "Held",
            "links": {
                "Register": {
                    "operationId": "register_api_holds__holdId__registration_post",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
                "Release": {
                    "operationId": "release_hold_api_holds__holdId__delete",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
            },
        },
        409: {"description": "SOLD_OUT or REGISTRATION_CLOSED"},
        **HOLD_REFUSED,
    },
)
@tracer.capture_method
def create_hold(raceId: str, eventId: str) -> Response[HoldCreated]:
    held = hold_service().hold(raceId, eventId, limits=_hold_limits(raceId))
    return Response(201, content_types.APPLICATION_JSON, held, headers=NO_STORE)


@router.post(
    "/api/races/<raceId>/events/<eventId>/holds/guaranteed",
    summary="Hold a place with a guaranteed-entry code",
    description=(
        "For a runner the race director gave a guaranteed entry (charity, qualifier, deferral). On an event "
        "drawn by ballot, the one way to hold a place first-hand: one of the places the ballot keeps out of the "
        "draw, once it is drawn. The code is checked first (a guaranteed entry, valid now and for the event), "
        "then the place is held with the code applied (its use taken); the place keeps the code. On other events "
        "it holds a place and applies the code, as the two calls would. Then register as usual."
    ),
    tags=["Registration"],
    security=HOLDS_SECURITY,
    responses={
        201: {
            "description": "Held, at the code's price",
            "links": {
                "Register": {
                    "operationId": "register_api_holds__holdId__registration_post",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
            },
        },
        400: {"description": "CODE_INVALID: not a guaranteed entry, or a price the provider cannot charge"},
        404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND or CODE_UNKNOWN"},
        409: {
            "description": "KEPT_PLACES_NOT_OPEN (the ballot is not drawn yet), SOLD_OUT (the kept places are "
            "taken), CODE_USED_UP, CODE_EXPIRED, CODE_NOT_YET_VALID, CODE_NOT_FOR_EVENT, REGISTRATION_CLOSED"
        },
        **{k: v for k, v in HOLD_REFUSED.items() if k != 404},
    },
)
@tracer.capture_method
def create_guaranteed_hold(
    raceId: str, eventId: str, body: Annotated[GuaranteedHoldRequest, Body()]
) -> Response[HoldCreated]:
    held = guaranteed_entries().hold(raceId, eventId, body.code, limits=_hold_limits(raceId))
    return Response(201, content_types.APPLICATION_JSON, held, headers=NO_STORE)


def _hold_limits(race_id: str) -> dict[str, int]:
    """The caller's hold-limit counters, once the race's queue (when on) has admitted it."""
    who = _client()
    return client_limits(race_id, who, opening_queue().admit_hold(race_id, who))


@router.get(
    "/api/holds/<holdId>",
    summary="A hold, as its link shows it on any device",
    description="The event, the price held, the clock, and how far it got (details sent, paid). Never the "
    "runner's name, email or date of birth.",
    tags=["Registration"],
    responses={404: {"description": "HOLD_NOT_FOUND"}},
)
@tracer.capture_method
def get_hold(holdId: str) -> Response[HoldView]:
    return Response(200, content_types.APPLICATION_JSON, hold_service().view(holdId), headers=NO_STORE)


@router.delete(
    "/api/holds/<holdId>",
    summary="Give a held place back",
    tags=["Registration"],
    responses={
        204: {"description": "Released"},
        404: {"description": "HOLD_NOT_FOUND"},
        409: {"description": "CONFLICT: the place is paid for (the director cancels a registration)"},
    },
)
@tracer.capture_method
def release_hold(holdId: str) -> Response[None]:
    hold_service().release(holdId)
    return Response(204, headers=NO_STORE)


@router.post(
    "/api/races/<raceId>/events/<eventId>/teams",
    summary="Hold a team's places together: all of them or none",
    description=(
        "For an event with team entries (`teamMinSize`..`teamMaxSize` on the race page): `places` places are "
        "taken in one step across the event's cap, or none is. Fewer left than the team needs is a 409 "
        "`NOT_ENOUGH_PLACES` saying how many are; the event is not sold out for that. A team hold counts as "
        "one hold of the device and as all its places against the address's ceiling. Send every member's "
        "details next (POST /api/holds/{holdId}/team)."
    ),
    tags=["Registration"],
    security=HOLDS_SECURITY,
    responses={
        201: {
            "description": "Held",
            "links": {
                "RegisterTeam": {
                    "operationId": "register_team_api_holds__holdId__team_post",
                    "parameters": {"holdId": "$response.body#/holdId"},
                },
            },
        },
        400: {"description": "VALIDATION_ERROR: `places` outside the event's team sizes, or no team entries"},
        409: {"description": "NOT_ENOUGH_PLACES, SOLD_OUT or REGISTRATION_CLOSED"},
        **HOLD_REFUSED,
    },
)
@tracer.capture_method
def create_team_hold(raceId: str, eventId: str, body: Annotated[TeamHoldRequest, Body()]) -> Response[HoldCreated]:
    held = hold_service().hold_team(raceId, eventId, body.places, limits=_hold_limits(raceId))
    return Response(201, content_types.APPLICATION_JSON, held, headers=NO_STORE)
