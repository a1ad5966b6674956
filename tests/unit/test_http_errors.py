"""The API's one mapping of failures to answers (racecap.http.make_resolver): a backing
service that is only "not now" is a 503 with Retry-After, anything unknown a 500."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from aws_lambda_powertools.event_handler.openapi.params import Body
from botocore.exceptions import ClientError, EndpointConnectionError
from pydantic import BaseModel, model_validator
from racecap.errors import FieldErrors
from racecap.http import make_resolver

import blueprint


@pytest.fixture
def answer(placeholder_env: dict[str, str]) -> Callable[[Exception], dict]:
    """The resolver's answer to a route that raises ``exc``, for a request through CloudFront."""
    headers = {blueprint.ORIGIN_VERIFY_HEADER: placeholder_env["ORIGIN_VERIFY_SECRET"]}
    return lambda exc: _answer(exc, headers)


def _answer(exc: Exception, headers: dict[str, str]) -> dict:
    app = make_resolver()

    @app.get("/boom")
    def boom() -> dict:
        raise exc

    event = {
        "version": "2.0", "routeKey": "GET /boom", "rawPath": "/boom", "rawQueryString": "", "headers": headers,
        "requestContext": {"http": {"method": "GET", "path": "/boom", "sourceIp": "127.0.0.1"}, "stage": "$default"},
        "isBase64Encoded": False,
    }  # fmt: skip
    return app.resolve(event, None)  # type: ignore[arg-type]


def _client_error(code: str, status: int = 400) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    "exc",
    [
        _client_error("ProvisionedThroughputExceededException"),
        _client_error("ThrottlingException"),
        _client_error("TransactionConflictException"),
        _client_error("QueueDoesNotExist"),  # SQS's JSON protocol, and ElasticMQ restarting
        _client_error("AWS.SimpleQueueService.NonExistentQueue"),  # its query protocol
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
    ],
    ids=lambda e: type(e).__name__ + ":" + str(getattr(e, "response", {}).get("Error", {}).get("Code", "")),
)
def test_a_backing_service_that_is_only_not_now_is_a_503_with_retry_after(answer: Any, exc: Exception) -> None:
    got = answer(exc)
    assert got["statusCode"] == 503, got
    assert int(got["headers"]["Retry-After"]) > 0
    assert json.loads(got["body"])["error"] == "SERVICE_UNAVAILABLE"


def test_anything_else_is_a_500_that_says_nothing_of_its_cause(answer: Any) -> None:
    got = answer(_client_error("ValidationException"))
    assert got["statusCode"] == 500
    assert json.loads(got["body"]) == {
        "error": "INTERNAL_ERROR", "message": "Something went wrong on our side; please retry.",
    }  # fmt: skip


class _Thing(BaseModel):
    name: str


def test_a_list_for_a_body_is_a_400_even_when_it_begins_with_a_valid_one(placeholder_env: dict[str, str]) -> None:
    """Powertools reads a list sent for a non-list field as its first element; the resolver
    answers first, so ``[{...valid...}, 1]`` never reaches a route as ``{...valid...}``."""
    app = make_resolver()
    reached: list[_Thing] = []

    @app.post("/things")
    def create(body: Annotated[_Thing, Body()]) -> dict:
        reached.append(body)
        return {}

    def post(text: str) -> dict:
        event = {
            "version": "2.0", "routeKey": "POST /things", "rawPath": "/things", "rawQueryString": "",
            "headers": {blueprint.ORIGIN_VERIFY_HEADER: placeholder_env["ORIGIN_VERIFY_SECRET"],
                        "content-type": "application/json"},
            "requestContext": {"http": {"method": "POST", "path": "/things", "sourceIp": "127.0.0.1"}, "stage": "$default"},
            "body": text, "isBase64Encoded": False,
        }  # fmt: skip
        return app.resolve(event, None)  # type: ignore[arg-type]

    for text in ('[{"name": "a"}, 1]', ' \n [{"name": "a"}]'):
        got = post(text)
        assert got["statusCode"] == 400, got
        assert json.loads(got["body"])["error"] == "VALIDATION_ERROR"
    assert reached == []
    assert post('{"name": "a"}')["statusCode"] == 200
    assert [t.name for t in reached] == ["a"]


class _Window(BaseModel):
    first: str
    last: str

    @model_validator(mode="after")
    def _in_order(self) -> _Window:
        if self.last < self.first:
            raise FieldErrors("The last day is before the first.", {"last": "Before the first day."})
        return self


def test_a_models_check_across_fields_names_the_fields_it_faults(placeholder_env: dict[str, str]) -> None:
    """A model validator's error has no field of its own (pydantic: "body"); FieldErrors names them."""
    app = make_resolver()

    @app.post("/windows")
    def create(body: Annotated[_Window, Body()]) -> dict:
        return {}

    event = {
        "version": "2.0", "routeKey": "POST /windows", "rawPath": "/windows", "rawQueryString": "",
        "headers": {blueprint.ORIGIN_VERIFY_HEADER: placeholder_env["ORIGIN_VERIFY_SECRET"],
                    "content-type": "application/json"},
        "requestContext": {"http": {"method": "POST", "path": "/windows", "sourceIp": "127.0.0.1"}, "stage": "$default"},
        "body": '{"first": "2027-05-01", "last": "2027-04-01"}', "isBase64Encoded": False,
    }  # fmt: skip
    got = app.resolve(event, None)  # type: ignore[arg-type]
    assert got["statusCode"] == 400, got
    assert json.loads(got["body"])["fields"] == {"last": "Before the first day."}


def test_an_environments_init_is_frozen_out_of_the_collector_once_at_its_first_request(
    answer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """racecap.http._freeze_the_init: the init's objects leave the collector's generations before
    the first request, and only then: freezing again would keep later requests' cycles for ever."""
    import gc

    import racecap.http

    frozen: list[int] = []
    monkeypatch.setattr(racecap.http, "_init_frozen", False)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(1))

    answer(ValueError("first"))
    answer(ValueError("second"))

    assert frozen == [1]
