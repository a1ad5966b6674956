"""A race's discount codes: list, create one, a sponsor's batch as CSV."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, director_of, owner_of
from racecap.codes.models import BulkCodesRequest, CodeDraft, CodeList, CodeView
from racecap.codes.wiring import codes_admin
from racecap.http import NO_STORE
from racecap.observability import tracer

router = Router()
_director = director_of(router)
_owned = owner_of(router)


@router.get(
    "/api/admin/races/<raceId>/codes",
    summary="The race's discount codes, with the uses taken",
    tags=["Admin: codes"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def list_codes(raceId: str) -> Response[CodeList]:
    return as_json(200, codes_admin().list(_director(), raceId))


@router.post(
    "/api/admin/races/<raceId>/codes",
    summary="Make a discount code",
    description="A percentage or an amount off the held price, for the race or listed events, valid from/to "
    "(times without an offset are the race's), with a maximum number of uses enforced under bursts. "
    "Codes are compared in capitals.",
    tags=["Admin: codes"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CODE_EXISTS: the race has that code"}},
)
@tracer.capture_method
def create_code(raceId: str, body: Annotated[CodeDraft, Body()]) -> Response[CodeView]:
    return as_json(201, codes_admin().create(_director(), raceId, body))


@router.post(
    "/api/admin/races/<raceId>/codes/bulk",
    summary="Make N single-use codes (a sponsor's batch), answered as CSV",
    tags=["Admin: codes"],
    security=SECURITY,
    responses={**NOT_YOURS, 201: {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}},
)
@tracer.capture_method
def bulk_codes(raceId: str, body: Annotated[BulkCodesRequest, Body()]) -> Response[str]:
    codes = codes_admin().bulk(_director(), raceId, body)
    csv = "code\r\n" + "".join(f"{c}\r\n" for c in codes)  # letters, digits and '-': nothing to quote
    headers = {**NO_STORE, "Content-Disposition": f'attachment; filename="{raceId}-{body.prefix}-codes.csv"'}
    return Response(201, "text/csv; charset=utf-8", csv, headers=headers)
