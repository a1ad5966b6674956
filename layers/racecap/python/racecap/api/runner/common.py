"""What several runner routes need: the calling client (address, device and admission tokens)
and the answer when the payment provider is busy."""

from collections.abc import Callable

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

from racecap.fairness.identity import Client, lower_headers
from racecap.fairness.wiring import client

PROVIDER_BUSY: OpenAPIResponse = {
    "description": "TOO_MANY_REQUESTS: the payment provider's request budget is spent for now, or it is not "
    "answering; the place stays held. Retry after Retry-After.",
    "headers": {"Retry-After": {"description": "Seconds to wait"}},
}


def client_of(router: Router) -> Callable[[], Client]:
    """Who is calling ``router``'s current request."""

    def caller() -> Client:
        return client(lower_headers(router.current_event.raw_event))

    return caller
