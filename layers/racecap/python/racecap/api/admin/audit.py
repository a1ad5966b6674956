"""A race's audit trail."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, director_of, owner_of
from racecap.audit.models import AuditPage
from racecap.audit.service import CURSOR_PATTERN as AUDIT_CURSOR
from racecap.audit.wiring import audit_trail
from racecap.observability import tracer

router = Router()
_director = director_of(router)
_owned = owner_of(router)


@router.get(
    "/api/admin/races/<raceId>/audit",
    summary="Who changed what, when — newest first",
    tags=["Admin: races"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def audit(
    raceId: str,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=400, pattern=AUDIT_CURSOR)] = None,
) -> Response[AuditPage]:
    _owned(raceId)
    return as_json(200, audit_trail().page(raceId, limit, cursor))
