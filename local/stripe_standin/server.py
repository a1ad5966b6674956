"""The stand-in's HTTP face: routing, keys, idempotency, the rate limit and the static pages."""

from __future__ import annotations

import hmac
import json
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from local.stripe_standin.book import ApiError, Book, invalid
from local.stripe_standin.webhooks import WebhookSender

STATIC = Path(__file__).resolve().parent / "static"
MAX_BODY = 1 << 20
PAGE_LIMIT_MAX = 100
_ID = re.compile(r"/(pi|re|evt)_[A-Za-z0-9]+")
Response = tuple[int, dict[str, str], bytes]


@dataclass(frozen=True)
class Keys:
    """The stand-in's own test keys (not secrets: nothing real is behind them)."""

    secret: str = "sk_test_racecap_local"  # noqa: S105
    publishable: str = "pk_test_racecap_local"
    webhook_secret: str = "whsec_racecap_local"  # noqa: S105


def decode_form(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Stripe's bracket notation (``metadata[holdId]=h``, ``types[0]=a``) into nested values."""
    root: dict[str, Any] = {}
    for name, value in pairs:
        head, _, rest = name.partition("[")
        keys = [head, *rest.removesuffix("]").split("][")] if rest else [head]
        node: Any = root
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise invalid(f"Invalid parameter: {name}", param=name)
        node[keys[-1] or str(len(node))] = value
    return _lists(root)


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        converted = {k: _lists(v) for k, v in value.items()}
        if converted and all(k.isdigit() for k in converted):
            return [converted[k] for k in sorted(converted, key=int)]
        return converted
    return value


class RateLimiter:
    """Stripe's two request limits: at most ``per_second`` requests in any sliding second over
    the whole API (the account's), and at most ``per_endpoint`` to any one endpoint (its method
    and path, ids left out), or what ``endpoints`` sets for one; 0 = no limit. A request either
    limit refuses counts against neither."""

    def __init__(self, per_second: float, per_endpoint: float = 0.0) -> None:
        self.per_second = per_second
        self.per_endpoint = per_endpoint
        self.endpoints: dict[str, float] = {}
        self._times: deque[float] = deque()
        self._by_endpoint: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self.refused = 0
        self.refused_by: Counter[str] = Counter()  # "account", or the endpoint that refused

    def settings(self) -> dict[str, Any]:
        return {"per_second": self.per_second, "per_endpoint": self.per_endpoint, "endpoints": dict(self.endpoints)}

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        """``per_second`` (the account), ``per_endpoint`` (every endpoint's default) and
        ``endpoints`` ({endpoint: rate}: the endpoints Stripe raised, in place of any before);
        what the body leaves out stays as it was."""
        with self._lock:
            self.per_second = max(0.0, float(body.get("per_second", self.per_second)))
            self.per_endpoint = max(0.0, float(body.get("per_endpoint", self.per_endpoint)))
            if "endpoints" in body:
                self.endpoints = {str(k): max(0.0, float(v)) for k, v in (body["endpoints"] or {}).items()}
        return self.settings()

    def admit(self, endpoint: str) -> str | None:
        """None if the request may go; else which limit refused it ("account" or "endpoint")."""
        now = time.monotonic()
        limit = self.endpoints.get(endpoint, self.per_endpoint)
        with self._lock:
            window = self._by_endpoint.setdefault(endpoint, deque())
            for times in (self._times, window):
                while times and times[0] <= now - 1.0:
                    times.popleft()
            refused = None
            if self.per_second > 0 and len(self._times) >= self.per_second:
                refused = "account"
            elif limit > 0 and len(window) >= limit:
                refused = "endpoint"
            if refused:
                self.refused += 1
                self.refused_by["account" if refused == "account" else endpoint] += 1
                return refused
            self._times.append(now)
            window.append(now)
            return None


@dataclass
class _Stored:
    fingerprint: str
    response: Response | None = None  # None while the first request is still running
    at: float = field(default_factory=time.monotonic)


# Stripe keeps idempotency keys for at least 24 hours and may prune them after (its docs): a key
# older than this is forgotten here, and the control endpoint can shorten it to prove callers do
# not rely on a key for ever.
IDEMPOTENCY_TTL_S = 24 * 3600.0


@dataclass
class StandIn:
    keys: Keys
    book: Book
    webhooks: WebhookSender
    limiter: RateLimiter
    latency_s: float = 0.0
    idempotency_ttl_s: float = IDEMPOTENCY_TTL_S
    lose_answers_on: str = "/v1/"  # the path prefix whose answers ``lose_answers`` loses
    # ...and only for requests naming this value (a payment intent's id) when set: a test's
    # lost answers stay its own while a sweeper settles other payments' refunds beside it.
    lose_answers_for: str = ""
    # fail_next: answered 500 before running; fail_after_next: run (and stored under its key),
    # answered 500; lose_answers: whatever the request (a replay too), the answer is lost (500),
    # as when the connection drops every time until it comes back.
    faults: dict[str, int] = field(default_factory=lambda: {"fail_next": 0, "fail_after_next": 0, "lose_answers": 0})
    stats: Counter[str] = field(default_factory=Counter)
    _idem: dict[str, _Stored] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take_fault(self, name: str) -> bool:
        with self._lock:
            if self.faults[name] > 0:
                self.faults[name] -= 1
                self.stats["faults"] += 1
                return True
            return False

    def keyed(self, key: str, fingerprint: str, work: Callable[[], Response]) -> Response:
        """Stripe's idempotency: replay, refuse other parameters, 409 while in flight."""
        with self._lock:
            stored = self._idem.get(key)
            pruned = stored is not None and stored.response is not None
            if pruned and stored is not None and time.monotonic() - stored.at > self.idempotency_ttl_s:
                stored = None  # pruned: the key starts over, as a new request
                self.stats["idempotency_expired"] += 1
            if stored is None:
                self._idem[key] = stored = _Stored(fingerprint)
                first = True
            else:
                first = False
        if not first:
            if stored.fingerprint != fingerprint:
                self.stats["idempotency_errors"] += 1
                return _error(
                    ApiError(
                        400,
                        "idempotency_error",
                        "Keys for idempotent requests can only be used with the same parameters they were first used "
                        f"with. Try using a key other than '{key}' if you meant to execute a different request.",
                    )
                )
            if stored.response is None:
                self.stats["idempotency_in_use"] += 1
                status, headers, body = _error(
                    ApiError(
                        409,
                        "idempotency_error",
                        "There is currently another in-progress request using this idempotency key (that probably "
                        "means you submitted twice, and the other request is still going through): "
                        f"{key}. Please try again later.",
                        code="idempotency_key_in_use",
                    )
                )
                return status, {**headers, "Stripe-Should-Retry": "true"}, body
            self.stats["idempotent_replays"] += 1
            status, headers, body = stored.response
            return status, {**headers, "Idempotent-Replayed": "true"}, body
        try:
            response = work()
        except BaseException:
            with self._lock:
                self._idem.pop(key, None)
            raise
        with self._lock:
            if response[0] in (400, 404) or response[0] >= 500:
                # Failed validation: the endpoint never ran, so Stripe saves nothing.
                self._idem.pop(key, None)
            else:
                stored.response = response
        return response


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(body).encode()


def _error(exc: ApiError) -> Response:
    return _json(exc.status, exc.body)


def _page(items: list[dict[str, Any]], q: dict[str, Any], url: str, obj: str = "list") -> dict[str, Any]:
    """One page of a newest-first list, Stripe-style (``limit``, ``starting_after``)."""
    limit = int(str(q.get("limit", 10))) if str(q.get("limit", "10")).isdigit() else 10
    if not 1 <= limit <= PAGE_LIMIT_MAX:
        raise invalid("limit must be between 1 and 100", param="limit")
    after = q.get("starting_after")
    if after:
        ids = [i["id"] for i in items]
        if after not in ids:
            raise invalid(f"No such object: '{after}'", param="starting_after", code="resource_missing")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    body: dict[str, Any] = {"object": obj, "data": page, "has_more": len(items) > limit, "url": url}
    if obj == "search_result":
        body["next_page"] = None
    return body


def make_handler(app: StandIn, verbose: bool = False) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 120

        def log_message(self, format: str, *args: Any) -> None:
            if verbose:
                super().log_message(format, *args)

        # -- plumbing ------------------------------------------------------------------------
        def _send(self, response: Response) -> None:
            status, headers, body = response
            try:
                self.send_response(status)
                self.send_header("Request-Id", "req_" + str(abs(hash((time.time(), id(self)))))[:14])
                # The browser calls the API from the merchant's page too (retrievePaymentIntent), as
                # it does Stripe's: publishable key + client secret, so any origin may ask.
                self.send_header("Access-Control-Allow-Origin", "*")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _run(self, work: Callable[[], Response]) -> None:
            try:
                response = work()
            except ApiError as exc:
                response = _error(exc)
            except Exception as exc:  # never an HTML page: Stripe's shape, as a 500
                response = _error(ApiError(500, "api_error", f"{type(exc).__name__}: {exc}"))
            self._send(response)

        def do_GET(self) -> None:
            self._run(self._get)

        def do_POST(self) -> None:
            self._run(self._post)

        def do_OPTIONS(self) -> None:  # CORS preflight (the Authorization header triggers one)
            self._send(
                (
                    204,
                    {
                        "Access-Control-Allow-Methods": "GET, POST",
                        "Access-Control-Allow-Headers": "Authorization, Content-Type",
                        "Access-Control-Max-Age": "600",
                    },
                    b"",
                )
            )

        def do_DELETE(self) -> None:
            self._send(_error(invalid("Unrecognized request URL.", status=404)))

        def _raw_body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True
                raise invalid("Request body too large.", status=413)
            return self.rfile.read(length) if length else b""

        def _key(self) -> str | None:
            auth = self.headers.get("Authorization") or ""
            if auth.startswith("Bearer "):
                return auth[7:].strip()
            return None

        def _need_secret(self) -> None:
            key = self._key()
            if key is None:
                raise ApiError(
                    401,
                    "invalid_request_error",
                    "You did not provide an API key. You need to provide your API key in the Authorization header, "
                    "using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
                )
            if key == app.keys.publishable:
                raise ApiError(
                    401,
                    "invalid_request_error",
                    "This API call cannot be made with a publishable API key. Please use a secret API key.",
                )
            if not hmac.compare_digest(key, app.keys.secret):
                raise ApiError(401, "invalid_request_error", f"Invalid API Key provided: {key[:8]}****{key[-4:]}")

        def _publishable_ok(self, pi_id: str, params: dict[str, Any]) -> bool:
            """The browser's calls: publishable key plus the intent's client secret."""
            if self._key() != app.keys.publishable:
                return False
            secret = str(params.get("client_secret") or "")
            intent = app.book.intent(pi_id)
            if not hmac.compare_digest(secret, intent["client_secret"]):
                raise invalid(
                    "The client_secret provided does not match the client_secret associated with the PaymentIntent.",
                    param="client_secret",
                )
            return True

        def _gate(self, path: str) -> Response | None:
            """Rate limits and injected latency for the API itself (not pages or controls)."""
            endpoint = self.command + " " + _ID.sub("/:id", path)
            app.stats[endpoint] += 1
            if app.latency_s:
                time.sleep(app.latency_s)
            if app.limiter.admit(endpoint):
                app.stats["rate_limited"] += 1
                return _json(
                    429,
                    {
                        "error": {
                            "type": "invalid_request_error",
                            "code": "rate_limit",
                            "message": "Request rate limit exceeded. Learn more about rate limits here "
                            "https://stripe.com/docs/rate-limits.",
                        }
                    },
                )
            return None

        # -- GET ------------------------------------------------------------------------------
        def _get(self) -> Response:
            url = urlsplit(self.path)
            path = url.path.rstrip("/") or "/"
            q = decode_form(parse_qsl(url.query, keep_blank_values=True))
            if path in ("/v3", "/v3/stripe.js"):
                return self._static("stripe.js", "application/javascript; charset=utf-8")
            if path == "/elements/payment":
                return self._static("payment.html", "text/html; charset=utf-8")
            if re.fullmatch(r"/3ds/pi_[A-Za-z0-9_]+", path):
                return self._static("challenge.html", "text/html; charset=utf-8")
            if path in ("/", "/health"):
                return _json(200, {"ok": True, "standIn": "stripe"})
            if path.startswith("/_standin/"):
                self._need_secret()
                return self._control_get(path)
            if not path.startswith("/v1/"):
                raise invalid(f"Unrecognized request URL (GET: {path}).", status=404)
            limited = self._gate(path)
            if limited:
                return limited
            if m := re.fullmatch(r"/v1/payment_intents/(pi_[A-Za-z0-9_]+)", path):
                self._publishable_or_secret(m.group(1), q)
                return _json(200, app.book.intent(m.group(1)))
            self._need_secret()
            if path == "/v1/payment_intents":
                return _json(200, _page(app.book.list_intents(), q, path))
            if path == "/v1/payment_intents/search":
                if not q.get("query"):
                    raise invalid("Missing required param: query.", param="query", code="parameter_missing")
                return _json(200, _page(app.book.search_intents(str(q["query"])), q, path, "search_result"))
            if m := re.fullmatch(r"/v1/refunds/(re_[A-Za-z0-9_]+)", path):
                return _json(200, app.book.refund_by_id(m.group(1)))
            if path == "/v1/refunds":
                intent = q.get("payment_intent")
                return _json(200, _page(app.book.list_refunds(str(intent) if intent else None), q, path))
            if path == "/v1/events":
                types = q.get("types") or ([q["type"]] if q.get("type") else None)
                created = q.get("created")
                if created is not None and not isinstance(created, dict):
                    created = {"gte": created, "lte": created}
                return _json(200, _page(app.book.list_events(types, created), q, path))
            if m := re.fullmatch(r"/v1/events/(evt_[A-Za-z0-9_]+)", path):
                return _json(200, app.book.event(m.group(1)))
            raise invalid(f"Unrecognized request URL (GET: {path}).", status=404)

        def _publishable_or_secret(self, pi_id: str, q: dict[str, Any]) -> None:
            if not self._publishable_ok(pi_id, q):
                self._need_secret()

        def _static(self, name: str, content_type: str) -> Response:
            return 200, {"Content-Type": content_type, "Cache-Control": "no-store"}, (STATIC / name).read_bytes()

        def _control_get(self, path: str) -> Response:
            if path == "/_standin/stats":
                return _json(
                    200,
                    {
                        **app.book.snapshot(),
                        "requests": dict(app.stats),
                        "rateLimited": app.limiter.refused,
                        "rateLimitedBy": dict(app.limiter.refused_by),
                        "webhooks": app.webhooks.settings(),
                    },
                )
            if path == "/_standin/webhooks":
                return _json(200, {**app.webhooks.settings(), "deliveries": list(app.webhooks.deliveries)})
            raise invalid(f"Unrecognized request URL (GET: {path}).", status=404)

        # -- POST -----------------------------------------------------------------------------
        def _post(self) -> Response:
            path = urlsplit(self.path).path.rstrip("/")
            raw = self._raw_body()
            if path.startswith("/_standin/"):
                self._need_secret()
                return self._control_post(path, json.loads(raw or b"{}"))
            if m := re.fullmatch(r"/3ds/(pi_[A-Za-z0-9_]+)", path):
                params = decode_form(parse_qsl(raw.decode(), keep_blank_values=True))
                self._publishable_or_secret(m.group(1), params)
                return _json(200, app.book.authenticate(m.group(1), params.get("outcome") == "approve"))
            if not path.startswith("/v1/"):
                raise invalid(f"Unrecognized request URL (POST: {path}).", status=404)
            limited = self._gate(path)
            if limited:
                return limited
            if app.take_fault("fail_next"):
                return _error(ApiError(500, "api_error", "Injected fault before the request ran."))
            params = decode_form(parse_qsl(raw.decode(), keep_blank_values=True))
            browser = False
            if m := re.fullmatch(r"/v1/payment_intents/(pi_[A-Za-z0-9_]+)/confirm", path):
                browser = self._publishable_ok(m.group(1), params)
            if not browser:
                self._need_secret()
            key = (self.headers.get("Idempotency-Key") or "").strip()
            request = {"id": None, "idempotency_key": key or None}

            lost = False

            def work() -> Response:
                nonlocal lost
                try:
                    response = _json(200, self._route(path, params, request))
                except ApiError as exc:
                    response = _error(exc)
                lost = app.take_fault("fail_after_next")
                return response

            if not key:
                response = work()
            elif len(key) > 255:
                raise invalid("Idempotency-Key must be at most 255 characters.", param="Idempotency-Key")
            else:
                response = app.keyed(key, path + " " + json.dumps(params, sort_keys=True), work)
            if lost:  # done (and stored under its key), but the client hears a 500
                return _error(ApiError(500, "api_error", "Injected fault after the request ran."))
            if (
                path.startswith(app.lose_answers_on)
                and app.lose_answers_for in json.dumps(params)
                and app.take_fault("lose_answers")
            ):
                return _error(ApiError(500, "api_error", "Injected fault: the answer was lost."))
            return response

        def _route(self, path: str, p: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
            book = app.book
            if path == "/v1/payment_intents":
                return book.create_intent(p, request)
            if m := re.fullmatch(r"/v1/payment_intents/(pi_[A-Za-z0-9_]+)/confirm", path):
                return book.confirm_intent(m.group(1), p, request)
            if m := re.fullmatch(r"/v1/payment_intents/(pi_[A-Za-z0-9_]+)/cancel", path):
                return book.cancel_intent(m.group(1), p, request)
            if m := re.fullmatch(r"/v1/payment_intents/(pi_[A-Za-z0-9_]+)", path):
                return book.update_intent(m.group(1), p, request)
            if path == "/v1/refunds":
                return book.refund(p, request)
            raise invalid(f"Unrecognized request URL (POST: {path}).", status=404)

        def _control_post(self, path: str, body: dict[str, Any]) -> Response:
            if path == "/_standin/faults":
                with app._lock:
                    for name in app.faults:
                        if name in body:
                            app.faults[name] = max(0, int(body[name]))
                if "latency_s" in body:
                    app.latency_s = max(0.0, float(body["latency_s"]))
                if "idempotency_ttl_s" in body:
                    app.idempotency_ttl_s = max(0.0, float(body["idempotency_ttl_s"]))
                if "lose_answers_on" in body:
                    app.lose_answers_on = str(body["lose_answers_on"]) or "/v1/"
                if "lose_answers_for" in body:
                    app.lose_answers_for = str(body["lose_answers_for"])
                if "refund_settle_s" in body:
                    app.book.refund_settle_s = max(0.0, float(body["refund_settle_s"]))
                return _json(
                    200,
                    {
                        **app.faults,
                        "latency_s": app.latency_s,
                        "idempotency_ttl_s": app.idempotency_ttl_s,
                        "refund_settle_s": app.book.refund_settle_s,
                        "lose_answers_on": app.lose_answers_on,
                        "lose_answers_for": app.lose_answers_for,
                    },
                )
            if path == "/_standin/ratelimit":
                return _json(200, app.limiter.configure(body))
            if path == "/_standin/webhooks":
                return _json(200, app.webhooks.configure(body))
            if path == "/_standin/refund":  # a refund made in the dashboard, outside Racecap
                # ``amount`` as the dashboard's partial refund takes it; without it, all that is left.
                params = {k: body[k] for k in ("payment_intent", "amount") if body.get(k) is not None}
                return _json(200, app.book.refund(params, {"id": None}))
            if path == "/_standin/dispute":
                return _json(
                    200, app.book.dispute(str(body.get("payment_intent")), str(body.get("reason", "fraudulent")))
                )
            raise invalid(f"Unrecognized request URL (POST: {path}).", status=404)

    return Handler


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def serve(
    port: int,
    keys: Keys | None = None,
    *,
    webhook_url: str | None = None,
    enabled_events: tuple[str, ...] = ("*",),
    rate_limit: float = 25.0,
    endpoint_rate_limit: float = 25.0,
    verbose: bool = False,
) -> tuple[StandInServer, StandIn]:
    """The server on 127.0.0.1 (``port=0`` picks one) and its state; call ``serve_forever``."""
    keys = keys or Keys()
    sender = WebhookSender(webhook_url, keys.webhook_secret, enabled_events=enabled_events)
    app = StandIn(keys, Book(on_event=sender.enqueue), sender, RateLimiter(rate_limit, endpoint_rate_limit))
    return StandInServer(("127.0.0.1", port), make_handler(app, verbose)), app
