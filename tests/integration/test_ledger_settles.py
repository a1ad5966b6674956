"""Every refund settles exactly once on the real stack, whatever the provider answers or fails to
answer: a refund whose answer was lost (even once the provider forgot its key), refunds clicked
while the payment budget is spent by runners paying at once, and refunds the provider finishes
later (pending, then succeeded; succeeded, then failed). The sweeper's schedule runs every few
seconds here and looks for refunds with no answer after 2 s (tests/integration/conftest.py)."""

from __future__ import annotations

import csv
import io
import time
import uuid
from typing import Any

import pytest
import requests
from racecap.ledger.models import OPEN_PHASES

from local.stack import LocalStack
from tools.audit import audit, local_provider

from .admin import race_body, wait_until
from .flows import (
    concurrently,
    hold,
    register,
    runner,
    spend_payment_budget,
    standin,
    standin_faults,
    wait_confirmed,
    wait_for_audit,
)

pytestmark = pytest.mark.integration


def _race(kim: Any, api: requests.Session, cap: int, price: int = 10_000) -> tuple[str, str]:
    body = race_body((cap,))
    body["events"][0]["priceCents"] = price
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    return rid, eid


def _paid(api: requests.Session, rid: str, eid: str, card: str = "pm_card_visa") -> str:
    """One runner holds and pays (a 429 from the payment budget waited out, as the site does)."""
    for _ in range(20):
        h = hold(api, rid, eid)
        if h.status_code == 201:
            break
        time.sleep(0.5)
    assert h.status_code == 201, h.text
    answer = register(api, h.json()["holdId"], runner(f"r{uuid.uuid4().hex[:10]}@example.com", token=card))
    assert answer.status_code == 202, answer.text
    return str(answer.json()["registrationId"])


def _provider_refunds(stack: LocalStack, intent: str) -> list[dict[str, Any]]:
    answer = standin(stack).get(f"{stack.stripe_url}/v1/refunds", params={"payment_intent": intent, "limit": 100})
    answer.raise_for_status()
    return list(answer.json()["data"])


def _detail(kim: Any, rid: str, reg_id: str) -> dict[str, Any]:
    answer = kim.get(f"/api/admin/races/{rid}/registrations/{reg_id}")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _settled(kim: Any, rid: str, reg_id: str) -> bool:
    return all(e["status"] not in OPEN_PHASES for e in _detail(kim, rid, reg_id)["ledger"]["entries"])


@pytest.mark.parametrize("key_expired", [False, True], ids=["key-kept", "key-expired"])
def test_a_refund_whose_answer_was_lost_is_settled_by_the_sweeper_as_one_refund(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any, key_expired: bool
) -> None:
    kim = director(f"kim-lost-{int(key_expired)}")
    rid, eid = _race(kim, api, 3)
    reg_id = _paid(api, rid, eid)
    wait_confirmed(api, [reg_id])
    intent = backend.registrations().get(reg_id).chargeId
    url = f"/api/admin/races/{rid}/registrations/{reg_id}/refunds"

    # The stand-in refunds, then every answer to the call (the SDK's retries too) is lost.
    standin_faults(stack, lose_answers=3, lose_answers_on="/v1/refunds", lose_answers_for=intent)
    try:
        answer = kim.post(url, json={"amountCents": 3000}, headers={"Idempotency-Key": "dialog-lost-0001"})
        if key_expired:  # from now on the stand-in forgets every key: asking again would refund twice
            standin_faults(stack, idempotency_ttl_s=0)
        assert answer.status_code == 202, answer.text
        assert answer.json()["refund"]["status"] == "PENDING"
        assert answer.json()["statement"]["pendingCents"] == 3000
        assert len(_provider_refunds(stack, intent)) == 1  # made, the answer lost
        wait_until(lambda: _settled(kim, rid, reg_id), timeout=60)
    finally:
        standin_faults(stack, lose_answers=0, lose_answers_on="/v1/", lose_answers_for="", idempotency_ttl_s=24 * 3600)

    (made,) = _provider_refunds(stack, intent)  # one refund, not two
    (entry,) = [e for e in _detail(kim, rid, reg_id)["ledger"]["entries"] if e["kind"] == "refund"]
    assert (entry["status"], entry["providerId"], entry["amountCents"]) == ("SUCCEEDED", made["id"], 3000)
    # The director's retry of the same dialog replays it: still one refund.
    again = kim.post(url, json={"amountCents": 3000}, headers={"Idempotency-Key": "dialog-lost-0001"})
    assert again.status_code == 201 and again.json()["refund"]["providerId"] == made["id"], again.text
    assert len(_provider_refunds(stack, intent)) == 1
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_refund_clicks_while_thirty_runners_spend_the_payment_budget_settle_or_are_released(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-budget-refunds")
    rid, eid = _race(kim, api, 40)
    reg_id = _paid(api, rid, eid)
    wait_confirmed(api, [reg_id])
    intent = backend.registrations().get(reg_id).chargeId
    url = f"/api/admin/races/{rid}/registrations/{reg_id}/refunds"

    def click(i: int) -> requests.Response:
        return kim.post(url, json={"amountCents": 3000}, headers={"Idempotency-Key": f"dialog-budget-{i:04d}"})

    # 30 runners hold, then pay at once (their intents spend the shared budget: 24 calls a second)
    # while 10 refund dialogs are submitted on the 100.00 registration.
    holds = [h.json()["holdId"] for h in concurrently(lambda _: hold(api, rid, eid), list(range(30)))]
    bodies = {h: runner(f"r{uuid.uuid4().hex[:10]}@example.com") for h in holds}

    def pay(h: str) -> requests.Response:
        return api.post(f"/api/holds/{h}/registration", json=bodies[h])

    # Two cores cannot send 30 payments in the same instant, as 30 Lambda environments would:
    # the next two seconds of the budget go first, as an opening's other calls would take them.
    spend_payment_budget(stack, seconds=2.0)
    work: list[Any] = [("runner", h) for h in holds] + [("click", i) for i in range(10)]
    results = concurrently(lambda w: pay(w[1]) if w[0] == "runner" else click(w[1]), work, workers=16)
    clicks: dict[int, requests.Response] = {w[1]: r for w, r in zip(work, results, strict=True) if w[0] == "click"}
    paying = [r.status_code for w, r in zip(work, results, strict=True) if w[0] == "runner"]
    assert 429 in paying, paying  # the budget was spent: some runners were told to wait
    for h, code in zip(holds, paying, strict=True):
        if code == 429:
            assert register(api, h, bodies[h]).status_code == 202  # ... and kept their places
    assert {r.status_code for r in clicks.values()} <= {201, 202, 409, 429}, [r.text for r in clicks.values()]
    print(
        f"\n[refunds beside 30 payments] clicks {sorted(r.status_code for r in clicks.values())}, payments {sorted(paying)}"
    )
    for r in clicks.values():
        if r.status_code == 429:  # the budget: nothing reserved, a Retry-After to wait
            assert r.json()["error"] == "TOO_MANY_REQUESTS" and int(r.headers["Retry-After"]) >= 1
        if r.status_code == 409:
            assert r.json()["error"] == "REFUND_TOO_LARGE", r.text
    # The console retries a refused dialog with its own key, after Retry-After.
    for i in list(clicks):
        while clicks[i].status_code == 429:
            time.sleep(float(clicks[i].headers["Retry-After"]))
            clicks[i] = click(i)
    assert sorted(r.status_code for r in clicks.values() if r.status_code != 409) in ([201] * 3, [201, 201, 202])
    # After the sweeper's runs: the ledger equals the provider's refunds to the cent, nothing reserved.
    wait_until(lambda: _settled(kim, rid, reg_id), timeout=60)
    statement = _detail(kim, rid, reg_id)["ledger"]
    made = sum(int(r["amount"]) for r in _provider_refunds(stack, intent) if r["status"] != "failed")
    assert statement["refundedCents"] == made == 9000 and statement["pendingCents"] == 0
    assert backend.registrations().get(reg_id).ledgerPending == 0
    report = wait_for_audit(stack, backend, rid, timeout=120)
    assert report.ok, report.violations


def test_refunds_the_provider_finishes_later_pending_then_succeeded_and_succeeded_then_failed(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-later")
    rid, eid = _race(kim, api, 3)
    pending_reg = _paid(api, rid, eid, "pm_card_pendingRefund")
    failing_reg = _paid(api, rid, eid, "pm_card_refundFail")
    wait_confirmed(api, [pending_reg, failing_reg])
    base = f"/api/admin/races/{rid}/registrations"

    pending = kim.post(f"{base}/{pending_reg}/refunds", json={"amountCents": 4000})
    assert pending.status_code == 202 and pending.json()["refund"]["status"] == "PROCESSING", pending.text
    failing = kim.post(f"{base}/{failing_reg}/refunds", json={"amountCents": 10_000})
    assert failing.status_code == 201 and failing.json()["refund"]["status"] == "SUCCEEDED", failing.text

    # Some time later the provider says so (charge.refund.updated): one succeeded, one failed.
    def entry(reg_id: str) -> dict[str, Any]:
        return next(e for e in _detail(kim, rid, reg_id)["ledger"]["entries"] if e["kind"] == "refund")

    wait_until(lambda: entry(pending_reg)["status"] == "SUCCEEDED", timeout=60)
    wait_until(lambda: entry(failing_reg)["status"] == "FAILED", timeout=60)
    assert entry(failing_reg)["failureReason"] == "expired_or_canceled_card"
    failed = _detail(kim, rid, failing_reg)["ledger"]
    assert (failed["refundedCents"], failed["leftCents"]) == (0, 10_000)  # refundable again

    # The stats and the export follow; the audit trail tells the director.
    (event,) = kim.get(f"/api/admin/races/{rid}/stats").json()["events"]
    assert (event["grossCents"], event["refundedCents"], event["netCents"]) == (20_000, 4000, 16_000)
    rows = list(csv.reader(io.StringIO(kim.get(f"{base}/export").text)))
    got = {r[rows[0].index("registrationId")]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert (got[failing_reg]["amountRefunded"], got[failing_reg]["refundFailures"]) == ("0.00", "1")
    assert (got[pending_reg]["amountRefunded"], got[pending_reg]["ledgerState"]) == ("40.00", "PARTLY_REFUNDED")
    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    (told,) = [e for e in audit if e["action"] == "registration.refund.failed"]
    assert (told["target"], told["details"]["amountCents"]) == (failing_reg, 10_000)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def _charge(stack: LocalStack, rid: str, reg_id: str, cents: int, purpose: str) -> str:
    """A payment of another purpose for the registration, as the upgrade flow will make it."""
    body = {
        "amount": str(cents),
        "currency": "eur",
        "payment_method": "pm_card_visa",
        "confirm": "true",
        "description": purpose,
        "metadata[raceId]": rid,
        "metadata[registrationId]": reg_id,
        "metadata[purpose]": purpose,
    }
    answer = standin(stack).post(
        f"{stack.stripe_url}/v1/payment_intents", data=body, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert answer.status_code == 200 and answer.json()["status"] == "succeeded", answer.text
    return str(answer.json()["id"])


def test_a_registration_with_two_payments_refunds_across_both_and_the_audit_checks_each(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim = director("kim-two-payments")
    rid, eid = _race(kim, api, 3)
    reg_id = _paid(api, rid, eid)
    wait_confirmed(api, [reg_id])
    entry = backend.registrations().get(reg_id).chargeId
    upgrade = _charge(stack, rid, reg_id, 2000, "upgrade")  # its webhook records it in the ledger
    wait_until(lambda: _detail(kim, rid, reg_id)["ledger"]["chargedCents"] == 12_000, timeout=30)

    url = f"/api/admin/races/{rid}/registrations/{reg_id}/refunds"
    answer = kim.post(url, json={"amountCents": 5000}, headers={"Idempotency-Key": "dialog-two-payments"})
    assert answer.status_code == 201, answer.text
    parts = answer.json()["parts"]
    assert [(p["intentId"], p["amountCents"], p["status"]) for p in parts] == [
        (upgrade, 2000, "SUCCEEDED"), (entry, 3000, "SUCCEEDED")
    ]  # fmt: skip
    assert [r["amount"] for r in _provider_refunds(stack, upgrade)] == [2000]
    assert [r["amount"] for r in _provider_refunds(stack, entry)] == [3000]
    statement = _detail(kim, rid, reg_id)["ledger"]
    assert (statement["chargedCents"], statement["refundedCents"], statement["leftCents"]) == (12_000, 5000, 7000)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations

    # A third charge the ledger does not know (a purpose Racecap never charges for): the audit
    # names it, against the provider's own records.
    planted = _charge(stack, rid, reg_id, 700, "donation")
    report = audit(
        backend.dynamodb,
        backend.sqs,
        rid,
        provider=local_provider(stack),
        queue_urls=stack.queue_urls,
        expect_emails=False,
    )
    assert any(
        f"payment {planted} (donation) is not in registration {reg_id}'s ledger" in v for v in report.violations
    ), report.violations


@pytest.mark.parametrize("fault", ["timeout", "rate-limited"])
def test_a_cancellation_left_half_way_is_finished_by_the_sweeper_and_refunded_once(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any, fault: str
) -> None:
    kim = director(f"kim-half-way-{fault}")
    rid, eid = _race(kim, api, 3)
    reg_id = _paid(api, rid, eid)
    wait_confirmed(api, [reg_id])
    intent = backend.registrations().get(reg_id).chargeId
    cancel = f"/api/admin/races/{rid}/registrations/{reg_id}/cancel"
    try:
        if fault == "timeout":
            standin_faults(stack, lose_answers=3, lose_answers_on="/v1/refunds", lose_answers_for=intent)
        else:
            spend_payment_budget(stack, seconds=3.0)
        answer = kim.post(cancel, json={"refund": "AMOUNT", "amountCents": 6000})
    finally:
        standin_faults(stack, lose_answers=0, lose_answers_on="/v1/", lose_answers_for="")
    assert answer.status_code == 429 and int(answer.headers["Retry-After"]) >= 1, answer.text
    assert backend.registrations().get(reg_id).status == "CANCELLING"
    # Nobody clicks again: the sweeper (every 3 s here) finishes it under its own key.
    wait_until(lambda: backend.registrations().get(reg_id).status == "CANCELLED", timeout=30)
    assert [r["amount"] for r in _provider_refunds(stack, intent)] == [6000]  # refunded once
    status = api.get(f"/api/registrations/{reg_id}").json()
    assert status["status"] == "CANCELLED" and status["message"].endswith("Refunded: 60.00 EUR."), status
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
