"""The local API Gateway + CloudFront: a WSGI app served by gunicorn (multi-process).

* ``/api/...``: matched against ``blueprint.ROUTES`` (the same list the CDK app turns
  into HTTP API routes), turned into an HTTP API payload-v2 event and handed to the same
  handler function with a Lambda context. Director routes get their JWT checked first,
  as the HTTP API's JWT authorizer would.
* ``/2015-03-31/functions/<name>/invocations``: the Lambda Invoke API, so the local
  Step Functions interpreter's Task states reach the same handlers;
  ``/2015-03-31/functions/<name>/configuration``: GetFunctionConfiguration (name and
  environment), so ``tools.audit --stage`` finds a local stage as it finds a deployed one.
* everything else: the built static site, as CloudFront serves it from S3.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
import re
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

import blueprint
from local.runtime import ACCOUNT, FunctionHost

StartResponse = Callable[..., Any]
# API Gateway's own limit on an HTTP API request (10 MB); handlers enforce smaller ones.
MAX_BODY = 10 * 1024 * 1024
# What API Gateway itself answers, in its own shape ({"message": ...}), which an HTTP API
# cannot reshape; the local gateway answers exactly so (the OpenAPI document lists them).
GATEWAY_NOT_FOUND = {"message": "Not Found"}
GATEWAY_UNAUTHORIZED = {"message": "Unauthorized"}
GATEWAY_TOO_LARGE = {"message": "Request Entity Too Large"}
GATEWAY_ERROR = {"message": "Internal Server Error"}
# How the gateway logs an invocation Lambda ended at the function's timeout (tests count them).
FUNCTION_TIMEOUT = "function timeout:"
# CloudFront refuses a URL (path and query) over 8,192 bytes with its own HTML 414 page,
# before the API sees it. Below that, the handlers validate every parameter themselves.
CLOUDFRONT_MAX_URL = 8192
CLOUDFRONT_URI_TOO_LONG = (
    b"<!DOCTYPE HTML PUBLIC><HTML><HEAD><TITLE>ERROR: The request could not be satisfied</TITLE></HEAD>"
    b"<BODY><H1>414 ERROR</H1><H2>The request could not be satisfied.</H2>Request-URI Too Long</BODY></HTML>"
)
# Content types API Gateway hands to a function as text; any other body, and any body
# that is not valid UTF-8, arrives base64-encoded with isBase64Encoded.
TEXT_TYPES = ("text/", "application/json", "application/javascript", "application/xml",
              "application/x-www-form-urlencoded")  # fmt: skip
SITE_DIRS = (blueprint.ROOT / ".build" / "site", blueprint.ROOT / "site")
API_ID = "local"

_STATUS = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No Content",
    301: "Moved Permanently",
    302: "Found",
    304: "Not Modified",
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def _payment_origins() -> blueprint.PaymentOrigins:
    # The Stripe stand-in's origin on the local stack (local/stack.py sets it); Stripe's otherwise.
    origin = os.environ.get("RACECAP_PAYMENT_ORIGIN")
    return blueprint.PaymentOrigins.single(origin) if origin else blueprint.STRIPE_ORIGINS


# CloudFront's response headers policy, as cdk renders it from the same declaration.
SECURITY_HEADERS = blueprint.security_headers(_payment_origins())
# The director's console (/admin/): its settings (the user pool, its app client, Cognito's
# endpoint: moto's locally) as the deployment writes them to admin/config.json on AWS, and
# the /admin/* behaviour's own headers (blueprint.console_security_headers).
CONSOLE_CONFIG: dict[str, str] = json.loads(os.environ.get("RACECAP_CONSOLE_CONFIG") or "{}")
CONSOLE_HEADERS = blueprint.console_security_headers(
    blueprint.ConsoleOrigins(
        sign_in=CONSOLE_CONFIG.get("endpoint", "https://cognito-idp.us-east-1.amazonaws.com").rstrip("/"),
        uploads=os.environ.get("AWS_ENDPOINT_URL_S3", "").rstrip("/"),
    )
)


def _with_header(start: StartResponse, name: str, value: str) -> StartResponse:
    def wrapped(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
        return start(status, [*headers, (name, value)], *exc)

    return wrapped


def _is_console(path: str) -> bool:
    return path == blueprint.CONSOLE_PATH.rstrip("/") or path.startswith(blueprint.CONSOLE_PATH)


def _with_security_headers(start: StartResponse, path: str = "/") -> StartResponse:
    policy = CONSOLE_HEADERS if _is_console(path) else SECURITY_HEADERS

    def wrapped(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
        have = {k.lower() for k, _ in headers}
        extra = [(k, v) for k, v in policy.items() if k.lower() not in have]
        return start(status, [*headers, *extra], *exc)

    return wrapped


class CompiledRoute:
    def __init__(self, route: blueprint.Route) -> None:
        self.route = route
        pattern = ""
        self.params: list[str] = []
        self.greedy = False
        for segment in route.path.strip("/").split("/"):
            m = re.fullmatch(r"\{(\w+)(\+?)\}", segment)
            if m:
                self.params.append(m.group(1))
                self.greedy = self.greedy or bool(m.group(2))
                pattern += "/(.+)" if m.group(2) else "/([^/]+)"
            else:
                pattern += "/" + re.escape(segment)
        self.regex = re.compile(f"^{pattern}$")
        # API Gateway prefers the most specific route: a greedy {proxy+} loses to any other,
        # ANY loses to a named method, and literal segments beat parameters.
        self.specificity = (not self.greedy, route.method != "ANY", -len(self.params), len(route.path))

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if self.route.method not in (method, "ANY"):
            return None
        m = self.regex.match(path)
        return dict(zip(self.params, m.groups(), strict=True)) if m else None


ROUTES = sorted((CompiledRoute(r) for r in blueprint.ROUTES), key=lambda r: r.specificity, reverse=True)


def _json(start: StartResponse, status: int, body: Any, headers: dict[str, str] | None = None) -> list[bytes]:
    data = json.dumps(body).encode()
    hdrs = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    hdrs += list((headers or {}).items())
    start(f"{status} {_STATUS.get(status, 'Status')}", hdrs)
    return [data]


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            out[key[5:].replace("_", "-").lower()] = value
    if environ.get("CONTENT_TYPE"):
        out["content-type"] = environ["CONTENT_TYPE"]
    if environ.get("CONTENT_LENGTH"):
        out["content-length"] = environ["CONTENT_LENGTH"]
    return out


def _read_body(environ: dict[str, Any]) -> bytes:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length > MAX_BODY:
        raise ValueError("body too large")
    return environ["wsgi.input"].read(length) if length else b""


def _as_text(body: bytes, content_type: str) -> str | None:
    """The body as API Gateway passes a text payload on, or None when it base64-encodes it."""
    if not content_type.lower().startswith(TEXT_TYPES):
        return None
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def build_http_event(
    environ: dict[str, Any], route: blueprint.Route, params: dict[str, str], body: bytes, claims: dict | None
) -> dict[str, Any]:
    """The HTTP API payload format 2.0 event, as API Gateway builds it."""
    headers = _headers(environ)
    raw_qs = environ.get("QUERY_STRING", "")
    query: dict[str, str] = {}
    for k, v in parse_qsl(raw_qs, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    cookies = [c.strip() for c in headers.pop("cookie", "").split(";") if c.strip()]
    text = _as_text(body, headers.get("content-type", "")) if body else ""
    now = datetime.now(UTC)
    request_id = str(uuid.uuid4())
    context: dict[str, Any] = {
        "accountId": ACCOUNT,
        "apiId": API_ID,
        "domainName": headers.get("host", "localhost"),
        "domainPrefix": headers.get("host", "localhost").split(".")[0],
        "http": {
            "method": environ.get("REQUEST_METHOD", "GET").upper(),
            "path": environ.get("PATH_INFO", "/"),
            "protocol": environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
            "sourceIp": environ.get("REMOTE_ADDR", "127.0.0.1"),
            "userAgent": headers.get("user-agent", ""),
        },
        "requestId": request_id,
        "routeKey": route.route_key,
        "stage": "$default",
        "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
        "timeEpoch": int(now.timestamp() * 1000),
    }
    if claims is not None:
        context["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": environ.get("PATH_INFO", "/"),
        "rawQueryString": raw_qs,
        "headers": headers,
        "requestContext": context,
        "isBase64Encoded": text is None,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if params:
        event["pathParameters"] = params
    if body:
        event["body"] = text if text is not None else base64.b64encode(body).decode()
    return event


def _respond_from_lambda(start: StartResponse, result: Any) -> list[bytes]:
    """Interpret a handler's result as the HTTP API does for payload v2."""
    if not isinstance(result, dict) or "statusCode" not in result:
        return _json(start, 200, result)
    status = int(result["statusCode"])
    body = result.get("body") or ""
    data = base64.b64decode(body) if result.get("isBase64Encoded") else str(body).encode()
    headers = [(k, str(v)) for k, v in (result.get("headers") or {}).items() if k.lower() != "content-length"]
    for k, vs in (result.get("multiValueHeaders") or {}).items():
        headers += [(k, str(v)) for v in vs]
    headers += [("Set-Cookie", c) for c in result.get("cookies") or []]
    if not any(k.lower() == "content-type" for k, _ in headers) and data:
        headers.append(("Content-Type", "application/json"))
    headers.append(("Content-Length", str(len(data))))
    start(f"{status} {_STATUS.get(status, 'Status')}", headers)
    return [data]


class Gateway:
    def __init__(self, host: Any = None, authorizer: Any = None) -> None:
        # FunctionHost (in this process) or EnvironmentHost (local/environments.py).
        self.host = host or FunctionHost()
        self.authorizer = authorizer
        # The functions' own environment holds the secret CloudFront would be configured with.
        self.origin_secret = os.environ.get("ORIGIN_VERIFY_SECRET", "")
        self.site_dir = next((d for d in SITE_DIRS if (d / "index.html").exists()), SITE_DIRS[-1])

    def __call__(self, environ: dict[str, Any], start: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/") or "/"
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if not path.startswith("/2015-03-31/"):  # what CloudFront serves, not the Lambda API
            start = _with_security_headers(start, path)
            if len(environ.get("RAW_URI") or path) > CLOUDFRONT_MAX_URL:
                html = [("Content-Type", "text/html"), ("Content-Length", str(len(CLOUDFRONT_URI_TOO_LONG)))]
                start("414 Request-URI Too Long", html)
                return [CLOUDFRONT_URI_TOO_LONG]
        try:
            if path.startswith("/api/") or path == "/api":
                return self._api(environ, start, method, path)
            if path.startswith("/2015-03-31/functions/"):
                return self._invoke(environ, start, method, path)
            return self._static(start, method, path)
        except Exception:
            # As API Gateway answers when the integration fails (a crashed function).
            traceback.print_exc()
            return _json(start, 500, GATEWAY_ERROR)

    # -- API Gateway --------------------------------------------------------------
    def _api(self, environ: dict[str, Any], start: StartResponse, method: str, path: str) -> list[bytes]:
        started = time.monotonic()
        matched = next(((r, p) for r in ROUTES if (p := r.match(method, path)) is not None), None)
        if matched is None:
            # Only outside the blueprint's catch-all (e.g. `/api` itself): API Gateway's answer.
            return _json(start, 404, GATEWAY_NOT_FOUND)
        compiled, params = matched
        try:
            body = _read_body(environ)
        except ValueError:
            return _json(start, 413, GATEWAY_TOO_LARGE)
        claims = None
        if compiled.route.auth != "none":
            # The HTTP API's JWT authorizer: 401 in its own shape, with `www-authenticate`.
            if self.authorizer is None:
                return _json(start, 401, GATEWAY_UNAUTHORIZED, {"www-authenticate": "Bearer"})
            authorization = _headers(environ).get("authorization", "")
            claims = self.authorizer.claims(authorization)
            if claims is None:
                challenge = 'Bearer scope="" error="invalid_token"' if authorization else "Bearer"
                return _json(start, 401, GATEWAY_UNAUTHORIZED, {"www-authenticate": challenge})
        event = build_http_event(environ, compiled.route, params, body, claims)
        # CloudFront's custom origin header: set on every API request, replacing any a client
        # sent, so the handlers' origin check passes only for requests through the CDN.
        event["headers"][blueprint.ORIGIN_VERIFY_HEADER] = self.origin_secret
        try:
            result, timing = self.host.invoke_timed(compiled.route.function, event)
        except TimeoutError as exc:
            # Lambda ended the invocation at the function's timeout; the HTTP API answers as for
            # any failed function. One line a reader (and a test on a loaded machine) can count.
            print(f"{FUNCTION_TIMEOUT} {compiled.route.function} {method} {path}: {exc}", flush=True)
            return _json(start, 500, GATEWAY_ERROR)
        # Where the request's time went, for the burst report (API Gateway adds nothing of the
        # kind; the runner's own latency minus "gateway" is the time it queued before this).
        timing_header = timing.server_timing(time.monotonic() - started)
        return _respond_from_lambda(_with_header(start, "Server-Timing", timing_header), result)

    # -- Lambda Invoke API ----------------------------------------------------------
    def _invoke(self, environ: dict[str, Any], start: StartResponse, method: str, path: str) -> list[bytes]:
        m = re.fullmatch(r"/2015-03-31/functions/([^/]+)/(invocations|configuration)", path)
        if not m or method != {"invocations": "POST", "configuration": "GET"}[m.group(2)]:
            return _json(start, 404, {"Type": "User", "message": "Unknown operation"})
        name = m.group(1).rsplit(":", 1)[-1] if m.group(1).startswith("arn:") else m.group(1)
        try:
            fn = blueprint.function(name)
        except KeyError:
            return _json(
                start,
                404,
                {"Type": "User", "message": f"Function not found: {name}"},
                {"x-amzn-ErrorType": "ResourceNotFoundException"},
            )
        if m.group(2) == "configuration":
            # This process hosts every function with every function's variables: each one's
            # own are the keys the blueprint declares for it.
            variables = {k: os.environ[k] for k in blueprint.function_env(fn) if k in os.environ}
            return _json(start, 200, {"FunctionName": fn.id, "Environment": {"Variables": variables}})
        raw = _read_body(environ)
        payload = json.loads(raw) if raw else {}
        try:
            result = self.host.invoke(name, payload)
        except Exception as exc:
            # As Lambda reports a function error: 200 with X-Amz-Function-Error, so that
            # Step Functions can match ErrorEquals on the exception's class name.
            error = {"errorType": type(exc).__name__, "errorMessage": str(exc), "stackTrace": []}
            return _json(start, 200, error, {"X-Amz-Function-Error": "Unhandled"})
        return _json(start, 200, result)

    # -- CloudFront + S3 ------------------------------------------------------------------
    def _static(self, start: StartResponse, method: str, path: str) -> list[bytes]:
        if method not in ("GET", "HEAD"):
            return _json(start, 405, {"error": "METHOD_NOT_ALLOWED", "message": "Static content is read-only."})
        if _is_console(path):
            console = self._console(start, path)
            if console is not None:
                return console
        rel = path.lstrip("/") or "index.html"
        target = (self.site_dir / rel).resolve()
        if not str(target).startswith(str(self.site_dir.resolve())) or not target.is_file():
            # The SPAs' routes are hash-based; serve the shell (the console's under /admin/).
            shell = "admin/index.html" if _is_console(path) else "index.html"
            target = self.site_dir / shell
            if not target.is_file():
                return _json(start, 404, {"error": "NOT_FOUND", "message": "The site has not been built."})
        data = target.read_bytes()
        ctype = mimetypes.guess_type(str(target))[0] or "application/octet-stream"
        # Fingerprinted assets never change; HTML is short-cached so a deploy shows quickly.
        fingerprinted = re.search(r"\.[0-9a-f]{8,}\.\w+$", target.name) is not None
        cache = "public, max-age=31536000, immutable" if fingerprinted else "public, max-age=60"
        start("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(data))), ("Cache-Control", cache)])
        return [] if method == "HEAD" else [data]

    def _console(self, start: StartResponse, path: str) -> list[bytes] | None:
        """What CloudFront's /admin/* behaviour adds to S3: /admin goes to /admin/, and the
        console's config.json (deployed beside it on AWS) comes from the stack's settings."""
        if path == blueprint.CONSOLE_PATH.rstrip("/"):
            start("301 Moved Permanently", [("Location", blueprint.CONSOLE_PATH), ("Content-Length", "0")])
            return []
        if path == f"{blueprint.CONSOLE_PATH}config.json" and CONSOLE_CONFIG:
            return _json(start, 200, CONSOLE_CONFIG, {"Cache-Control": "no-cache"})
        return None


def _make_app() -> Gateway:
    authorizer = None
    if os.environ.get("RACECAP_JWKS_FILE"):
        from local.auth import LocalAuthorizer

        authorizer = LocalAuthorizer.from_env()
    host: Any = None
    if os.environ.get("RACECAP_GATEWAY_ENVIRONMENTS") == "own":
        from local.environments import EnvironmentHost

        host = EnvironmentHost()  # each invocation in an environment of its own, as on Lambda
    return Gateway(host=host, authorizer=authorizer)


app = _make_app()
