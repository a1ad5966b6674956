"""The local gateway routes and builds events as API Gateway does (no servers involved)."""

from __future__ import annotations

import base64
import io

import pytest

from local.gateway import ROUTES, build_http_event


def _route(method: str, path: str) -> str:
    return next(r.route.route_key for r in ROUTES if r.match(method, path) is not None)


@pytest.mark.parametrize(
    ("method", "path", "route_key"),
    [
        ("GET", "/api/races", "GET /api/races"),
        ("GET", "/api/races/r1", "GET /api/races/{raceId}"),
        ("TRACE", "/api/races", "ANY /api/{proxy+}"),
        ("DELETE", "/api/races", "ANY /api/{proxy+}"),
        ("GET", "/api/no/such/thing", "ANY /api/{proxy+}"),
        ("POST", "/api/admin/races", "POST /api/admin/races"),
    ],
)
def test_the_most_specific_route_wins_and_the_catch_all_takes_the_rest(method, path, route_key) -> None:
    assert _route(method, path) == route_key


def _event(body: bytes, content_type: str) -> dict:
    (route,) = [r.route for r in ROUTES if r.route.route_key == "POST /api/admin/races"]
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/admin/races",
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    return build_http_event(environ, route, {}, body, None)


def test_a_json_body_in_utf8_is_passed_on_as_text() -> None:
    event = _event('{"name": "Zürich"}'.encode(), "application/json")
    assert (event["isBase64Encoded"], event["body"]) == (False, '{"name": "Zürich"}')


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b'{"name": "\xff\x1f"}', "application/json"), (b"\x89PNG\r\n", "image/png"), (b"abc", "")],
)
def test_a_body_that_is_not_text_is_passed_on_base64_encoded(body: bytes, content_type: str) -> None:
    event = _event(body, content_type)
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == body
