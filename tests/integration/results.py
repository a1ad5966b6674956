"""Arranging results scenarios: registrations written straight into the table (the
burst is tested elsewhere), results files uploaded the way a director does (presigned
PUT), and waiting for the processor's verdict."""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

import blueprint

from .admin import DirectorSession


def registration_item(race_id: str, event_id: str, bib: int, first: str, last: str, born: str) -> dict[str, Any]:
    rid = f"reg_r{bib:07d}{event_id[-10:]}"
    return {
        "PutRequest": {
            "Item": {
                "pk": {"S": f"REG#{rid}"},
                "sk": {"S": "REG"},
                "gsi1pk": {"S": f"EVENT#{race_id}#{event_id}"},
                "gsi1sk": {"S": f"BIB#{bib:08d}"},
                "registrationId": {"S": rid},
                "raceId": {"S": race_id},
                "eventId": {"S": event_id},
                "bib": {"N": str(bib)},
                "status": {"S": "CONFIRMED"},
                "firstName": {"S": first},
                "lastName": {"S": last},
                "email": {"S": f"r{bib}.{event_id[-6:]}@example.com"},
                "dateOfBirth": {"S": born},
                "amountCents": {"N": "2500"},
                "currency": {"S": "EUR"},
                "confirmedAt": {"S": "2026-05-01T09:00:00+00:00"},
            }
        }
    }


def seed_registrations(backend: Any, items: Iterable[dict[str, Any]]) -> int:
    table = blueprint.table("Registrations").local_name
    batch_list = list(items)

    def write(batch: list[dict[str, Any]]) -> None:
        request: dict[str, Any] = {table: batch}
        while request:
            request = backend.dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, [batch_list[i : i + 25] for i in range(0, len(batch_list), 25)]))
    return len(batch_list)


def results_url(race_id: str, event_id: str, tail: str = "") -> str:
    return f"/api/admin/races/{race_id}/events/{event_id}/results{tail}"


def upload(director: DirectorSession, race_id: str, event_id: str, csv_text: str | bytes, **rules: Any) -> dict:
    """Start an upload, PUT the file to the presigned URL; returns the ticket."""
    resp = director.post(results_url(race_id, event_id, "/uploads"), json=rules or None)
    assert resp.status_code == 201, resp.text
    ticket = resp.json()
    body = csv_text.encode() if isinstance(csv_text, str) else csv_text
    put = requests.put(ticket["uploadUrl"], data=body, headers=ticket["uploadHeaders"], timeout=60)
    assert put.status_code == 200, put.text
    return dict(ticket)


def wait_for_upload(director: DirectorSession, ticket: dict, timeout: float = 60) -> dict:
    url = results_url(ticket["raceId"], ticket["eventId"], f"/uploads/{ticket['uploadId']}")
    deadline = time.monotonic() + timeout
    while True:
        view = director.get(url).json()
        if view["status"] in ("READY", "REJECTED"):
            return dict(view)
        assert time.monotonic() < deadline, f"upload still {view['status']} after {timeout}s"
        time.sleep(0.2)
