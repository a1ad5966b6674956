"""ResultsApi: published results for runners — pages, a runner's result, autocomplete.

Two kinds of answer (paper §6.2, cached at the edge as ``blueprint.CACHE_BEHAVIOURS`` says):
* ``/races/{raceId}/results`` — which version of each event is current: cached seconds;
* ``/races/{raceId}/events/{eventId}/results/{version}...`` — one immutable version:
  cached for a day, everywhere. A new upload is a new version, hence new URLs.
"""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.http import make_resolver
from racecap.observability import logger, metrics, tracer
from racecap.results.dataset import MIN_QUERY
from racecap.results.models import RaceResultsView, ResultsPage, RunnerResultView, SuggestionList, TeamStandingsView
from racecap.results.service import PAGE_SIZE_MAX
from racecap.results.wiring import results_reader

get_settings()  # validate the environment at cold start, not mid-burst

app = make_resolver()
CURRENT = {"Cache-Control": "public, max-age=2"}
IMMUTABLE = {"Cache-Control": "public, max-age=86400, immutable"}
NOT_PUBLISHED: dict[int, OpenAPIResponse] = {
    404: {"description": "RACE_NOT_FOUND, EVENT_NOT_FOUND or RESULTS_NOT_FOUND (not published)"}
}
Version = Annotated[int, Path(ge=1, le=1_000_000)]


@app.get(
    "/api/races/<raceId>/results",
    summary="Which results version is current, per event",
    description="Cached for a couple of seconds. Follow an event's `version` to the versioned URLs below.",
    tags=["Results"],
    responses={404: {"description": "RACE_NOT_FOUND"}},
)
@tracer.capture_method
def current(raceId: str) -> Response[RaceResultsView]:
    return Response(200, content_types.APPLICATION_JSON, results_reader().race_results(raceId), headers=CURRENT)


@app.get(
    "/api/races/<raceId>/events/<eventId>/results/<version>",
    summary="A page of results, sorted by place",
    description="Overall, gender and age-group places; DNF, DNS and DQ come last with no place. Immutable.",
    tags=["Results"],
    responses=NOT_PUBLISHED,
)
@tracer.capture_method
def results_page(
    raceId: str,
    eventId: str,
    version: Version,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    size: Annotated[int, Query(ge=1, le=PAGE_SIZE_MAX)] = 10,
    gender: Annotated[str | None, Query(max_length=20)] = None,
    ageGroup: Annotated[str | None, Query(max_length=20, pattern=r"^\d{1,3}-\d{1,3}$")] = None,
) -> Response[ResultsPage]:
    body = ResultsPage.model_validate(results_reader().page(raceId, eventId, version, page, size, gender, ageGroup))
    return Response(200, content_types.APPLICATION_JSON, body, headers=IMMUTABLE)


@app.get(
    "/api/races/<raceId>/events/<eventId>/results/<version>/search",
    summary="Autocomplete: runners by name or bib",
    description=f"Prefix of any name word, the full name either way round, or a bib; case- and "
    f"accent-insensitive; from {MIN_QUERY} characters; at most 10 suggestions, best placed first.",
    tags=["Results"],
    responses=NOT_PUBLISHED,
)
@tracer.capture_method
def search(
    raceId: str,
    eventId: str,
    version: Version,
    q: Annotated[str, Query(min_length=MIN_QUERY, max_length=60)],
) -> Response[SuggestionList]:
    body = SuggestionList.model_validate(results_reader().suggest(raceId, eventId, version, q))
    return Response(200, content_types.APPLICATION_JSON, body, headers=IMMUTABLE)


@app.get(
    "/api/races/<raceId>/events/<eventId>/results/<version>/teams",
    summary="Team standings: each team by the sum of its best members' times",
    description="For an event with team entries: a team's `teamScoring` best times (the director's choice at "
    "upload) added up, lowest first; a team with fewer finishers is listed last without a place. Immutable.",
    tags=["Results"],
    responses=NOT_PUBLISHED,
)
@tracer.capture_method
def teams(raceId: str, eventId: str, version: Version) -> Response[TeamStandingsView]:
    body = TeamStandingsView.model_validate(results_reader().teams(raceId, eventId, version))
    return Response(200, content_types.APPLICATION_JSON, body, headers=IMMUTABLE)


@app.get(
    "/api/races/<raceId>/events/<eventId>/results/<version>/bibs/<bib>",
    summary="One runner's result: places, times and splits",
    tags=["Results"],
    responses={404: {"description": "RESULTS_NOT_FOUND or RUNNER_NOT_FOUND"}},
)
@tracer.capture_method
def runner(
    raceId: str, eventId: str, version: Version, bib: Annotated[int, Path(ge=1, le=10_000_000)]
) -> Response[RunnerResultView]:
    body = RunnerResultView.model_validate(results_reader().runner(raceId, eventId, version, bib))
    return Response(200, content_types.APPLICATION_JSON, body, headers=IMMUTABLE)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
