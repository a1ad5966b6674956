"""The live figures per event, with the opening queue's."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import Field

from racecap.api.admin.common import NOT_YOURS, SECURITY, as_json, director_of, owner_of
from racecap.fairness.queue import FairnessView
from racecap.fairness.wiring import opening_queue
from racecap.observability import tracer
from racecap.stats.models import RaceStatsView
from racecap.stats.wiring import race_stats

router = Router()
_director = director_of(router)
_owned = owner_of(router)


# -- live stats, participants, refunds, audit ----------------------------------------------------------
class StatsWithQueue(RaceStatsView):
    fairness: FairnessView = Field(description="The opening queue (length, admitted, rate, wait) and hold limits.")


@router.get(
    "/api/admin/races/<raceId>/stats",
    summary="Live figures per event",
    description="Cap, held, queued, confirmed, places left, money, and confirmations per minute. "
    "Up to two seconds old.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def stats(raceId: str, minutes: Annotated[int, Query(ge=1, le=1440)] = 60) -> Response[StatsWithQueue]:
    _, race, events = _owned(raceId)
    figures = race_stats().stats(race, events, minutes)
    return as_json(200, StatsWithQueue(**figures.model_dump(), fairness=opening_queue().view(raceId, fresh=False)))
