"""The HTTP edge shared by every API function: one resolver factory, one error mapping.

Every failure a client can see is ``{"error": CODE, "message": sentence}`` (plus
``fields`` for validation) — never a stack trace, never an HTML page.
"""

from __future__ import annotations

import base64
import binascii
import gc
import hmac
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from botocore.exceptions import BotoCoreError, ClientError

from racecap import deadline, pulse
from racecap.config import get_settings
from racecap.errors import DomainError, FieldErrors
from racecap.observability import logger, metrics

MAX_BODY_BYTES = 16 * 1024
# Set by CloudFront on every API request (blueprint.ORIGIN_VERIFY_HEADER); its value is a
# secret only CloudFront and the functions know.
ORIGIN_VERIFY_HEADER = "x-origin-verify"


NO_STORE = {"Cache-Control": "no-store"}  # every answer about one runner or one director


def error_response(
    status: int, code: str, message: str, *, fields: dict[str, str] | None = None, retry_after: int | None = None
) -> Response:
    """The one shape of every error a client sees."""
    headers = dict(NO_STORE)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    body: dict[str, Any] = {"error": code, "message": message}
    if fields is not None:
        body["fields"] = fields
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=json.dumps(body),
        headers=headers,
    )


def _field_name(loc: tuple[Any, ...]) -> str:
    # Powertools locations look like ("body", "email") or ("path", "raceId").
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def validation_fields(exc: RequestValidationError) -> dict[str, str]:
    fields: dict[str, str] = {}
    for err in exc.errors():
        faulted = (err.get("ctx") or {}).get("error")
        if isinstance(faulted, FieldErrors):  # a model's check across fields, naming each it faults
            for name, message in faulted.fields.items():
                fields.setdefault(name, message)
            continue
        name = _field_name(tuple(err.get("loc", ())))
        if err.get("type") == "json_invalid":
            name = "body"
        fields.setdefault(name, _human(err))
    return fields


def _human(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    if kind == "missing":
        return "This field is required."
    if kind == "json_invalid":
        return "The body is not valid JSON."
    if kind == "extra_forbidden":
        return "This field is not allowed."
    msg = str(err.get("msg") or "Invalid value.")
    return msg.removeprefix("Value error, ")


# AWS error codes that mean "not now" once the SDK's own retries are spent (throttling,
# contention, a service's transient failure): the client is asked to come back (503).
UNAVAILABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "ServiceUnavailable",
        "InternalServerError",
        "InternalFailure",
        # SQS: "wait at least one second after the queue is created to be able to use it" (a
        # deploy that replaces a queue). ElasticMQ restarted on its persisted store answers
        # this too, for the second between opening its port and restoring its queues (the
        # chaos burst's restart hit it: 4 confirms answered 500 on a loaded machine).
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
    }
)
UNAVAILABLE_RETRY_AFTER_S = 2

RateCheck = Callable[[Mapping[str, str]], int]  # headers (lower-case) -> seconds to wait; 0 = go


def make_resolver(rate_limit: RateCheck | None = None, rate_exempt: Iterable[str] = ()) -> RacecapResolver:
    """The resolver; ``rate_limit`` (the runner API's) answers 429 before anything else runs,
    except on the ``rate_exempt`` paths (the provider's webhook: few addresses, many events)."""
    app = RacecapResolver(enable_validation=True)
    app.rate_limit = rate_limit
    app.rate_exempt = frozenset(rate_exempt)

    @app.exception_handler(DomainError)
    def _domain(exc: DomainError) -> Response:
        metrics.add_metric(name=f"Error{exc.code}", unit="Count", value=1)
        return error_response(exc.status, exc.code, exc.message, fields=exc.fields, retry_after=exc.retry_after)

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        fields = validation_fields(exc)
        return error_response(400, "VALIDATION_ERROR", "Some fields are missing or invalid.", fields=fields)

    @app.not_found
    def _not_found(_exc: Exception) -> Response:
        return error_response(404, "NOT_FOUND", "No such resource.")

    @app.exception_handler(BotoCoreError)
    def _unreachable(exc: BotoCoreError) -> Response:
        # A backing service that did not answer through the SDK's retries (connection
        # refused or reset, read timeout): nothing was decided, so the client may retry.
        return _unavailable(exc)

    @app.exception_handler(deadline.BudgetSpent)
    def _out_of_time(exc: deadline.BudgetSpent) -> Response:
        # The request's time budget (racecap.deadline) ran out in retries: answer now rather
        # than hang towards API Gateway's 30 s. Nothing the runner holds is given up: a hold
        # stays theirs until it expires, so retrying after Retry-After finds their place.
        logger.warning("time budget spent", extra={"error": str(exc)})
        metrics.add_metric(name="BudgetSpent", unit="Count", value=1)
        return error_response(
            503,
            "SERVICE_UNAVAILABLE",
            f"We could not answer in time; any place you hold is kept. Please retry in {exc.retry_after} s.",
            retry_after=exc.retry_after,
        )

    @app.exception_handler(ClientError)
    def _aws_error(exc: ClientError) -> Response:
        if exc.response.get("Error", {}).get("Code") in UNAVAILABLE_CODES:
            return _unavailable(exc)
        return _unexpected(exc)

    def _unavailable(exc: Exception) -> Response:
        logger.warning("backing service unavailable", extra={"error": f"{type(exc).__name__}: {exc}"})
        metrics.add_metric(name="ServiceUnavailable", unit="Count", value=1)
        return error_response(
            503,
            "SERVICE_UNAVAILABLE",
            "A service behind the API is not answering right now; please retry.",
            retry_after=UNAVAILABLE_RETRY_AFTER_S,
        )

    @app.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response:
        logger.exception("unhandled error")
        metrics.add_metric(name="UnhandledError", unit="Count", value=1)
        return error_response(500, "INTERNAL_ERROR", "Something went wrong on our side; please retry.")

    return app


_init_frozen = False


def _freeze_the_init() -> None:
    """Before an environment's first request: everything its init made (the SDK's models,
    Powertools, pydantic's validators: some 60,000 objects) lives as long as the environment,
    yet every full collection would walk it again — 10-20 ms, in whichever request it falls
    on (issue 38's steady-rate tail). ``gc.freeze`` moves those objects out of the collector's
    generations for good; what requests make is collected as before. Once per environment
    (``gc.freeze`` on later requests would keep their garbage cycles for ever)."""
    global _init_frozen
    if not _init_frozen:
        gc.freeze()
        _init_frozen = True


class RacecapResolver(APIGatewayHttpResolver):
    """The HTTP API resolver with the edge checks that must run before validation.

    Powertools validates the body before any route middleware runs, so a form post or
    a 1 MB body would come back as a confusing field error. These checks answer first:
    a body must be JSON (415), small (413) and text (400). Before everything, the request must
    have come through CloudFront (403 otherwise): the API's own execute-api URL is public, and a
    client calling it directly would bypass the WAF. Then a client over its rate limit is
    answered 429, so a flood costs one Redis call per request and nothing more.
    API Gateway base64-encodes a body it does not take for text (``isBase64Encoded``); it
    is decoded here, once, so the routes always see the JSON text.
    """

    rate_limit: RateCheck | None = None
    rate_exempt: frozenset[str] = frozenset()

    def resolve(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        _freeze_the_init()
        answer = self._answer(event, context)
        status = int(answer.get("statusCode", 200))
        if status == 429 or status >= 500:
            # The opening's own pulse (racecap.pulse): a route naming the race counts for it.
            race_id = (event.get("pathParameters") or {}).get("raceId", pulse.NO_RACE)
            pulse.pulse.count(race_id, pulse.THROTTLED if status == 429 else pulse.FAILED)
        pulse.pulse.flush()  # what this request counted, in one round trip (nothing: no I/O)
        return answer

    def _answer(self, event: Mapping[str, Any], context: Any) -> dict[str, Any]:
        deadline.start(context)  # this request's time budget, from Lambda's remaining time
        headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
        if not came_through_cloudfront(headers):
            return _proxy(403, "FORBIDDEN", "Call the API through the site's address, not the API's own URL.")
        if self.rate_limit is not None and event.get("rawPath") not in self.rate_exempt:
            wait = self.rate_limit(headers)
            if wait > 0:
                return _proxy(
                    429,
                    "TOO_MANY_REQUESTS",
                    f"Too many requests from your address; please retry in {wait} s.",
                    retry_after=wait,
                )
        body = event.get("body") or ""
        if body:
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return _proxy(415, "UNSUPPORTED_MEDIA_TYPE", "Send the body as application/json.")
            raw = _raw_body(body, bool(event.get("isBase64Encoded")))
            if raw is None or len(raw) > MAX_BODY_BYTES:
                return _proxy(413, "PAYLOAD_TOO_LARGE", f"The body must be at most {MAX_BODY_BYTES} bytes.")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return _proxy(400, "VALIDATION_ERROR", "The body is not valid UTF-8.", {"body": "Not UTF-8 text."})
            if text.lstrip(" \t\n\r").startswith("["):
                # Every route's body is one JSON object. Powertools reads a list sent for a
                # non-list field as its first element (meant for repeated query parameters,
                # applied to bodies too), so ``[{…}, 1]`` would pass as ``{…}``.
                return _proxy(
                    400,
                    "VALIDATION_ERROR",
                    "The body must be a JSON object.",
                    {"body": "Send one JSON object, not a list."},
                )
            if event.get("isBase64Encoded"):
                event = {**event, "body": text, "isBase64Encoded": False}
        return super().resolve(event, context)


def came_through_cloudfront(headers: Mapping[str, str]) -> bool:
    expected = get_settings().origin_verify_secret
    return hmac.compare_digest(headers.get(ORIGIN_VERIFY_HEADER, "").encode(), expected.encode())


def _raw_body(body: str, encoded: bool) -> bytes | None:
    """The body's bytes; None when it is too large to be worth decoding."""
    if len(body) > MAX_BODY_BYTES * 2:
        return None
    if not encoded:
        return body.encode("utf-8", errors="surrogatepass")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return b"\xff"  # not base64 at all: as good as not UTF-8


def unknown_route(method: str, path: str, routes: Iterable[tuple[str, str]]) -> Response:
    """The catch-all's answer: 405 with ``Allow`` where the path exists, else 404.

    ``routes`` are (method, API Gateway path) pairs, e.g. ("GET", "/api/races/{raceId}").
    """
    allowed = sorted({m for m, template in routes if _template_regex(template).fullmatch(path)})
    # A method the path does allow can only land here with an id no route takes (say,
    # one with characters ids never have): that resource does not exist.
    if allowed and method not in allowed:
        response = error_response(405, "METHOD_NOT_ALLOWED", f"{method} is not allowed here; use {', '.join(allowed)}.")
        response.headers["Allow"] = ", ".join(allowed)
        return response
    return error_response(404, "NOT_FOUND", "No such resource.")


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\w+\+?\})", template)
    return re.compile(
        "".join(("(.+)" if p.endswith("+}") else "([^/]+)") if p.startswith("{") else re.escape(p) for p in parts)
    )


def _proxy(
    status: int, code: str, message: str, fields: dict[str, str] | None = None, *, retry_after: int | None = None
) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "Cache-Control": "no-store"}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    body: dict[str, Any] = {"error": code, "message": message}
    if fields is not None:
        body["fields"] = fields
    return {
        "statusCode": status,
        "headers": headers,
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }
