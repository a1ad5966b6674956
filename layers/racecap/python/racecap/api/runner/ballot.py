"""An event's ballot, for runners: apply (alone or as a group) while its window is open, confirm
the address from the emailed link, see the application and withdraw it (the link's token)."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.api.runner.common import client_of
from racecap.ballot.models import BallotApplied, BallotApply, BallotLink, DrawView, MyApplication
from racecap.ballot.wiring import ballots
from racecap.fairness.identity import BALLOT_HEADER, NEEDS_DEVICE, OWN_BALLOT_APPLICATION, lower_headers
from racecap.http import NO_STORE
from racecap.observability import tracer

router = Router()
caller = client_of(router)

APPLY_SENT = (
    "Check your inbox: open the link we sent to confirm your address; only then does your application count. "
    "Everyone in a group gets their own link. It can take a few minutes; check the spam folder too."
)
_LINK_ERRORS: dict[int, OpenAPIResponse] = {
    401: {"description": "INVALID_TOKEN (missing, altered or not a ballot link), TOKEN_EXPIRED"},
    404: {"description": "BALLOT_APPLICATION_NOT_FOUND: the application expired unconfirmed or is gone (apply again)"},
}


def _token() -> str | None:
    return lower_headers(router.current_event.raw_event).get(BALLOT_HEADER)


@router.post(
    "/api/races/<raceId>/events/<eventId>/ballot",
    summary="Apply to an event's ballot, alone or as a group: a link to confirm each address is emailed to it",
    description=(
        "One application per address per race's ballot. Alone, the answer is the same 202 whether or not the address "
        "has applied already (its link is sent again). A group (up to the event's largest team) is drawn together or "
        "not at all; it is refused whole (409) if one of its addresses has applied already. Behind the opening "
        "queue's protections: the device token, a solved challenge from `POST /api/races/{raceId}/queue/challenge` "
        "(spent once), and rate limits per address, network and device (429 with Retry-After)."
    ),
    tags=["Ballot"],
    security=NEEDS_DEVICE,
    responses={
        202: {"description": "Asked: the confirmation links are on their way"},
        400: {"description": "VALIDATION_ERROR (the age rule on race day, the group's size, the fields)"},
        401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN"},
        403: {"description": "PROOF_OF_WORK_REFUSED (missing, wrong or reused proof), TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND"},
        409: {
            "description": "BALLOT_CLOSED (no ballot, or its window is not open), BALLOT_ALREADY_APPLIED (a group's "
            "address has an application in this race's ballot, or is given twice in the group)"
        },
        429: {"description": "TOO_MANY_REQUESTS", "headers": {"Retry-After": {"description": "Seconds to wait"}}},
    },
)
@tracer.capture_method
def apply_to_ballot(raceId: str, eventId: str, body: Annotated[BallotApply, Body()]) -> Response[BallotApplied]:
    ballots().apply(raceId, eventId, caller(), body)
    return Response(202, content_types.APPLICATION_JSON, BallotApplied(message=APPLY_SENT), headers=NO_STORE)


@router.post(
    "/api/ballot/confirm",
    summary="Confirm the address from the emailed link: the application counts in the draw",
    description="Safe to repeat. The answer's `ballotToken` opens `GET`/`DELETE /api/ballot/me`.",
    tags=["Ballot"],
    responses={
        **_LINK_ERRORS,
        400: {"description": "VALIDATION_ERROR"},
        409: {"description": "BALLOT_CLOSED: the window closed before the address was confirmed"},
    },
)
@tracer.capture_method
def confirm_application(body: Annotated[BallotLink, Body()]) -> Response[MyApplication]:
    return Response(200, content_types.APPLICATION_JSON, ballots().confirm(body.token), headers=NO_STORE)


@router.get(
    "/api/ballot/me",
    summary="My ballot application: its state, group, and when the draw is",
    tags=["Ballot"],
    security=OWN_BALLOT_APPLICATION,
    responses=_LINK_ERRORS,
)
@tracer.capture_method
def my_application() -> Response[MyApplication]:
    return Response(200, content_types.APPLICATION_JSON, ballots().mine(_token()), headers=NO_STORE)


@router.delete(
    "/api/ballot/me",
    summary="Withdraw my application (my name and address are deleted at once), until the window closes",
    description="Safe to repeat. The rest of a group stays in the ballot. The address may apply again.",
    tags=["Ballot"],
    security=OWN_BALLOT_APPLICATION,
    responses={
        **_LINK_ERRORS,
        204: {"description": "Withdrawn"},
        409: {"description": "BALLOT_CLOSED: the window has closed (the application stays in the draw)"},
    },
)
@tracer.capture_method
def withdraw_application() -> Response[None]:
    ballots().withdraw(_token())
    return Response(204, headers=NO_STORE)


@router.get(
    "/api/races/<raceId>/events/<eventId>/ballot/draw",
    summary="The event's ballot draw as published: the seed revealed, the figures, and how to check it",
    description="Once the draw ran. The seed's SHA-256 is the commitment the race page showed before the window "
    "opened; the list's pages (`…/ballot/list?page=N`) and `tools/verify_draw.py` re-compute the winners.",
    tags=["Ballot"],
    responses={404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND, BALLOT_NOT_DRAWN"}},
)
@tracer.capture_method
def published_draw(raceId: str, eventId: str) -> Response[DrawView]:
    return Response(200, content_types.APPLICATION_JSON, ballots().published(raceId, eventId), headers=NO_STORE)


@router.get(
    "/api/races/<raceId>/events/<eventId>/ballot/list",
    summary="A page of the ballot's published list: `ticket,size` per row, by id (no address, ever)",
    description="A ticket is an application alone or a group (its id, its size). Page 0 starts with the header; "
    "the pages one after the other are the list.",
    tags=["Ballot"],
    responses={
        200: {"description": "The page, as CSV", "content": {"text/csv": {"schema": {"type": "string"}}}},
        404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND, BALLOT_NOT_DRAWN (or no such page)"},
    },
)
@tracer.capture_method
def published_list(
    raceId: str, eventId: str, page: Annotated[int, Query(ge=0, le=100_000, description="From 0.")] = 0
) -> Response[str]:
    text = ballots().list_page(raceId, eventId, page)
    # The list never changes once drawn: caches may keep it.
    return Response(200, "text/csv; charset=utf-8", text, headers={"Cache-Control": "public, max-age=3600"})
