"""A race director's side of the API, for the admin integration tests."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from local.stack import LocalStack


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def race_body(caps: tuple[int, ...] = (100,), **over: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    body: dict[str, Any] = {
        "name": f"Admin Test Race {uuid.uuid4().hex[:6]}",
        "location": "Riverside",
        "listing": "LISTED",
        "raceDate": (now + timedelta(days=60)).date().isoformat(),
        "currency": "EUR",
        "registrationOpensAt": iso(now + timedelta(days=1)),
        "registrationClosesAt": iso(now + timedelta(days=30)),
        "events": [{"name": f"Event {i}", "cap": cap, "priceCents": 3000 + i} for i, cap in enumerate(caps)],
    }
    body.update(over)
    return body


BUSY_RETRIES = 4


class DirectorSession(requests.Session):
    """Signed in as ``name`` with a token from the stack's local issuer."""

    def __init__(self, stack: LocalStack, name: str) -> None:
        super().__init__()
        self.base = stack.url
        self.name = name
        self.token = stack.issuer.mint(name)
        self.headers["Authorization"] = f"Bearer {self.token}"
        self.headers["Accept"] = "application/json"

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs.setdefault("timeout", 60)
        url = str(url)
        url = self.base + url if url.startswith("/") else url
        for _ in range(BUSY_RETRIES):
            try:
                resp = super().request(method, url, *args, **kwargs)
            except requests.ConnectionError:
                # A pooled connection the gateway closed as idle (gunicorn's keep-alive is 5 s,
                # and a test that waited Retry-After reuses it just then): safe to send again
                # only when a repeat cannot do it twice, as a browser would.
                repeatable = str(method).upper() in ("GET", "HEAD", "PUT", "DELETE") or "Idempotency-Key" in (
                    kwargs.get("headers") or {}
                )
                if not repeatable:
                    raise
                resp = super().request(method, url, *args, **kwargs)
            # A 503 with Retry-After says nothing was decided and to ask again then: what any
            # client of the API does (the suites share two cores, so a budget can run out).
            if resp.status_code != 503 or "Retry-After" not in resp.headers:
                return resp
            time.sleep(min(float(resp.headers["Retry-After"]), 5))
        return resp

    def create_race(self, caps: tuple[int, ...] = (100,), **over: Any) -> dict[str, Any]:
        resp = self.post("/api/admin/races", json=race_body(caps, **over))
        assert resp.status_code == 201, resp.text
        return resp.json()

    def open_now(self, race_id: str) -> dict[str, Any]:
        resp = self.post(f"/api/admin/races/{race_id}/window/open")
        assert resp.status_code == 200, resp.text
        return resp.json()


def wait_until(check: Any, timeout: float = 20, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(every)


def ask_shirt_sizes(
    director: Any, race_id: str, event_id: str, sizes: list[dict[str, Any]], *, required: bool = False
) -> None:
    """The event's first question set: one T-shirt choice with ``sizes`` (each may have a quantity)."""
    shirt = {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "options": sizes, "required": required}
    saved = director.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"questions": [shirt], "expectedVersion": 0},
    )
    assert saved.status_code == 200, saved.text


def stock_taken(kim: Any, race_id: str, event_id: str) -> dict[str, int]:
    """Each stocked option's units taken, summed over its shards (the questions view lists one
    row per option and shard)."""
    taken: dict[str, int] = {}
    for row in kim.get(f"/api/admin/races/{race_id}/events/{event_id}/questions").json()["stock"]:
        taken[row["optionId"]] = taken.get(row["optionId"], 0) + row["taken"]
    return taken
