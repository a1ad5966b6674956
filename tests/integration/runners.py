"""Runners (and bots) as the fairness layer sees them: an address, a device, a queue place.

The local gateway plays CloudFront and trusts ``CloudFront-Viewer-Address``, so one test
can be thousands of runners behind different addresses, or one bot behind one.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import requests
from racecap.fairness.work import solve

_next_address = itertools.count(1)


def fresh_address() -> str:
    """A documentation-range address nobody else in the session uses."""
    n = next(_next_address)
    return f"198.18.{n // 250}.{n % 250 + 1}"


def why(resp: requests.Response) -> str:
    """An answer in one short line, status first (a CI summary cuts long lines off)."""
    return f"HTTP {resp.status_code} Retry-After={resp.headers.get('Retry-After')} {resp.text[:300]}"


def claims(token: str) -> dict[str, Any]:
    """The payload of a Racecap token (no verification: the server does that)."""
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))  # type: ignore[no-any-return]


class Runner:
    def __init__(self, api: requests.Session, address: str | None = None, *, device: bool = True) -> None:
        self.api = api
        self.address = address or fresh_address()
        self.device_token: str | None = None
        self.queue_token: str | None = None
        self.admission_token: str | None = None
        if device:
            self.new_device()

    def headers(self, **extra: str | None) -> dict[str, str]:
        out = {"CloudFront-Viewer-Address": f"{self.address}:443"}
        if self.device_token:
            out["X-Racecap-Device"] = self.device_token
        if self.queue_token:
            out["X-Racecap-Queue"] = self.queue_token
        if self.admission_token:
            out["X-Racecap-Admission"] = self.admission_token
        out.update({k.replace("_", "-"): v for k, v in extra.items() if v is not None})
        return out

    def call(self, method: str, url: str, **kw: Any) -> requests.Response:
        headers = {**self.headers(), **kw.pop("headers", {})}
        return self.api.request(method, url, headers=headers, **kw)

    def new_device(self) -> str:
        resp = self.call("POST", "/api/device")
        assert resp.status_code == 201, why(resp)
        self.device_token = resp.json()["deviceToken"]
        return self.device_token

    def challenge(self, race_id: str) -> dict[str, Any]:
        resp = self.call("POST", f"/api/races/{race_id}/queue/challenge")
        assert resp.status_code == 201, why(resp)
        return resp.json()  # type: ignore[no-any-return]

    def enter(self, race_id: str, body: dict[str, Any] | None = None) -> requests.Response:
        if body is None:
            ch = self.challenge(race_id)
            body = {"challenge": ch["challenge"], "nonce": solve(ch["challenge"], ch["difficulty"])}
        resp = self.call("POST", f"/api/races/{race_id}/queue", json=body)
        if resp.status_code == 200:
            self.take(resp.json())
        return resp

    def poll(self, race_id: str) -> requests.Response:
        resp = self.call("GET", f"/api/races/{race_id}/queue")
        if resp.status_code == 200:
            self.take(resp.json())
        return resp

    def take(self, view: dict[str, Any]) -> None:
        self.queue_token = view.get("queueToken") or self.queue_token
        self.admission_token = view.get("admissionToken") or self.admission_token

    def hold(self, race_id: str, event_id: str) -> requests.Response:
        # A long timeout: bursts of holds on a shared, loaded machine queue behind each other.
        return self.call("POST", f"/api/races/{race_id}/events/{event_id}/holds", timeout=120)
