"""An event's waitlist, for runners: join a sold-out event's list, confirm the address from the
emailed link, see the place and leave (the link's token)."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.api.runner.common import client_of
from racecap.fairness.identity import NEEDS_DEVICE, OWN_WAITLIST_ENTRY, WAITLIST_HEADER, lower_headers
from racecap.holds.models import HoldCreated
from racecap.http import NO_STORE
from racecap.observability import tracer
from racecap.waitlist.models import (
    MyWaitlistEntry,
    OfferToken,
    OfferView,
    WaitlistConfirm,
    WaitlistJoin,
    WaitlistJoined,
)
from racecap.waitlist.wiring import offer_claims, waitlist

router = Router()
caller = client_of(router)

JOIN_SENT = (
    "Check your inbox: open the link we sent to confirm your address and take your place on the waitlist. "
    "It can take a few minutes; check the spam folder too."
)
_LINK_ERRORS: dict[int, OpenAPIResponse] = {
    401: {"description": "INVALID_TOKEN (missing, altered or not a waitlist link), TOKEN_EXPIRED"},
    404: {"description": "WAITLIST_ENTRY_NOT_FOUND: the entry expired unconfirmed or is gone (join again)"},
}


def _token() -> str | None:
    return lower_headers(router.current_event.raw_event).get(WAITLIST_HEADER)


@router.post(
    "/api/races/<raceId>/events/<eventId>/waitlist",
    summary="Join a sold-out event's waitlist: a link to confirm the address is emailed to it",
    description=(
        "Always answers 202 with the same words whether or not the address is on the list already (one entry per "
        "address per event; it counts once confirmed from the email). Behind the opening queue's protections: the "
        "device token, a solved challenge from `POST /api/races/{raceId}/queue/challenge` (spent once), and rate "
        "limits per address, network and device (429 with Retry-After)."
    ),
    tags=["Waitlist"],
    security=NEEDS_DEVICE,
    responses={
        202: {"description": "Asked: the confirmation link is on its way"},
        400: {"description": "VALIDATION_ERROR"},
        401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN"},
        403: {"description": "PROOF_OF_WORK_REFUSED (missing, wrong or reused proof), TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND"},
        409: {
            "description": "WAITLIST_CLOSED (no waitlist, or registration not open), NOT_SOLD_OUT (places left: "
            "hold one), WAITLIST_FULL (the organiser's cap on its length)"
        },
        429: {"description": "TOO_MANY_REQUESTS", "headers": {"Retry-After": {"description": "Seconds to wait"}}},
    },
)
@tracer.capture_method
def join_waitlist(raceId: str, eventId: str, body: Annotated[WaitlistJoin, Body()]) -> Response[WaitlistJoined]:
    waitlist().join(raceId, eventId, caller(), body)
    return Response(202, content_types.APPLICATION_JSON, WaitlistJoined(message=JOIN_SENT), headers=NO_STORE)


@router.post(
    "/api/waitlist/confirm",
    summary="Confirm the address from the emailed link: the entry joins the line with the next number",
    description="Safe to repeat: a confirmed entry answers its place. The answer's `waitlistToken` opens "
    "`GET`/`DELETE /api/waitlist/me`.",
    tags=["Waitlist"],
    responses={
        400: {"description": "VALIDATION_ERROR"},
        401: {"description": "INVALID_TOKEN, TOKEN_EXPIRED"},
        404: {"description": "WAITLIST_ENTRY_NOT_FOUND: it expired unconfirmed (join again)"},
        409: {"description": "WAITLIST_FULL (nothing was added), WAITLIST_CLOSED"},
        429: {"description": "TOO_MANY_REQUESTS: many confirmations at once; retry"},
    },
)
@tracer.capture_method
def confirm_waitlist(body: Annotated[WaitlistConfirm, Body()]) -> Response[MyWaitlistEntry]:
    return Response(200, content_types.APPLICATION_JSON, waitlist().confirm(body.token), headers=NO_STORE)


@router.get(
    "/api/waitlist/me",
    summary="My waitlist entry: its state and my place in line",
    tags=["Waitlist"],
    security=OWN_WAITLIST_ENTRY,
    responses=_LINK_ERRORS,
)
@tracer.capture_method
def my_waitlist_entry() -> Response[MyWaitlistEntry]:
    return Response(200, content_types.APPLICATION_JSON, waitlist().mine(_token()), headers=NO_STORE)


@router.delete(
    "/api/waitlist/me",
    summary="Leave the waitlist (my name and address are deleted at once)",
    description="Safe to repeat. Joining again later puts you at the back of the line.",
    tags=["Waitlist"],
    security=OWN_WAITLIST_ENTRY,
    responses={**_LINK_ERRORS, 204: {"description": "Left"}},
)
@tracer.capture_method
def leave_waitlist() -> Response[None]:
    waitlist().leave(_token())
    return Response(204, headers=NO_STORE)


_OFFER_ERRORS: dict[int, OpenAPIResponse] = {
    400: {"description": "VALIDATION_ERROR"},
    401: {"description": "INVALID_TOKEN (missing, altered or not an offer link), TOKEN_EXPIRED"},
    404: {"description": "WAITLIST_ENTRY_NOT_FOUND: the offer is gone (its race's data was purged)"},
}


@router.post(
    "/api/waitlist/offer",
    summary="The place offered to me from the waitlist: its state, deadline and price now",
    description="The token travels in the body, never in a URL (it is the offer).",
    tags=["Waitlist"],
    responses=_OFFER_ERRORS,
)
@tracer.capture_method
def my_offer(body: Annotated[OfferToken, Body()]) -> Response[OfferView]:
    return Response(200, content_types.APPLICATION_JSON, offer_claims().view(body.token), headers=NO_STORE)


@router.post(
    "/api/waitlist/offer/claim",
    summary="Claim the offered place: it becomes my hold, to register (with the offered address) and pay",
    description=(
        "Not the public hold path: the place was kept for the line, so the event stays sold out for everyone "
        "else, and no queue, device or hold limit applies. The price is the tier in force now. Safe to repeat: "
        "a claimed offer answers its hold."
    ),
    tags=["Waitlist"],
    responses={
        **_OFFER_ERRORS,
        201: {"description": "Claimed: the hold to register and pay with"},
        409: {"description": "REGISTRATION_CLOSED, EMAIL_ALREADY_REGISTERED (the place went to the next in line)"},
        410: {"description": "OFFER_EXPIRED (the place went to the next in line), OFFER_GONE (declined, closed)"},
    },
)
@tracer.capture_method
def claim_offer(body: Annotated[OfferToken, Body()]) -> Response[HoldCreated]:
    return Response(201, content_types.APPLICATION_JSON, offer_claims().claim(body.token), headers=NO_STORE)


@router.post(
    "/api/waitlist/offer/decline",
    summary="Pass the offered place on: the next runner in line is offered it at once",
    description="Safe to repeat.",
    tags=["Waitlist"],
    responses={**_OFFER_ERRORS, 204: {"description": "Passed on"}},
)
@tracer.capture_method
def decline_offer(body: Annotated[OfferToken, Body()]) -> Response[None]:
    offer_claims().decline(body.token)
    return Response(204, headers=NO_STORE)
