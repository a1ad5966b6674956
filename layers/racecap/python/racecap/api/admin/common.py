"""What every admin route needs: the calling director, their race, a JSON answer (or a CSV
export's page), the security requirement and the 404 every race route may answer."""

import base64
from collections.abc import Callable, Iterator
from typing import Any, cast
from urllib.parse import urlencode

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2

from racecap.auth import director_from_claims
from racecap.http import NO_STORE
from racecap.models import Director
from racecap.races.models import Event, Race
from racecap.setup.wiring import race_admin

SECURITY: list[dict[str, list[str]]] = [{"director": []}]
NOT_YOURS: dict[int, OpenAPIResponse] = {404: {"description": "RACE_NOT_FOUND: no such race, or not yours"}}

Owned = tuple[Director, Race, list[Event]]


def director_of(router: Router) -> Callable[[], Director]:
    """The director calling ``router``'s current request (from the JWT authorizer's claims)."""

    def director() -> Director:
        event = cast(APIGatewayProxyEventV2, router.current_event)  # the HTTP API's resolver
        return director_from_claims(event.request_context.authorizer.jwt_claim)

    return director


def owner_of(router: Router) -> Callable[[str], Owned]:
    """The calling director's race and its events; another director's race answers 404 as if it
    did not exist."""
    director_now = director_of(router)

    def owned(race_id: str) -> Owned:
        director = director_now()
        race, events = race_admin().owned(director, race_id)
        return director, race, events

    return owned


def as_json(status: int, body: Any) -> Response[Any]:
    return Response(status, content_types.APPLICATION_JSON, body, headers=NO_STORE)


def csv_page(
    router: Router,
    lines: Iterator[tuple[str, str | None]],
    path: str,
    filename: str,
    query: dict[str, str] | None = None,
) -> Response[str]:
    """A CSV export's page as one Lambda response (``participants.service`` says why it pages):
    gzipped when the client takes it, and where the next page is (``Link: rel="next"`` on ``path``
    with ``query`` kept, and ``X-Next-Cursor``)."""
    accepts = router.current_event.headers.get("accept-encoding", "")
    deadline_s = router.lambda_context.get_remaining_time_in_millis() / 1000
    # Imported here: the participants' service builds the registrations' models, which the races
    # router (an admin API cold start's one router) would otherwise load for no request of its own.
    from racecap.participants.service import build_export_page

    page = build_export_page(lines, gzip="gzip" in accepts.lower(), remaining_s=deadline_s)
    headers = {
        **NO_STORE,
        "Content-Disposition": f'attachment; filename="{filename}"',
        "X-Export-Lines": str(page.lines),
    }
    if page.gzipped:
        headers["Content-Encoding"] = "gzip"
    if page.next_cursor:
        headers["X-Next-Cursor"] = page.next_cursor
        headers["Link"] = f'<{path}?{urlencode({"cursor": page.next_cursor} | (query or {}))}>; rel="next"'
    body = page.body if isinstance(page.body, str) else base64.b64encode(page.body).decode()
    response = Response(200, "text/csv; charset=utf-8", body, headers=headers)
    response.base64_encoded = page.gzipped  # already encoded: validation sees plain ASCII text
    return response
