"""A local SES (v2 API) endpoint that keeps every email where a person can read it.

boto3's ``sesv2`` client, pointed here by ``AWS_ENDPOINT_URL_SESV2``, sends as it would
to AWS. Each message is stored as a JSON file; ``/`` is a mailbox page, ``/messages.json``
the same for tests. Like SES it enforces a maximum send rate and answers over-rate sends
with ``TooManyRequestsException``; ``POST /_faults`` makes the next N sends throttle, to
prove the consumer retries instead of dropping mail.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import threading
import time
import uuid
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Mailbox:
    def __init__(self, directory: Path, max_rate: float) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_rate = max_rate
        self._sent: deque[float] = deque()
        self._lock = threading.Lock()
        self.throttle_next = 0
        self.throttled = 0

    def admit(self) -> bool:
        """Sliding one-second window, as SES measures its maximum send rate."""
        now = time.monotonic()
        with self._lock:
            if self.throttle_next > 0:
                self.throttle_next -= 1
                self.throttled += 1
                return False
            while self._sent and now - self._sent[0] >= 1.0:
                self._sent.popleft()
            if len(self._sent) >= self.max_rate:
                self.throttled += 1
                return False
            self._sent.append(now)
            return True

    def store(self, request: dict[str, Any]) -> str:
        message_id = f"{time.time_ns():x}-{uuid.uuid4().hex[:12]}"
        simple = request.get("Content", {}).get("Simple", {})
        record = {
            "messageId": message_id,
            "sentAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "from": request.get("FromEmailAddress"),
            "to": request.get("Destination", {}).get("ToAddresses", []),
            "subject": simple.get("Subject", {}).get("Data", ""),
            "text": simple.get("Body", {}).get("Text", {}).get("Data", ""),
            "html": simple.get("Body", {}).get("Html", {}).get("Data", ""),
            "tags": {t["Name"]: t["Value"] for t in request.get("EmailTags", [])},
        }
        tmp = self.dir / f".{message_id}.tmp"
        tmp.write_text(json.dumps(record))
        tmp.rename(self.dir / f"{message_id}.json")
        return message_id

    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.dir.glob("*.json"), reverse=True)]

    def clear(self) -> None:
        for p in self.dir.glob("*.json"):
            p.unlink()


def make_handler(box: Mailbox) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet: one line per send is enough
            pass

        def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, body: Any, extra: dict[str, str] | None = None) -> None:
            self._send(status, json.dumps(body).encode(), "application/json", extra)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_POST(self) -> None:
            if self.path == "/v2/email/outbound-emails":
                request = self._body()
                if not box.admit():
                    self._json(
                        429,
                        {"message": "Maximum sending rate exceeded."},
                        {"x-amzn-ErrorType": "TooManyRequestsException"},
                    )
                    return
                message_id = box.store(request)
                # The id only: a runner's address belongs in the mailbox, not in a log line.
                recipients = len(request.get("Destination", {}).get("ToAddresses") or [])
                print(f"[ses] sent {message_id} to {recipients} recipient(s)", flush=True)
                self._json(200, {"MessageId": message_id})
            elif self.path == "/_faults":
                box.throttle_next = int(self._body().get("throttle", 0))
                self._json(200, {"throttleNext": box.throttle_next})
            else:
                self._json(
                    404,
                    {"message": f"Unknown operation {self.path}"},
                    {"x-amzn-ErrorType": "NotFoundException"},
                )

        def do_DELETE(self) -> None:
            if self.path == "/messages":
                box.clear()
                self._json(200, {"cleared": True})
            else:
                self._json(404, {"message": "not found"})

        def do_GET(self) -> None:
            if self.path == "/messages.json":
                self._json(200, {"messages": box.messages(), "throttled": box.throttled})
            elif self.path.startswith("/messages/"):
                wanted = self.path.rsplit("/", 1)[-1]
                msg = next((m for m in box.messages() if m["messageId"] == wanted), None)
                if msg is None:
                    self._send(404, b"No such message", "text/plain")
                else:
                    self._send(
                        200,
                        (msg["html"] or f"<pre>{html.escape(msg['text'])}</pre>").encode(),
                        "text/html; charset=utf-8",
                    )
            elif self.path in ("/", "/index.html"):
                self._send(200, _mailbox_page(box.messages()).encode(), "text/html; charset=utf-8")
            else:
                self._send(404, b"not found", "text/plain")

    return Handler


def _mailbox_page(messages: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(m['sentAt'])}</td><td>{html.escape(', '.join(m['to']))}</td>"
        f"<td><a href='/messages/{m['messageId']}'>{html.escape(m['subject'])}</a></td></tr>"
        for m in messages[:500]
    )
    return (
        "<!doctype html><html lang=en><meta charset=utf-8><title>Racecap local mailbox</title>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        "<style>body{font:16px system-ui;margin:1rem}table{border-collapse:collapse;width:100%}"
        "td,th{border-bottom:1px solid #ccc;padding:.4rem;text-align:left}</style>"
        f"<h1>Local mailbox</h1><p>{len(messages)} emails sent through the local SES endpoint.</p>"
        f"<table><thead><tr><th>Sent</th><th>To</th><th>Subject</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--max-rate", type=float, default=14.0, help="sends per second, like an SES account")
    args = parser.parse_args()
    box = Mailbox(args.dir, args.max_rate)
    ThreadingHTTPServer.request_queue_size = 1024  # the default (5) stalls under a burst
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(box))
    server.daemon_threads = True
    print(f"[ses] local SES on http://127.0.0.1:{args.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
