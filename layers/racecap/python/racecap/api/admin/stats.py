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
from racecap.http import NO_STORE
from racecap.observability import tracer
from racecap.stats.models import RaceStatsView
from racecap.stats.pulse import MAX_SPAN_S, PulseView, as_csv
from racecap.stats.wiring import pulse_series, race_stats

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


SECONDS = "Unix epoch seconds"
Start = Annotated[
    int | None, Query(ge=0, description=f"The first second ({SECONDS}); ten minutes before the end if absent.")
]
End = Annotated[int | None, Query(ge=0, description=f"The second after the last ({SECONDS}); now if absent.")]


@router.get(
    "/api/admin/races/<raceId>/pulse",
    summary="The opening second by second",
    description="Per-second counts per event: places held, sold-out answers, registrations queued (paid) "
    "and free, confirmed, card declines, 3-D Secure steps, the payment provider's rate limits, our 429s and "
    "5xx; only non-zero counts are listed. From Redis while it holds them, from their durable copy after "
    f"(the replay). Spans nobody can vouch for are gaps, never zeros. At most {MAX_SPAN_S // 3600} hours "
    "per call: a live view asks from the last second it has.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses=NOT_YOURS,
)
@tracer.capture_method
def pulse(
    raceId: str,
    start: Start = None,
    end: End = None,
) -> Response[PulseView]:
    _, race, events = _owned(raceId)
    return as_json(200, pulse_series().view(race, events, start, end))


@router.get(
    "/api/admin/races/<raceId>/pulse/csv",
    summary="The opening second by second, as CSV",
    description="The same counts as the pulse, one row per non-zero count (the second in the race's zone and "
    "in UTC, the event, what was counted, how many), then one row per gap.",
    tags=["Admin: participants"],
    security=SECURITY,
    responses={**NOT_YOURS, 200: {"description": "CSV", "content": {"text/csv": {"schema": {"type": "string"}}}}},
)
@tracer.capture_method
def pulse_csv(
    raceId: str,
    start: Start = None,
    end: End = None,
) -> Response[str]:
    _, race, events = _owned(raceId)
    view = pulse_series().view(race, events, start, end)
    headers = {**NO_STORE, "Content-Disposition": f'attachment; filename="{raceId}-pulse-{view.start}.csv"'}
    return Response(200, "text/csv; charset=utf-8", as_csv(view), headers=headers)
