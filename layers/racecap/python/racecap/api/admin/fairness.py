"""Fairness: hold limits and the opening queue (pause, resume)."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, director_of, owner_of
from racecap.fairness.queue import FairnessPatch, FairnessView
from racecap.fairness.wiring import opening_queue
from racecap.observability import tracer

router = Router()
_director = director_of(router)
_owned = owner_of(router)


# -- fairness: hold limits, the opening queue ----------------------------------------------------------
@router.get(
    "/api/admin/races/<raceId>/fairness",
    summary="Hold limits, proof-of-work and the opening queue's settings and figures",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def get_fairness(raceId: str) -> Response[FairnessView]:
    _owned(raceId)
    return as_json(200, opening_queue().view(raceId))


@router.patch(
    "/api/admin/races/<raceId>/fairness",
    summary="Switch the opening queue on or off; set the admission rate, hold limits, proof-of-work difficulty",
    description="Send `expectedVersion` (the view's `version`): settings changed meanwhile answer 409 CONFLICT "
    "with the current version, and nothing changes.",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses={**NOT_YOURS, 409: {"description": "CONFLICT: the settings changed since expectedVersion"}},
)
@tracer.capture_method
def edit_fairness(raceId: str, body: Annotated[FairnessPatch, Body()]) -> Response[FairnessView]:
    director, _, _ = _owned(raceId)
    return as_json(200, opening_queue().configure(raceId, body, director))


@router.post(
    "/api/admin/races/<raceId>/queue/pause",
    summary="Pause admission from the queue (everyone keeps their place)",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def pause_queue(raceId: str) -> Response[FairnessView]:
    director, _, _ = _owned(raceId)
    return as_json(200, opening_queue().pause(raceId, director))


@router.post(
    "/api/admin/races/<raceId>/queue/resume",
    summary="Resume admission from the queue at the set rate",
    tags=["Admin: fairness"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def resume_queue(raceId: str) -> Response[FairnessView]:
    director, _, _ = _owned(raceId)
    return as_json(200, opening_queue().resume(raceId, director))
