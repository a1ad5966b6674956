"""Registering a held place: the form (a runner's or a team's), the payment step, the status."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponseHeader

from racecap.api.runner.common import PROVIDER_BUSY
from racecap.config import get_settings
from racecap.http import NO_STORE
from racecap.observability import tracer
from racecap.registration.models import (
    RegistrationAccepted,
    RegistrationRequest,
    RegistrationStatus,
    TeamRegistrationRequest,
)
from racecap.registration.wiring import registration_service

router = Router()


_CONFIRM_LINK = {
    "Confirm": {
        "operationId": "confirm_payment_api_holds__holdId__payment_confirm_post",
        "parameters": {"holdId": "$request.path.holdId"},
    }
}
_OUTCOME_LINK = {
    "Outcome": {
        "operationId": "registration_status_api_registrations__registrationId__get",
        "parameters": {"registrationId": "$response.body#/registrationId"},
    }
}
_FIRST_CHECK: dict[str, OpenAPIResponseHeader] = {
    "Retry-After": {"description": "While QUEUED: seconds until it is likely confirmed (the writer's backlog)"}
}


@router.post(
    "/api/holds/<holdId>/team",
    summary="A team's details, the captain first: claim every email, get the team's one payment",
    description=(
        "Every member is checked as a runner would be (the event's age rule, questions, waiver; a 400 names "
        "`members.<i>.<field>`), then every member's email is claimed in one step: if one is registered already, "
        "a 409 names that member, nothing is charged and the team keeps its places. One PaymentIntent covers "
        "the team (each member's registration carries an equal share); answered as a single registration is. "
        "Once paid, every member gets their own registration, bib and confirmation email."
    ),
    tags=["Registration"],
    responses={
        200: {"description": "Payment required: confirm it with `clientSecret`", "links": _CONFIRM_LINK},
        202: {"description": "Paid and queued (the captain's registration id)", "headers": _FIRST_CHECK},
        400: {"description": "VALIDATION_ERROR with fields (`members.<i>.<field>`)"},
        402: {"description": "PAYMENT_DECLINED (with `paymentMethod`); the places stay held"},
        409: {
            "description": "EMAIL_ALREADY_REGISTERED (`fields` names the member), CONFLICT (a single place's "
            "hold, or a payment with other details in progress), PAYMENT_REFUSED or OPTION_SOLD_OUT",
        },
        410: {"description": "HOLD_EXPIRED"},
        404: {"description": "HOLD_NOT_FOUND"},
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def register_team(holdId: str, body: Annotated[TeamRegistrationRequest, Body()]) -> Response[RegistrationAccepted]:
    return _accepted(registration_service().register_team(holdId, body))


@router.post(
    "/api/holds/<holdId>/registration",
    summary="The runner's details: claim the email, get the hold's payment to confirm",
    description=(
        "Claims the email for the race, then answers with the hold's one PaymentIntent "
        "(`clientSecret`, for Stripe.js's `confirmPayment`) and the amount, from the server's price. "
        "Repeating the call (a retry, a second tab, after a decline) returns the same intent. "
        "With `paymentMethod` (a `pm_…` id) the intent is confirmed here instead. "
        "Once paid: `QUEUED` (202)."
    ),
    tags=["Registration"],
    responses={
        200: {"description": "Payment required: confirm it with `clientSecret`", "links": _CONFIRM_LINK},
        202: {"description": "Paid and queued", "links": _OUTCOME_LINK, "headers": _FIRST_CHECK},
        400: {"description": "VALIDATION_ERROR with fields (a bad answer: `answers.<questionId>`)"},
        402: {"description": "PAYMENT_DECLINED (with `paymentMethod`); the place stays held"},
        409: {
            "description": "EMAIL_ALREADY_REGISTERED, CONFLICT: a payment with other details is in progress, "
            "or the same call is still being processed, or PAYMENT_REFUSED: the payment provider refused to "
            "take this event's payment at all (nothing charged, the place stays held), or OPTION_SOLD_OUT: "
            "an option the answers chose has none left (`fields` names the answer; the place stays held)",
            "headers": {"Retry-After": {"description": "While the same call is still being processed"}},
        },
        410: {"description": "HOLD_EXPIRED"},
        404: {"description": "HOLD_NOT_FOUND"},
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def register(holdId: str, body: Annotated[RegistrationRequest, Body()]) -> Response[RegistrationAccepted]:
    # No idempotency record: the same call repeated (a double click, a retry after a lost
    # response) is safe by the hold's state machine (registration.service's doc).
    return _accepted(registration_service().register(holdId, body))


def _accepted(result: RegistrationAccepted) -> Response[RegistrationAccepted]:
    """Paid (202, with when to check first) or the card step (200, with what the card form needs)."""
    status = 202 if result.status in ("QUEUED", "CONFIRMED") else 200
    if status == 200:  # what the site's card form needs: public configuration, not secrets
        result.publishableKey = get_settings().payments_publishable_key
        result.paymentsScript = get_settings().payments_script_url
    return Response(status, content_types.APPLICATION_JSON, result, headers=_queued_headers(result))


def _queued_headers(result: RegistrationAccepted) -> dict[str, str]:
    """A queued registration's answer says when the waiting screen should first check."""
    if result.status != "QUEUED":
        return NO_STORE
    return {**NO_STORE, "Retry-After": str(registration_service().first_wait())}


@router.post(
    "/api/holds/<holdId>/payment/confirm",
    summary="After the browser confirmed the hold's payment: register if it succeeded",
    description=(
        "The server asks the payment provider; the browser's word is never taken for it. "
        "Safe to repeat: one registration, whichever of this call and the provider's webhook comes first."
    ),
    tags=["Registration"],
    responses={
        202: {"description": "Paid and queued (or already confirmed)", "links": _OUTCOME_LINK, "headers": _FIRST_CHECK},
        402: {"description": "PAYMENT_DECLINED (or 3-D Secure failed); the place stays held: try another card"},
        404: {"description": "HOLD_NOT_FOUND"},
        409: {
            "description": "PAYMENT_PENDING (3-D Secure or the bank still deciding; see Retry-After), "
            "PAYMENT_NOT_STARTED (send the details first), or CONFLICT",
            "headers": {"Retry-After": {"description": "When PAYMENT_PENDING: when to ask again"}},
        },
        410: {"description": "HOLD_EXPIRED (the payment was cancelled with the hold)"},
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def confirm_payment(holdId: str) -> Response[RegistrationAccepted]:
    result = registration_service().confirm(holdId)
    return Response(202, content_types.APPLICATION_JSON, result, headers=_queued_headers(result))


@router.post(
    "/api/holds/<holdId>/payment",
    summary="The card step of a hold whose details were sent (a link opened on another device)",
    description="Answers with the hold's one PaymentIntent (`clientSecret`) without the runner's details; "
    "QUEUED or CONFIRMED (202) when it is already paid.",
    tags=["Registration"],
    responses={
        200: {"description": "Payment required: confirm it with `clientSecret`", "links": _CONFIRM_LINK},
        202: {"description": "Already paid", "links": _OUTCOME_LINK, "headers": _FIRST_CHECK},
        404: {"description": "HOLD_NOT_FOUND"},
        409: {"description": "PAYMENT_NOT_STARTED: the details were not sent yet"},
        410: {"description": "HOLD_EXPIRED"},
        429: PROVIDER_BUSY,
    },
)
@tracer.capture_method
def payment_step(holdId: str) -> Response[RegistrationAccepted]:
    result = registration_service().payment_step(holdId)
    return _accepted(result)


@router.get(
    "/api/registrations/<registrationId>",
    summary="The outcome of a registration",
    description="While QUEUED, `Retry-After` is the time the writer still needs for it, from its real backlog: "
    "1 s when it is idle, never more than the paper's back-off (10, 20, 40, then 60 s), and that back-off once "
    "a registration is well past its estimate.",
    tags=["Registration"],
    responses={
        200: {
            "description": "The registration's state",
            "headers": {"Retry-After": {"description": "While QUEUED: seconds until it is likely confirmed (1-60)"}},
        },
        404: {"description": "REGISTRATION_NOT_FOUND"},
    },
)
@tracer.capture_method
def registration_status(registrationId: str) -> Response[RegistrationStatus]:
    status, retry = registration_service().status(registrationId)
    headers = {**NO_STORE, **({"Retry-After": str(retry)} if retry else {})}
    return Response(200, content_types.APPLICATION_JSON, status, headers=headers)
