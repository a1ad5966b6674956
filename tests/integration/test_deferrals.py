"""A runner defers their place to the race's next edition, on the real stack (issue 41): none
before the next edition exists (a copy of the race); the credit (paid less the policy's fee) said
before confirming and sent back; the place here freed with no refund, the money kept in this
race's ledger; a personal code in the next edition that only the runner's address can register
with, applied at its card step as any code; both races' audits clean."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
import requests

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold, hold_and_register, register, runner, wait_confirmed, wait_for_audit
from .test_own_entry import HEADER, _day, _link_token, _mail

pytestmark = pytest.mark.integration


def test_a_deferred_place_becomes_a_personal_code_in_the_next_edition_and_the_books_balance_in_both(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-defer")
    body = race_body((5,))
    body["events"][0]["priceCents"] = 4500
    rid = kim.post("/api/admin/races", json=body).json()["raceId"]
    eid = kim.get(f"/api/admin/races/{rid}").json()["events"][0]["eventId"]
    policy = {"deferralsUntil": _day(20), "deferralFeeCents": 500}
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy}).status_code == 200
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    tag = rid[-6:].lower()
    ada, bob = f"ada.{tag}@example.com", f"bob.{tag}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(ada))
    wait_confirmed(api, [reg_id])
    me = {HEADER: _link_token(stack, ada)}

    early = api.get("/api/my/registration/deferral", headers=me).json()
    assert (early["allowed"], early["nextRaceId"]) == (False, None) and "next edition" in early["note"]
    refused = api.post("/api/my/registration/deferral", headers=me, json={"creditCents": 4000})
    assert (refused.status_code, refused.json()["error"]) == (403, "DEFERRAL_NOT_ALLOWED"), refused.text

    copy = kim.post(f"/api/admin/races/{rid}/copy", json={"name": "Next Year"}).json()
    nxt = copy["raceId"]
    quote = api.get("/api/my/registration/deferral", headers=me).json()
    assert (quote["allowed"], quote["nextRaceId"], quote["creditCents"], quote["feeCents"]) == (True, nxt, 4000, 500)
    stale = api.post("/api/my/registration/deferral", headers=me, json={"creditCents": 4500})
    assert (stale.status_code, stale.json()["error"]) == (409, "QUOTE_CHANGED"), stale.text
    assert backend.registrations().get(reg_id).status == "CONFIRMED"  # nothing changed

    done = api.post("/api/my/registration/deferral", headers=me, json={"creditCents": 4000})
    assert done.status_code == 200, done.text
    code = done.json()["code"]
    assert code.startswith("DEFER-") and done.json()["nextRaceId"] == nxt
    again = api.post("/api/my/registration/deferral", headers=me, json={"creditCents": 4000})
    assert (again.status_code, again.json()["code"]) == (200, code)  # a second click: the same code, no other
    reg = backend.registrations().get(reg_id)
    assert (reg.status, reg.deferredTo, reg.deferralCreditCents, reg.cancelRefundCents) == ("CANCELLED", nxt, 4000, 0)
    mail = wait_until(lambda: _mail(stack, ada, "deferred"), timeout=45)
    assert code in mail[0]["text"]
    stats = kim.get(f"/api/admin/races/{rid}/stats").json()["events"][0]
    assert (stats["confirmed"], stats["cancelled"], stats["deferred"], stats["refundedCents"]) == (0, 1, 1, 0)
    export = kim.get(f"/api/admin/races/{rid}/registrations/export?includeCancelled=true").text
    (row,) = list(csv.DictReader(io.StringIO(export)))
    assert (row["deferredTo"], row["deferralCredit"], row["status"]) == (nxt, "40.00", "CANCELLED")
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    (listed,) = [c for c in kim.get(f"/api/admin/races/{nxt}/codes").json()["codes"] if c["code"] == code]
    assert (listed["amountCents"], listed["maxUses"], listed["uses"]) == (4000, 1, 0)

    # The next edition opens: the code is Ada's alone, and takes 40.00 off her entry there.
    assert kim.post(f"/api/admin/races/{nxt}/publish", json={"listing": "LISTED"}).status_code == 200
    kim.open_now(nxt)
    wait_until(lambda: api.get(f"/api/races/{nxt}").json()["status"] == "OPEN", timeout=5)
    next_eid = copy["events"][0]["eventId"]
    bobs = hold(api, nxt, next_eid).json()["holdId"]
    assert api.put(f"/api/holds/{bobs}/code", json={"code": code}).status_code == 200
    stolen = register(api, bobs, runner(bob))
    assert (stolen.status_code, stolen.json()["error"]) == (400, "VALIDATION_ERROR"), stolen.text
    assert api.delete(f"/api/holds/{bobs}/code").status_code == 200  # Bob registers at the full price
    assert register(api, bobs, runner(bob)).status_code == 202
    adas = hold(api, nxt, next_eid).json()["holdId"]
    applied = api.put(f"/api/holds/{adas}/code", json={"code": code})
    assert applied.status_code == 200 and applied.json()["priceCents"] == 500, applied.text
    accepted = register(api, adas, runner(ada))
    assert accepted.status_code == 202, accepted.text
    confirmed = wait_confirmed(api, [accepted.json()["registrationId"]])
    (mine,) = confirmed.values()
    assert mine["status"] == "CONFIRMED"
    new = backend.registrations().get(accepted.json()["registrationId"])
    assert (new.amountCents, new.code, new.discountCents) == (500, code, 4000)
    report = wait_for_audit(stack, backend, nxt)
    assert report.ok, report.violations


def test_a_burst_of_switches_transfers_deferrals_and_cancellations_leaves_the_books_balanced(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    """The issue's burst: sixteen runners of one event act at once, each by their own link —
    switching to a cheaper or a dearer event, handing their place over, deferring, cancelling,
    and two racing a switch against their own cancellation. Afterwards the audit finds one
    registration per email, bibs 1..N per event, stock and places accounted for, Σ refunds within
    Σ payments per registration and per charge, one confirmation each, every deferral's code."""
    from concurrent.futures import ThreadPoolExecutor

    from .test_transfers import _new_runner, _offer_token

    kim = director("kim-after-burst")
    body = race_body((30, 10, 30))
    for event, price in zip(body["events"], (4500, 6000, 2500), strict=True):
        event["priceCents"] = price
    rid = kim.post("/api/admin/races", json=body).json()["raceId"]
    ten, half, five = (e["eventId"] for e in kim.get(f"/api/admin/races/{rid}").json()["events"])
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "switchesUntil": _day(20),
              "transfersUntil": _day(20), "deferralsUntil": _day(20)}  # fmt: skip
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy}).status_code == 200
    nxt = kim.post(f"/api/admin/races/{rid}/copy", json={"name": "Next Year"}).json()["raceId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    tag = rid[-6:].lower()
    emails = [f"r{i}.{tag}@example.com" for i in range(16)]
    ids = [hold_and_register(api, rid, ten, runner(e))[1] for e in emails]
    wait_confirmed(api, ids)
    links = [{HEADER: _link_token(stack, e)} for e in emails]

    def cancel(me: dict[str, str]) -> int:
        quote = api.get("/api/my/registration/cancellation", headers=me)
        if quote.status_code != 200:
            return quote.status_code
        return api.post("/api/my/registration/cancellation", headers=me,
                        json={"amountCents": quote.json()["amountCents"]}).status_code  # fmt: skip

    def switch(me: dict[str, str], eid: str) -> int:
        body = {"eventId": eid, "paymentMethod": "pm_card_visa"}
        return api.post("/api/my/registration/switch", headers=me, json=body).status_code

    def transfer(i: int) -> int:
        friend = f"friend{i}.{tag}@example.com"
        assert api.post("/api/my/registration/transfer", headers=links[i], json={"email": friend}).status_code == 202
        return api.post("/api/transfers/accept", json=_new_runner(_offer_token(stack, friend))).status_code

    def defer(me: dict[str, str]) -> int:
        quote = api.get("/api/my/registration/deferral", headers=me).json()
        return api.post(
            "/api/my/registration/deferral", headers=me, json={"creditCents": quote["creditCents"]}
        ).status_code

    with ThreadPoolExecutor(max_workers=4) as pool:
        jobs = [
            *(pool.submit(switch, links[i], five) for i in range(0, 4)),
            *(pool.submit(switch, links[i], half) for i in range(4, 6)),
            *(pool.submit(transfer, i) for i in range(6, 9)),
            *(pool.submit(defer, links[i]) for i in range(9, 12)),
            *(pool.submit(cancel, links[i]) for i in range(12, 14)),
            *(pool.submit(f, links[i], *a) for i in range(14, 16) for f, a in ((switch, (five,)), (cancel, ()))),
        ]
        codes = [j.result() for j in jobs]
    assert codes[:14] == [200] * 14, codes  # each runner's one action went through
    raced = codes[14:]
    assert all(c in (200, 401, 403, 409) for c in raced) and 200 in raced[0:2] and 200 in raced[2:4], raced
    events = {e["eventId"]: e for e in kim.get(f"/api/admin/races/{rid}/stats").json()["events"]}
    assert events[half]["switchedIn"] == 2 and events[five]["switchedIn"] >= 4
    assert events[ten]["deferred"] == 3 and events[ten]["transfers"] == 3
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    codes_there = [
        c for c in kim.get(f"/api/admin/races/{nxt}/codes").json()["codes"] if c["code"].startswith("DEFER-")
    ]
    assert len(codes_there) == 3
