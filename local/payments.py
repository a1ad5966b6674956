"""A local payment provider: a small Stripe-shaped JSON API, in memory, on 127.0.0.1.

    python -m local.payments --port 8790 [--slow-seconds 3]

Test tokens (the card "source" of a charge; also in ``TEST_TOKENS``):

    tok_visa      succeeds
    tok_declined  declined: HTTP 402, the charge object with status "declined" and
                  decline_code "card_declined" (a charge IS recorded, as a declined one)
    tok_slow      succeeds after --slow-seconds (default 3 s)
    anything else 400 invalid_token, nothing recorded

API (JSON bodies; errors are ``{"error": {"type", "code", "message"}}``):

    POST /v1/charges   {amount, currency, source, description, metadata}
                       header Idempotency-Key required (400 idempotency_key_required)
    GET  /v1/charges?idempotency_key=K   {"data": [charge]} or {"data": []}
    GET  /v1/charges                     every charge (for the post-burst audit)
    POST /v1/refunds   {charge} + Idempotency-Key; a second refund of the same charge under
                       another key is 400 charge_already_refunded
    POST /_faults      {"fail_next": N}: the next N charge requests answer 500 before doing
                       anything; {"fail_after_charge_next": N}: the next N new charges are
                       recorded but answer 500 (charged, but the client did not hear);
                       {"slow_seconds": S} changes the tok_slow delay
    GET  /_stats       counts

Idempotency, as Stripe does it: the first request with a key that gets as far as doing
something stores its response (status and body); any later request with the same key and
the same body gets that stored response replayed, and a different body gets 409
idempotency_key_reused. Requests that fail validation or an injected fault store nothing.
Requests with the same key are serialised by a per-key lock: a concurrent duplicate waits
for the first to finish and then replays its answer, so a key never makes two charges.
``GET /v1/charges?idempotency_key=K`` also waits for an in-flight request with key K, so
crash recovery never reads "not charged" while the charge is still being made.
"""

from __future__ import annotations

import argparse
import json
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TEST_TOKENS: dict[str, str] = {
    "tok_visa": "succeeds",
    "tok_declined": "declined: HTTP 402, status 'declined', decline_code 'card_declined'",
    "tok_slow": "succeeds after --slow-seconds (default 3 s)",
}

MAX_BODY = 1 << 20
Response = tuple[int, bytes]


def _encode(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _error(status: int, code: str, message: str, **extra: Any) -> Response:
    kind = "card_error" if status == 402 else "api_error" if status >= 500 else "invalid_request_error"
    return status, _encode({"error": {"type": kind, "code": code, "message": message, **extra}})


@dataclass
class _Outcome:
    """What a keyed request produced: ``stored`` is replayed for repeats; ``wire`` (if set)
    is what this one request answers instead (an injected fault after the charge)."""

    stored: Response | None
    wire: Response | None = None


@dataclass
class _KeyState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    fingerprint: str | None = None
    response: Response | None = None


class PaymentBook:
    """The provider's state. Thread-safe: ``_lock`` guards the dicts and counters (held
    briefly); each idempotency key has its own lock, held for the whole request."""

    def __init__(self, slow_seconds: float = 3.0) -> None:
        self.slow_seconds = slow_seconds
        self._lock = threading.Lock()
        self._keys: dict[str, _KeyState] = {}
        self._charges: dict[str, dict[str, Any]] = {}
        self._charge_by_key: dict[str, str] = {}
        self._refunds: dict[str, dict[str, Any]] = {}
        self._faults = {"fail_next": 0, "fail_after_charge_next": 0}
        self.stats: Counter[str] = Counter()

    # -- faults and counters -------------------------------------------------------------
    def set_faults(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            for name in self._faults:
                if name in body:
                    self._faults[name] = max(0, int(body[name]))
            if "slow_seconds" in body:
                self.slow_seconds = max(0.0, float(body["slow_seconds"]))
            return {**self._faults, "slow_seconds": self.slow_seconds}

    def _take_fault(self, name: str) -> bool:
        with self._lock:
            if self._faults[name] > 0:
                self._faults[name] -= 1
                self.stats["faults_injected"] += 1
                return True
            return False

    def count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            charges = list(self._charges.values())
            return {
                "charges": len(charges),
                "succeeded": sum(c["status"] == "succeeded" for c in charges),
                "declined": sum(c["status"] == "declined" for c in charges),
                "refunds": len(self._refunds),
                "keys": len(self._keys),
                "counters": dict(self.stats),
                "pending_faults": dict(self._faults),
                "slow_seconds": self.slow_seconds,
            }

    # -- idempotency ---------------------------------------------------------------------
    def _keyed(self, key: str, path: str, body: dict[str, Any], work: Callable[[], _Outcome]) -> Response:
        fingerprint = path + " " + json.dumps(body, sort_keys=True, separators=(",", ":"))
        with self._lock:
            state = self._keys.setdefault(key, _KeyState())
        with state.lock:
            if state.response is not None:
                if state.fingerprint != fingerprint:
                    self.count("conflicts")
                    return _error(
                        409,
                        "idempotency_key_reused",
                        "Keys for idempotent requests can only be used with the same parameters "
                        "they were first used with.",
                    )
                self.count("replays")
                return state.response
            outcome = work()
            if outcome.stored is not None:
                state.fingerprint, state.response = fingerprint, outcome.stored
            response = outcome.wire or outcome.stored
            assert response is not None
            return response

    def _wait_for_key(self, key: str) -> None:
        with self._lock:
            state = self._keys.get(key)
        if state is not None:
            with state.lock:
                pass

    # -- charges -------------------------------------------------------------------------
    def create_charge(self, key: str, body: dict[str, Any]) -> Response:
        return self._keyed(key, "/v1/charges", body, lambda: self._charge(key, body))

    def _charge(self, key: str, body: dict[str, Any]) -> _Outcome:
        invalid = _validate_charge(body)
        if invalid is not None:
            return _Outcome(stored=None, wire=invalid)
        source = body["source"]
        if source == "tok_slow":
            time.sleep(self.slow_seconds)
        declined = source == "tok_declined"
        charge = {
            "id": "ch_" + secrets.token_hex(12),
            "object": "charge",
            "amount": body["amount"],
            "currency": body["currency"],
            "description": body.get("description"),
            "metadata": dict(body.get("metadata") or {}),
            "source": source,
            "status": "declined" if declined else "succeeded",
            "paid": not declined,
            "decline_code": "card_declined" if declined else None,
            "idempotency_key": key,
            "refunded": False,
            "amount_refunded": 0,
            "created": int(time.time()),
        }
        with self._lock:
            self._charges[charge["id"]] = charge
            self._charge_by_key[key] = charge["id"]
            self.stats["charges_created"] += 1
        if declined:
            error = {
                "type": "card_error",
                "code": "card_declined",
                "decline_code": "card_declined",
                "charge": charge["id"],
                "message": "Your card was declined.",
            }
            stored: Response = (402, _encode({**charge, "error": error}))
        else:
            stored = (200, _encode(charge))
        if self._take_fault("fail_after_charge_next"):
            return _Outcome(stored=stored, wire=_error(500, "api_error", "Injected fault after the charge."))
        return _Outcome(stored=stored)

    def charge_fault(self) -> bool:
        return self._take_fault("fail_next")

    def list_charges(self, key: str | None) -> dict[str, Any]:
        if key is not None:
            self._wait_for_key(key)
        with self._lock:
            if key is None:
                data = [dict(c) for c in self._charges.values()]
            else:
                charge_id = self._charge_by_key.get(key)
                data = [dict(self._charges[charge_id])] if charge_id else []
        return {"object": "list", "data": data, "has_more": False}

    # -- refunds -------------------------------------------------------------------------
    def create_refund(self, key: str, body: dict[str, Any]) -> Response:
        return self._keyed(key, "/v1/refunds", body, lambda: self._refund(key, body))

    def _refund(self, key: str, body: dict[str, Any]) -> _Outcome:
        charge_id = body.get("charge")
        if not isinstance(charge_id, str) or not charge_id:
            return _Outcome(None, _error(400, "parameter_missing", "Missing required param: charge.", param="charge"))
        with self._lock:  # check-and-mark under the global lock: two keys cannot both refund
            charge = self._charges.get(charge_id)
            if charge is None:
                return _Outcome(None, _error(404, "resource_missing", f"No such charge: '{charge_id}'"))
            if charge["status"] != "succeeded":
                return _Outcome(None, _error(400, "charge_not_refundable", "Only succeeded charges can be refunded."))
            if charge["refunded"]:
                return _Outcome(
                    None,
                    _error(400, "charge_already_refunded", f"Charge {charge_id} has already been refunded."),
                )
            refund = {
                "id": "re_" + secrets.token_hex(12),
                "object": "refund",
                "charge": charge_id,
                "amount": charge["amount"],
                "currency": charge["currency"],
                "status": "succeeded",
                "idempotency_key": key,
                "created": int(time.time()),
            }
            charge["refunded"] = True
            charge["amount_refunded"] = charge["amount"]
            self._refunds[refund["id"]] = refund
        return _Outcome(stored=(200, _encode(refund)))


def _validate_charge(body: dict[str, Any]) -> Response | None:
    amount = body.get("amount")
    if not isinstance(amount, int) or isinstance(amount, bool) or not 0 < amount <= 99_999_999:
        return _error(400, "parameter_invalid_integer", "amount must be a positive integer (cents).", param="amount")
    currency = body.get("currency")
    if not isinstance(currency, str) or len(currency) != 3 or not currency.isalpha():
        return _error(400, "parameter_invalid", "currency must be a three-letter ISO code.", param="currency")
    description = body.get("description")
    if description is not None and not isinstance(description, str):
        return _error(400, "parameter_invalid", "description must be a string.", param="description")
    metadata = body.get("metadata")
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str | int | float) for v in metadata.values())
    ):
        return _error(400, "parameter_invalid", "metadata must be an object of strings.", param="metadata")
    source = body.get("source")
    if source not in TEST_TOKENS:
        return _error(
            400,
            "invalid_token",
            f"No such token: {source!r}. Test tokens: {', '.join(TEST_TOKENS)}.",
            param="source",
        )
    return None


def make_handler(book: PaymentBook, verbose: bool = False) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 120  # idle keep-alive connections are closed after this long

        def log_message(self, format: str, *args: Any) -> None:
            if verbose:
                super().log_message(format, *args)

        def _send(self, response: Response) -> None:
            status, body = response
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                if self.close_connection:
                    self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. its timeout)
                self.close_connection = True

        def _body(self) -> dict[str, Any] | Response:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True
                return _error(413, "request_too_large", "Request body too large.")
            raw = self.rfile.read(length) if length else b""
            try:
                data = json.loads(raw or b"{}")
            except ValueError:
                return _error(400, "invalid_json", "The request body is not valid JSON.")
            if not isinstance(data, dict):
                return _error(400, "invalid_json", "The request body must be a JSON object.")
            return data

        def _key(self) -> str | None:
            key = (self.headers.get("Idempotency-Key") or "").strip()
            return key if 0 < len(key) <= 255 else None

        def _safely(self, work: Callable[[], Response]) -> None:
            try:
                response = work()
            except Exception as exc:  # never an HTML page or a dropped connection
                response = _error(500, "api_error", f"{type(exc).__name__}: {exc}")
            self._send(response)

        def do_POST(self) -> None:
            self._safely(self._post)

        def do_GET(self) -> None:
            self._safely(self._get)

        def _post(self) -> Response:
            path = urlsplit(self.path).path
            book.count(f"POST {path}")
            if path == "/v1/charges" and book.charge_fault():
                # Before doing anything, even reading the body: nothing recorded, nothing stored.
                self.close_connection = True
                return _error(500, "api_error", "Injected fault before the charge.")
            body = self._body()
            if isinstance(body, tuple):
                return body
            if path == "/_faults":
                return 200, _encode(book.set_faults(body))
            if path not in ("/v1/charges", "/v1/refunds"):
                return _error(404, "not_found", f"Unrecognized request URL (POST: {path}).")
            key = self._key()
            if key is None:
                return _error(
                    400,
                    "idempotency_key_required",
                    "An Idempotency-Key header (1-255 characters) is required.",
                )
            if path == "/v1/charges":
                status, out = book.create_charge(key, body)
                if verbose:
                    print(f"[payments] charge {key} -> {status}", flush=True)
                return status, out
            return book.create_refund(key, body)

        def _get(self) -> Response:
            url = urlsplit(self.path)
            if url.path == "/v1/charges":
                keys = parse_qs(url.query).get("idempotency_key")
                return 200, _encode(book.list_charges(keys[0] if keys else None))
            if url.path == "/_stats":
                return 200, _encode(book.snapshot())
            if url.path in ("/", "/health"):
                return 200, _encode({"ok": True, "testTokens": TEST_TOKENS})
            return _error(404, "not_found", f"Unrecognized request URL (GET: {url.path}).")

        def do_PUT(self) -> None:
            self._send(_error(405, "method_not_allowed", "Method not allowed."))

        do_DELETE = do_PATCH = do_PUT

    return Handler


class PaymentServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a burst opens hundreds of connections at once; the default is 5


def serve(port: int, slow_seconds: float = 3.0, verbose: bool = False) -> PaymentServer:
    """The server, bound to 127.0.0.1 (``port=0`` picks a free one); call ``serve_forever``."""
    return PaymentServer(("127.0.0.1", port), make_handler(PaymentBook(slow_seconds), verbose))


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Local payment provider (Stripe-shaped; test tokens: " + ", ".join(TEST_TOKENS) + ")."
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slow-seconds", type=float, default=3.0, help="delay of the tok_slow test token")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    args = parser.parse_args()
    server = serve(args.port, args.slow_seconds, args.verbose)
    print(f"[payments] local payment provider on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
