"""A runner's steps over HTTP, for the integration tests (the same calls the site makes)."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from local.stack import LocalStack
from tools.audit import AuditReport, audit_until_clean


def runner(email: str | None = None, token: str = "tok_visa") -> dict[str, str]:
    return {
        "email": email or f"runner-{uuid.uuid4().hex[:10]}@example.com",
        "firstName": "Ada",
        "lastName": "Lovelace",
        "dateOfBirth": "1990-12-10",
        "paymentToken": token,
    }


def event_ids(api: requests.Session, race_id: str) -> list[str]:
    return [e["eventId"] for e in api.get(f"/api/races/{race_id}").json()["events"]]


def hold(api: requests.Session, race_id: str, event_id: str) -> requests.Response:
    return api.post(f"/api/races/{race_id}/events/{event_id}/holds")


def register(api: requests.Session, hold_id: str, body: dict[str, Any]) -> requests.Response:
    return api.post(f"/api/holds/{hold_id}/registration", json=body)


def hold_and_register(api: requests.Session, race_id: str, event_id: str, body: dict[str, Any]) -> tuple[str, str]:
    h = hold(api, race_id, event_id)
    assert h.status_code == 201, h.text
    r = register(api, h.json()["holdId"], body)
    assert r.status_code == 202, r.text
    return h.json()["holdId"], r.json()["registrationId"]


def wait_confirmed(api: requests.Session, registration_ids: list[str], timeout: float = 60) -> dict[str, dict]:
    """Poll like the waiting screen (but fast) until every registration is confirmed."""
    deadline = time.monotonic() + timeout
    done: dict[str, dict] = {}
    while time.monotonic() < deadline and len(done) < len(registration_ids):
        for rid in registration_ids:
            if rid in done:
                continue
            resp = api.get(f"/api/registrations/{rid}")
            if resp.status_code == 200 and resp.json()["status"] == "CONFIRMED":
                done[rid] = resp.json()
        if len(done) < len(registration_ids):
            time.sleep(0.3)
    missing = set(registration_ids) - set(done)
    assert not missing, f"{len(missing)} registrations not confirmed within {timeout}s"
    return done


def concurrently(fn: Any, args: list[Any], workers: int = 32) -> list[Any]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, args))


def wait_for_audit(stack: LocalStack, backend: Any, race_id: str, timeout: float = 90) -> AuditReport:
    """Audit once the queues have drained (emails are rate-limited, so this can take a while)."""
    return audit_until_clean(stack, backend.dynamodb, backend.sqs, race_id, timeout_s=timeout)
