"""A director's refunds of an amount on the real stack: never more than was charged, however
many clicks arrive at once, and a click past what is left never reaches the provider."""

from __future__ import annotations

import csv
import io
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold_and_register, runner, standin, wait_confirmed, wait_for_audit

pytestmark = pytest.mark.integration


def _refund_counters(stack: LocalStack) -> tuple[int, int]:
    """The stand-in's own counts: refund requests that reached it, refunds it made."""
    stats = standin(stack).get(f"{stack.stripe_url}/_standin/stats").json()
    return stats["requests"].get("POST /v1/refunds", 0), stats["refunds"]


def test_ten_concurrent_refunds_of_30_percent_on_100_euros_refund_at_most_the_charge(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-ledger")
    body = race_body((5,))
    body["events"][0]["priceCents"] = 10_000  # 100 €
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    _, reg_id = hold_and_register(api, rid, eid, runner(f"ledger.{rid[-6:].lower()}@example.com"))
    wait_confirmed(api, [reg_id])
    reached_before, made_before = _refund_counters(stack)

    url = f"/api/admin/races/{rid}/registrations/{reg_id}/refunds"
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda i: kim.post(url, json={"amountCents": 3000, "reason": f"click {i}"}), range(10)))

    codes = sorted(a.status_code for a in answers)
    assert codes == [201] * 3 + [409] * 7, [a.text for a in answers]
    refused = [a.json() for a in answers if a.status_code == 409]
    assert {r["error"] for r in refused} == {"REFUND_TOO_LARGE"}
    made = [a.json() for a in answers if a.status_code == 201]
    assert len({m["refund"]["providerId"] for m in made}) == 3  # three refunds, each its own
    assert {m["refund"]["currency"] for m in made} == {"EUR"}

    # The stand-in's own counters: 3 requests reached it, and it made all 3 (none refused).
    # The stand-in's own record: this payment has exactly the 3 refunds (its counters are the
    # whole account's: a sweeper settling another test's refund beside this one adds to them).
    intent = backend.registrations().get(reg_id).chargeId
    listed = standin(stack).get(f"{stack.stripe_url}/v1/refunds", params={"payment_intent": intent, "limit": 100})
    assert sorted(r["amount"] for r in listed.json()["data"]) == [3000, 3000, 3000]
    reached, refunds = _refund_counters(stack)
    assert reached - reached_before >= 3 and refunds - made_before >= 3

    # The registration stays confirmed; the audit trail has the three refunds with their reasons.
    rows = kim.get(f"/api/admin/races/{rid}/registrations").json()["registrations"]
    assert [(r["registrationId"], r["status"]) for r in rows] == [(reg_id, "CONFIRMED")]
    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    refunds_audited = [e for e in audit if e["action"] == "registration.refund"]
    assert len(refunds_audited) == 3 and all(e["details"]["amountCents"] == 3000 for e in refunds_audited)

    # What is left is 10 €, and a click for exactly that still goes through.
    last = kim.post(url, json={"amountCents": 1000, "reason": "the rest"})
    assert last.status_code == 201, last.text
    statement = last.json()["statement"]
    assert (statement["chargedCents"], statement["refundedCents"], statement["leftCents"]) == (10_000, 10_000, 0)
    assert [e["kind"] for e in statement["entries"]] == ["payment"] + ["refund"] * 4
    assert kim.post(url, json={"amountCents": 1}).status_code == 409

    # The audit, in cents: refunded in full by four refunds, the runner confirmed: clean.
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_full_cancellation_racing_partial_refunds_refunds_exactly_the_charge(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    # Given six confirmed runners of 100 €, each in turn with two partial refunds of 20 € and a
    # FULL cancellation sent at the same moment (three at once: not a burst on a shared machine)
    kim = director("kim-cancel-race")
    body = race_body((8,))
    body["events"][0]["priceCents"] = 10_000
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    regs = [hold_and_register(api, rid, eid, runner(f"race{i}.{rid[-6:].lower()}@example.com"))[1] for i in range(6)]
    wait_confirmed(api, regs)

    def at_once(reg_id: str) -> tuple[list[requests.Response], requests.Response]:
        base = f"/api/admin/races/{rid}/registrations/{reg_id}"
        calls = [(f"{base}/refunds", {"amountCents": 2000, "reason": f"click {i}"}) for i in range(2)]
        calls.append((f"{base}/cancel", {"refund": "FULL", "reason": "injured"}))
        start = threading.Barrier(len(calls))

        def send(call: tuple[str, dict[str, Any]]) -> requests.Response:
            start.wait()
            return kim.post(call[0], json=call[1])

        with ThreadPoolExecutor(len(calls)) as pool:
            *partials, cancel = pool.map(send, calls)
        return partials, cancel

    answers = {reg_id: at_once(reg_id) for reg_id in regs}

    for reg_id, (partials, cancel) in answers.items():
        # Then the cancellation always succeeds, refunding what the partial refunds left
        assert cancel.status_code == 200, cancel.text
        assert {p.status_code for p in partials} <= {201, 409}, [p.text for p in partials]  # 409: cancelled first
        partly = 2000 * sum(p.status_code == 201 for p in partials)
        view = cancel.json()
        assert (view["status"], view["refund"], view["refundedCents"]) == ("CANCELLED", "FULL", 10_000 - partly)
        detail = kim.get(f"/api/admin/races/{rid}/registrations/{reg_id}").json()
        assert detail["status"] == "CANCELLED"
        statement = detail["ledger"]
        assert (statement["refundedCents"], statement["leftCents"]) == (10_000, 0), statement
        ids = [e["providerId"] for e in statement["entries"] if e["kind"] == "refund"]
        made = [standin(stack).get(f"{stack.stripe_url}/v1/refunds/{i}").json()["amount"] for i in ids]
        assert sum(made) == 10_000, made  # the stand-in refunded the charge, never more
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_refund_request_out_of_shape_is_refused_and_changes_nothing(director: Any) -> None:
    kim = director("kim-ledger-bad")
    race = kim.create_race((5,))
    url = f"/api/admin/races/{race['raceId']}/registrations/reg_nope/refunds"
    for bad in ({}, {"amountCents": 0}, {"amountCents": "5"}, {"amountCents": 5, "extra": 1}):
        resp = kim.post(url, json=bad)
        assert resp.status_code == 400 and resp.json()["error"] == "VALIDATION_ERROR", (bad, resp.text)
    assert kim.post(url, json={"amountCents": 5}).status_code == 404


def test_a_director_cancels_with_a_refund_of_an_amount_or_none_within_what_is_left(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-cancel-choice")
    body = race_body((5,))
    body["events"][0]["priceCents"] = 10_000  # 100 €
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    _, ann = hold_and_register(api, rid, eid, runner(f"ann.{rid[-6:].lower()}@example.com"))
    _, bo = hold_and_register(api, rid, eid, runner(f"bo.{rid[-6:].lower()}@example.com"))
    wait_confirmed(api, [ann, bo])
    assert kim.post(f"/api/admin/races/{rid}/registrations/{ann}/refunds", json={"amountCents": 3000}).ok
    reached_before, made_before = _refund_counters(stack)
    cancel = f"/api/admin/races/{rid}/registrations/{ann}/cancel"

    # Out of shape: 400, nothing changed.
    for bad in (
        {"refund": "AMOUNT"},
        {"refund": "NONE", "amountCents": 500},
        {"amountCents": 500},
        {"refund": "SOME"},
        {"refund": "AMOUNT", "amountCents": "500"},
        {"refund": "AMOUNT", "amountCents": 0},
        {"reason": "x" * 501},
    ):
        resp = kim.post(cancel, json=bad)
        assert resp.status_code == 400 and resp.json()["error"] == "VALIDATION_ERROR", (bad, resp.text)
    # More than the 70 € left: a clear 409, the registration still confirmed, no provider asked.
    too_much = kim.post(cancel, json={"refund": "AMOUNT", "amountCents": 7001})
    assert too_much.status_code == 409 and too_much.json()["error"] == "REFUND_TOO_LARGE", too_much.text
    assert "70.00 EUR" in too_much.json()["message"]
    assert backend.registrations().get(ann).status == "CONFIRMED"
    assert _refund_counters(stack) == (reached_before, made_before)

    done = kim.post(cancel, json={"refund": "AMOUNT", "amountCents": 5000, "reason": "moved to next year"})
    assert done.status_code == 200, done.text
    view = done.json()
    assert (view["status"], view["refund"], view["refundedCents"], view["currency"]) == (
        "CANCELLED", "AMOUNT", 5000, "EUR"
    )  # fmt: skip
    refund = standin(stack).get(f"{stack.stripe_url}/v1/refunds/{view['refundId']}").json()
    assert refund["amount"] == 5000
    # Nothing refunded: no provider asked, the place back all the same.
    none = kim.post(f"/api/admin/races/{rid}/registrations/{bo}/cancel", json={"refund": "NONE"})
    assert none.status_code == 200, none.text
    assert (none.json()["refund"], none.json()["refundedCents"], none.json()["refundId"]) == ("NONE", 0, "")
    assert _refund_counters(stack) == (reached_before + 1, made_before + 1)

    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    cancels = {e["target"]: e["details"] for e in audit if e["action"] == "registration.cancel"}
    assert (cancels[ann]["refund"], cancels[ann]["refundCents"], cancels[ann]["reason"]) == (
        "AMOUNT", 5000, "moved to next year"
    )  # fmt: skip
    assert (cancels[bo]["refund"], cancels[bo]["refundCents"]) == ("NONE", 0)
    (event,) = kim.get(f"/api/admin/races/{rid}/stats").json()["events"]
    assert (event["confirmed"], event["cancelled"], event["placesLeft"], event["refundedCents"]) == (0, 2, 5, 8000)
    # The refund's webhook is recorded, not taken for an outside refund: still cancelled as chosen.
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    assert backend.registrations().get(ann).cancelRefundCents == 5000


def _race_intents(stack: LocalStack, race_id: str) -> list[dict[str, Any]]:
    """Every PaymentIntent the stand-in holds for one race (Racecap tags each with its race).

    Scoped to the race, not the stand-in's global counters: other tests' holds expire in the
    background while this one runs, and their intents are cancelled then.
    """
    answer = standin(stack).get(
        f"{stack.stripe_url}/v1/payment_intents/search", params={"query": f"metadata['raceId']:'{race_id}'"}
    )
    assert answer.ok, answer.text
    return list(answer.json()["data"])


def test_a_free_entry_registers_and_is_cancelled_without_any_call_to_the_payment_provider(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-free")
    body = race_body((3,))
    body["events"][0]["priceCents"] = 0  # a free kids' race
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)

    # The details alone register it: queued, no client secret, nothing to pay.
    h = api.post(f"/api/races/{rid}/events/{eid}/holds")
    assert h.status_code == 201 and h.json()["priceCents"] == 0, h.text
    details = runner(f"kid.{rid[-6:].lower()}@example.com", token=None)
    answer = api.post(f"/api/holds/{h.json()['holdId']}/registration", json=details)
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    assert (accepted["status"], accepted["amountCents"], accepted.get("clientSecret")) == ("QUEUED", 0, None)
    reg_id = accepted["registrationId"]
    wait_confirmed(api, [reg_id])

    cancelled = kim.post(f"/api/admin/races/{rid}/registrations/{reg_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert (cancelled.json()["refundedCents"], cancelled.json()["refundId"]) == (0, "")
    (event,) = kim.get(f"/api/admin/races/{rid}/stats").json()["events"]
    assert (event["cancelled"], event["placesLeft"]) == (1, 3)

    # The stand-in holds no intent for this race: none created, so none confirmed, updated or
    # refunded (a refund needs an intent).
    assert _race_intents(stack, rid) == []
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    assert report.charges_succeeded == 0


def test_a_dashboard_partial_refund_is_recorded_and_flagged_in_the_stats_the_export_and_the_audit_trail(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-outside")
    body = race_body((5,))
    body["events"][0]["priceCents"] = 10_000  # 100 €
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    _, reg_id = hold_and_register(api, rid, eid, runner(f"out.{rid[-6:].lower()}@example.com"))
    wait_confirmed(api, [reg_id])
    assert kim.post(f"/api/admin/races/{rid}/registrations/{reg_id}/refunds", json={"amountCents": 1000}).ok
    intent = backend.registrations().get(reg_id).chargeId
    assert [i["id"] for i in _race_intents(stack, rid)] == [intent]  # the free entry's check can see intents

    # 20 € refunded in the provider's dashboard, outside Racecap.
    dashboard = standin(stack).post(
        f"{stack.stripe_url}/_standin/refund", json={"payment_intent": intent, "amount": 2000}
    )
    assert dashboard.ok, dashboard.text
    wait_until(lambda: backend.registrations().get(reg_id).outsideRefunds == 1, timeout=60)
    assert backend.registrations().get(reg_id).status == "CONFIRMED"

    (event,) = kim.get(f"/api/admin/races/{rid}/stats").json()["events"]
    assert (event["grossCents"], event["refundedCents"], event["netCents"]) == (10_000, 3000, 7000)
    assert (event["outsideRefunds"], event["currency"]) == (1, "EUR")
    csv_text = kim.get(f"/api/admin/races/{rid}/registrations/export").text
    header, row = list(csv.reader(io.StringIO(csv_text)))
    got = dict(zip(header, row, strict=True))
    assert (got["amountPaid"], got["amountRefunded"], got["ledgerState"], got["outsideRefunds"]) == (
        "100.00", "30.00", "PARTLY_REFUNDED", "1"
    )  # fmt: skip
    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    (flag,) = [e for e in audit if e["action"] == "registration.refund.outside"]
    assert (flag["target"], flag["details"]["amountCents"], flag["details"]["flagged"]) == (reg_id, 2000, True)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
