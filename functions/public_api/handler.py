"""PublicApi: the race pages runners read, and the API's own documentation."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.config import get_settings
from racecap.errors import EventNotFound, NotFound
from racecap.fairness.wiring import runner_rate_limit
from racecap.http import make_resolver, unknown_route
from racecap.observability import logger, metrics, tracer
from racecap.questions.models import RunnerQuestions
from racecap.questions.wiring import questions
from racecap.races.models import RaceList, RaceView
from racecap.races.wiring import catalog

get_settings()  # validate the environment at cold start, not mid-burst

app = make_resolver(rate_limit=runner_rate_limit)
OPENAPI_FILE = Path(__file__).with_name("openapi.json")
CACHE_SHORT = {"Cache-Control": "public, max-age=2"}


@app.get("/api/races", summary="Published races", tags=["Races"])
@tracer.capture_method
def list_races() -> Response[RaceList]:
    return Response(200, content_types.APPLICATION_JSON, catalog().list_races(), headers=CACHE_SHORT)


@app.get(
    "/api/races/<raceId>",
    summary="One race with its events and places left",
    description="`spotsLeft` is cached for about two seconds, so it may be a few seconds stale; "
    "a hold is always decided against the real count.",
    tags=["Races"],
    responses={404: {"description": "RACE_NOT_FOUND"}},
)
@tracer.capture_method
def get_race(raceId: str) -> Response[RaceView]:
    return Response(200, content_types.APPLICATION_JSON, catalog().get_race(raceId), headers=CACHE_SHORT)


@app.get(
    "/api/races/<raceId>/events/<eventId>/questions",
    summary="What the event's registration form asks; send the answers as `answers`",
    description="The questions as they stand now (`version`); the registration checks its answers against them.",
    tags=["Races"],
    responses={404: {"description": "RACE_NOT_FOUND or EVENT_NOT_FOUND"}},
)
@tracer.capture_method
def get_questions(raceId: str, eventId: str) -> Response[RunnerQuestions]:
    _, events = catalog().for_runners(raceId)
    if not any(e.eventId == eventId for e in events):
        raise EventNotFound(f"Race {raceId} has no event {eventId}.")
    return Response(200, content_types.APPLICATION_JSON, questions().for_runners(raceId, eventId), headers=CACHE_SHORT)


@app.get("/api/openapi.json", include_in_schema=False)
def openapi_document() -> Response[Any]:
    return Response(200, content_types.APPLICATION_JSON, OPENAPI_FILE.read_text(), headers=CACHE_SHORT)


DOCS_DIR = Path(__file__).with_name("docs")
# Swagger UI's own files ship with Powertools (no CDN); the page and its start-up script are ours.
DOCS_ASSETS = {
    "swagger-ui-bundle.min.js": "application/javascript; charset=utf-8",
    "swagger-ui.min.css": "text/css; charset=utf-8",
    "init.js": "application/javascript; charset=utf-8",
}


@app.get("/api/docs", include_in_schema=False)
def swagger_ui() -> Response[str]:
    # Files only, no inline script or style: the content security policy allows none.
    return Response(200, "text/html; charset=utf-8", (DOCS_DIR / "index.html").read_text(), headers=CACHE_SHORT)


@app.get("/api/docs/<asset>", include_in_schema=False)
def swagger_asset(asset: str) -> Response[str]:
    if asset not in DOCS_ASSETS:
        raise NotFound(f"No such file: {asset}.")
    path = DOCS_DIR / asset if (DOCS_DIR / asset).is_file() else _swagger_dir() / asset
    return Response(200, DOCS_ASSETS[asset], path.read_text(encoding="utf-8"), headers=CACHE_SHORT)


def _swagger_dir() -> Path:
    # Imported here, not at module level: it costs ~130 ms, and only the docs page needs it.
    from aws_lambda_powertools.event_handler.openapi.swagger_ui import generate_swagger_html

    return Path(generate_swagger_html.__code__.co_filename).parent


@lru_cache(maxsize=1)
def _api_routes() -> tuple[tuple[str, str], ...]:
    """Every (method, path) the API serves: the document's operations and its own two pages."""
    paths = json.loads(OPENAPI_FILE.read_text())["paths"]
    documented = [(m.upper(), p) for p, ops in paths.items() for m in ops if m != "parameters"]
    return (*documented, ("GET", "/api/openapi.json"), ("GET", "/api/docs"), ("GET", "/api/docs/{asset}"))


@app.not_found
def catch_all(_exc: Exception) -> Response[Any]:
    # Reached through the blueprint's `ANY /api/{proxy+}` route: a path or method no
    # other route takes. 404, or 405 with `Allow`, in the contract's error shape.
    event = app.current_event
    return unknown_route(event.http_method.upper(), event.path, _api_routes())


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
