"""Who cancelled, on the real stack (issue 39): a director cancels one registration and a runner
cancels their own through their entry's link (each had a T-shirt size with stock); the director's
stats split the cancellations by who made them (the total unchanged), the CSV export says who in
words in its last fixed column, both shirts went back, and the race's audit stays clean."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta
from typing import Any

import pytest
import requests

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold_and_register, runner, wait_confirmed, wait_for_audit
from .test_own_entry import HEADER, _link_token

pytestmark = pytest.mark.integration


def test_the_stats_and_the_export_say_who_cancelled(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-cancelled-by")
    body = race_body((5,))
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    day_before = (date.fromisoformat(body["raceDate"]) - timedelta(days=1)).isoformat()
    policy = {"runnersMayCancel": True, "tiers": [{"until": day_before, "percent": 100}]}
    patched = kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy})
    assert patched.status_code == 200, patched.text
    # A T-shirt size with stock: a cancellation gives its unit back, which the audit checks.
    sizes = [{"id": "M", "label": "Medium", "quantity": 5}]
    shirt = {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "options": sizes}
    saved = kim.put(f"/api/admin/races/{rid}/events/{eid}/questions", json={"questions": [shirt]})
    assert saved.status_code == 200, saved.text
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)

    tag = rid[-6:].lower()
    emails = [f"{who}.{tag}@example.com" for who in ("ann", "bo", "cy")]
    ids = [hold_and_register(api, rid, eid, runner(email) | {"answers": {"shirt": "M"}})[1] for email in emails]
    wait_confirmed(api, ids)
    ann, bo, cy = ids

    # The director cancels Ann's; Bo cancels their own from the link in their confirmation email.
    cancelled = kim.post(f"/api/admin/races/{rid}/registrations/{ann}/cancel", json={"reason": "asked by phone"})
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "CANCELLED"), cancelled.text
    me = {HEADER: _link_token(stack, emails[1])}
    quote = api.get("/api/my/registration/cancellation", headers=me).json()
    assert (quote["allowed"], quote["amountCents"]) == (True, 3000), quote
    own = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": quote["amountCents"]})
    assert (own.status_code, own.json()["registration"]["status"]) == (200, "CANCELLED"), own.text

    # The stats: 2 cancelled, 1 by the runner, 1 by the organiser; the total is what it was.
    stats = kim.get(f"/api/admin/races/{rid}/stats").json()
    (event,) = stats["events"]
    split = ("cancelled", "cancelledByRunners", "cancelledByOrganiser", "cancelledByProvider", "cancelledBySystem")
    assert tuple(event[k] for k in split) == (2, 1, 1, 0, 0), event
    assert tuple(stats["totals"][k] for k in split) == (2, 1, 1, 0, 0), stats["totals"]
    assert (event["confirmed"], event["placesLeft"]) == (1, 4)

    # The export: who cancelled, in words, as the last fixed column (after refundFailures).
    export = kim.get(f"/api/admin/races/{rid}/registrations/export", params={"includeCancelled": "true"})
    assert export.status_code == 200, export.text
    header, *rows = list(csv.reader(io.StringIO(export.text)))
    assert header[-9:] == [
        "refundFailures",
        "cancelledBy",
        "transfers",
        "transferredAt",
        "switches",
        "switchedTo",
        "deferredTo",
        "deferralCredit",
        "T-shirt [shirt]",
    ]  # questions after
    by_id = {row[header.index("registrationId")]: dict(zip(header, row, strict=True)) for row in rows}
    assert {r: by_id[r]["cancelledBy"] for r in ids} == {ann: "organiser", bo: "runner", cy: ""}
    assert {r: by_id[r]["status"] for r in ids} == {ann: "CANCELLED", bo: "CANCELLED", cy: "CONFIRMED"}
    assert by_id[bo]["cancelledAt"] and by_id[ann]["cancelledAt"] and not by_id[cy]["cancelledAt"]
    live_only = kim.get(f"/api/admin/races/{rid}/registrations/export")
    (only,) = list(csv.DictReader(io.StringIO(live_only.text)))
    assert (only["registrationId"], only["cancelledBy"]) == (cy, "")

    # Both cancelled shirts went back: Cy's is the one unit taken (the audit checks it too).
    assert backend.inventory().usage(rid, f"{eid}#OPTION#shirt#M", consistent=True).taken == 1
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.summary()
