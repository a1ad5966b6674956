"""The API answers only requests that came through CloudFront (issue 11): the handlers'
edge refuses any request without the origin secret CloudFront adds."""

from __future__ import annotations

import json
from typing import Any

import pytest
from racecap import http

import blueprint


def _event(headers: dict[str, str]) -> dict[str, Any]:
    return {
        "version": "2.0",
        "routeKey": "GET /api/openapi.json",
        "rawPath": "/api/openapi.json",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "http": {"method": "GET", "path": "/api/openapi.json", "sourceIp": "192.0.2.1"},
            "routeKey": "GET /api/openapi.json",
            "stage": "$default",
            "requestId": "r1",
        },
        "isBase64Encoded": False,
    }


def test_the_header_name_is_the_blueprints() -> None:
    assert http.ORIGIN_VERIFY_HEADER == blueprint.ORIGIN_VERIFY_HEADER


@pytest.mark.parametrize("sent", [None, "", "wrong-value-of-the-right-length-xxxxxxxx"])
def test_a_direct_call_to_the_api_url_is_refused(
    function_host: Any, placeholder_env: dict[str, str], sent: str | None
) -> None:
    headers = {} if sent is None else {blueprint.ORIGIN_VERIFY_HEADER: sent}
    result = function_host.invoke("PublicApi", _event(headers))
    assert result["statusCode"] == 403
    assert json.loads(result["body"])["error"] == "FORBIDDEN"


def test_a_call_through_cloudfront_is_served(function_host: Any, placeholder_env: dict[str, str]) -> None:
    secret = placeholder_env["ORIGIN_VERIFY_SECRET"]
    result = function_host.invoke("PublicApi", _event({blueprint.ORIGIN_VERIFY_HEADER.upper(): secret}))
    assert result["statusCode"] == 200
    assert json.loads(result["body"])["openapi"].startswith("3.")
