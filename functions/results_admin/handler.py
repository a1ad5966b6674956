"""ResultsAdmin: race directors upload results files, read the validation report, publish.

The file itself never passes through here: ``POST .../uploads`` answers with a presigned
S3 URL, the director PUTs the CSV there, and ResultsProcessor checks it on arrival.
Another director's race answers 404 as if it did not exist.
"""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext
from racecap.auth import director_from_claims
from racecap.config import get_settings
from racecap.http import make_resolver
from racecap.models import Director
from racecap.observability import logger, metrics, tracer
from racecap.results.models import EventResultsAdminView, UploadRequest, UploadTicket, UploadView
from racecap.results.wiring import results_admin

get_settings()  # validate the environment at cold start
app = make_resolver()
NO_STORE = {"Cache-Control": "no-store"}
SECURITY: list[dict[str, list[str]]] = [{"director": []}]
NOT_YOURS: dict[int, OpenAPIResponse] = {404: {"description": "RACE_NOT_FOUND or EVENT_NOT_FOUND: none, or not yours"}}
NOTHING_YET: dict[int, OpenAPIResponse] = {**NOT_YOURS, 409: {"description": "CONFLICT: nothing uploaded yet"}}
BASE = "/api/admin/races/<raceId>/events/<eventId>/results"


def _director() -> Director:
    return director_from_claims(app.current_event.request_context.authorizer.jwt_claim)


def _json(status: int, body: Any) -> Response[Any]:
    return Response(status, content_types.APPLICATION_JSON, body, headers=NO_STORE)


@app.get(BASE, summary="The event's results: current version, published?, latest uploads",
         tags=["Admin: results"], security=SECURITY, responses=NOT_YOURS)  # fmt: skip
@tracer.capture_method
def status(raceId: str, eventId: str) -> Response[EventResultsAdminView]:
    return _json(200, results_admin().status(_director(), raceId, eventId))


@app.post(
    f"{BASE}/uploads",
    summary="Start a results upload: get a URL to PUT the CSV to",
    description="Columns: `bib`, `chip_time`, `gun_time` (H:MM:SS), `status` (finished, DNF, DNS, DQ), optional "
    "`category` (the gender division) and `split_<name>` columns. Names and ages come from the registrations. "
    "Then poll the upload: READY (a new version, published at once if the event's results are published) or "
    "REJECTED with every problem by line — a rejected file changes nothing.",
    tags=["Admin: results"],
    security=SECURITY,
    responses={**NOT_YOURS, 201: {"description": "Created"}},
)
@tracer.capture_method
def start_upload(
    raceId: str, eventId: str, body: Annotated[UploadRequest | None, Body()] = None
) -> Response[UploadTicket]:
    return _json(201, results_admin().start_upload(_director(), raceId, eventId, body or UploadRequest()))


@app.get(f"{BASE}/uploads/<uploadId>", summary="An upload's status and validation report",
         tags=["Admin: results"], security=SECURITY, responses=NOT_YOURS)  # fmt: skip
@tracer.capture_method
def upload(raceId: str, eventId: str, uploadId: str) -> Response[UploadView]:
    return _json(200, results_admin().upload(_director(), raceId, eventId, uploadId))


@app.post(f"{BASE}/publish", summary="Show the current version to runners", tags=["Admin: results"],
          security=SECURITY, responses=NOTHING_YET)  # fmt: skip
@tracer.capture_method
def publish(raceId: str, eventId: str) -> Response[EventResultsAdminView]:
    return _json(200, results_admin().publish(_director(), raceId, eventId, published=True))


@app.post(f"{BASE}/unpublish", summary="Hide the results from runners", tags=["Admin: results"],
          security=SECURITY, responses=NOTHING_YET)  # fmt: skip
@tracer.capture_method
def unpublish(raceId: str, eventId: str) -> Response[EventResultsAdminView]:
    return _json(200, results_admin().publish(_director(), raceId, eventId, published=False))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler
@metrics.log_metrics(capture_cold_start_metric=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
