"""A discount code on a hold: apply, remove."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.codes.models import ApplyCode
from racecap.codes.wiring import discounts
from racecap.holds.models import HoldView
from racecap.holds.wiring import hold_service
from racecap.http import NO_STORE
from racecap.observability import tracer

router = Router()


_BUSY_CODE: OpenAPIResponse = {
    "description": "TOO_MANY_REQUESTS: on the card step, the payment provider is busy or not answering; the "
    "code change is kept and a retry finishes it. Retry after Retry-After.",
    "headers": {"Retry-After": {"description": "Seconds to wait"}},
}


@router.put(
    "/api/holds/<holdId>/code",
    summary="Apply a discount code to a held place",
    description="Until the place is paid. One code per place: a second replaces the first. "
    "The code's use is taken now, atomically with the hold, and given back if the hold expires or is "
    "released unpaid. On the card step (details sent) the hold's one PaymentIntent is changed to the new "
    "amount; if the runner paid meanwhile the code is refused (409) and its use given back. A code making "
    "a paying place free is refused: such a code is applied before the details are sent. The answer is the "
    "hold with its new price.",
    tags=["Registration"],
    responses={
        400: {"description": "CODE_INVALID: the discounted price is below what the payment provider can charge"},
        404: {"description": "HOLD_NOT_FOUND, or CODE_UNKNOWN: no such code for this race"},
        409: {
            "description": "CODE_NOT_YET_VALID, CODE_EXPIRED, CODE_USED_UP, CODE_NOT_FOR_EVENT, CODE_TOO_LATE "
            "(paid, paid meanwhile, or free on the card step), or CONFLICT (the details are being processed)"
        },
        410: {"description": "HOLD_EXPIRED"},
        429: _BUSY_CODE,
    },
)
@tracer.capture_method
def apply_code(holdId: str, body: Annotated[ApplyCode, Body()]) -> Response[HoldView]:
    discounts().apply(holdId, body.code)
    return Response(200, content_types.APPLICATION_JSON, hold_service().view(holdId), headers=NO_STORE)


@router.delete(
    "/api/holds/<holdId>/code",
    summary="Remove the discount code from a held place",
    description="Its use is given back and the place costs its held price again (on the card step: the "
    "hold's PaymentIntent's amount too). Harmless without a code.",
    tags=["Registration"],
    responses={
        404: {"description": "HOLD_NOT_FOUND"},
        409: {"description": "CODE_TOO_LATE: the place is paid, or was paid meanwhile; CONFLICT"},
        410: {"description": "HOLD_EXPIRED"},
        429: _BUSY_CODE,
    },
)
@tracer.capture_method
def remove_code(holdId: str) -> Response[HoldView]:
    discounts().remove(holdId)
    return Response(200, content_types.APPLICATION_JSON, hold_service().view(holdId), headers=NO_STORE)
