"""The smallest handler built the way Racecap's HTTP functions are: Powertools' HTTP API
resolver with its OpenAPI validation, one route taking a pydantic body.

``make bench`` imports it ((e)'s ``framework_floor_ms``) and invokes it (floors) to show
what the framework itself costs on the machine: no Racecap code, no AWS client, no logging
or metrics decorators. A Racecap HTTP handler cannot start or answer for less than this.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from pydantic import BaseModel, Field

app = APIGatewayHttpResolver(enable_validation=True)


class Runner(BaseModel):
    email: str = Field(min_length=3, max_length=254)
    firstName: str = Field(min_length=1, max_length=80)


class Accepted(BaseModel):
    holdId: str
    email: str


@app.post("/holds/<hold_id>")
def register(hold_id: str, runner: Runner) -> Accepted:
    return Accepted(holdId=hold_id, email=runner.email)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.resolve(event, context)


def sample_event(body: dict[str, Any]) -> dict[str, Any]:
    """A POST to the route, as the local gateway builds API Gateway's event for a handler."""
    # Imported here, not above: the floor's import must stay the framework's alone.
    import blueprint
    from local.gateway import build_http_event

    data = json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/holds/hold_1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(data)),
        "REMOTE_ADDR": "127.0.0.1",
    }
    route = blueprint.Route("POST", "/holds/{hold_id}", "FloorHandler")
    return build_http_event(environ, route, {"hold_id": "hold_1"}, data, None)
