"""What every admin route needs: the calling director, their race, a JSON answer, the security
requirement and the 404 every race route may answer."""

from collections.abc import Callable
from typing import Any, cast

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
