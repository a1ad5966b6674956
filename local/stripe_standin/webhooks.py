"""Webhook deliveries, signed as Stripe signs them, with the knobs tests need.

Stripe signs each delivery at send time: ``Stripe-Signature: t=<unix seconds>,v1=<hex>``,
the HMAC-SHA256 of ``"<t>.<payload>"`` under the endpoint's ``whsec_`` secret. A delivery
that does not get a 2xx is retried (Stripe retries for up to three days with backoff;
here: ``retry_delays``), each attempt freshly signed.

Knobs (``configure``): ``delay_s`` before the first attempt; ``duplicate`` extra copies of
each event; ``reorder`` delivers whatever is due newest first; ``paused`` holds deliveries
until unpaused (with ``reorder``, a paused backlog then arrives in reverse order);
``url`` and ``secret`` of the endpoint; ``enabled_events``, the event types the endpoint
subscribes to (Stripe's WebhookEndpoint ``enabled_events``; ``["*"]``: every type). Stripe
posts an endpoint only the types it subscribes to, so a stack whose endpoint lists Racecap's
handled types gets the deliveries a stage gets, and no more.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


def sign(payload: bytes, secret: str, timestamp: int | None = None) -> str:
    """The ``Stripe-Signature`` header value for ``payload``."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


@dataclass(order=True)
class _Pending:
    due: float
    seq: int
    event: dict[str, Any] = field(compare=False)
    attempt: int = field(default=0, compare=False)


class WebhookSender:
    def __init__(
        self,
        url: str | None,
        secret: str,
        *,
        retry_delays: tuple[float, ...] = (1, 2, 5, 10, 30),
        enabled_events: tuple[str, ...] = ("*",),
    ) -> None:
        self.url = url
        self.secret = secret
        self.enabled_events = tuple(enabled_events)
        self.retry_delays = retry_delays
        self.delay_s = 0.0
        self.duplicate = 0
        self.reorder = False
        self.paused = False
        self._pending: list[_Pending] = []
        self._seq = 0
        self._cond = threading.Condition()
        self.deliveries: list[dict[str, Any]] = []  # every attempt, for tests and the stats page
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        self._thread.start()

    def configure(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._cond:
            if "url" in body:
                self.url = str(body["url"]) or None
            if "secret" in body:
                self.secret = str(body["secret"])
            if "enabled_events" in body:
                self.enabled_events = tuple(str(t) for t in body["enabled_events"]) or ("*",)
            if "delay_s" in body:
                self.delay_s = max(0.0, float(body["delay_s"]))
            if "duplicate" in body:
                self.duplicate = max(0, int(body["duplicate"]))
            if "reorder" in body:
                self.reorder = str(body["reorder"]).lower() in ("1", "true", "yes")
            if "paused" in body:
                self.paused = str(body["paused"]).lower() in ("1", "true", "yes")
            self._cond.notify_all()
            return self.settings()

    def settings(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "enabled_events": list(self.enabled_events),
            "delay_s": self.delay_s,
            "duplicate": self.duplicate,
            "reorder": self.reorder,
            "paused": self.paused,
            "pending": len(self._pending),
        }

    def enqueue(self, event: dict[str, Any]) -> None:
        with self._cond:
            if self.url is None or not self.subscribed(str(event.get("type", ""))):
                return
            for _ in range(1 + self.duplicate):
                self._seq += 1
                self._pending.append(_Pending(time.monotonic() + self.delay_s, self._seq, event))
            self._cond.notify_all()

    def subscribed(self, event_type: str) -> bool:
        return "*" in self.enabled_events or event_type in self.enabled_events

    def idle(self) -> bool:
        with self._cond:
            return not self._pending

    def _take(self) -> _Pending:
        with self._cond:
            while True:
                now = time.monotonic()
                due = [p for p in self._pending if p.due <= now]
                if due and not self.paused:
                    chosen = max(due, key=lambda p: p.seq) if self.reorder else min(due)
                    self._pending.remove(chosen)
                    return chosen
                wait = None if self.paused or not self._pending else max(0.01, min(self._pending).due - now)
                self._cond.wait(wait)

    def _run(self) -> None:
        while True:
            item = self._take()
            status = self._deliver(item.event)
            self.deliveries.append(
                {"event": item.event["id"], "type": item.event["type"], "attempt": item.attempt + 1, "status": status}
            )
            if not 200 <= status < 300 and item.attempt < len(self.retry_delays):
                with self._cond:
                    self._seq += 1
                    due = time.monotonic() + self.retry_delays[item.attempt]
                    self._pending.append(_Pending(due, self._seq, item.event, item.attempt + 1))
                    self._cond.notify_all()

    def _deliver(self, event: dict[str, Any]) -> int:
        url = self.url
        if url is None:
            return 0
        payload = json.dumps(event, separators=(",", ":")).encode()
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=30)
        try:
            conn.request(
                "POST",
                parts.path or "/",
                body=payload,
                headers={
                    "Content-Type": "application/json; charset=utf-8",
                    "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
                    "Stripe-Signature": sign(payload, self.secret),
                },
            )
            response = conn.getresponse()
            response.read()
            return response.status
        except OSError:
            return 0
        finally:
            conn.close()
