"""Paying through Stripe's PaymentIntents, end to end on the local stack: the runner's details
claim the email and get the hold's one intent; the browser confirms it with the Stripe
stand-in (as Stripe.js does); the confirm call, the signed webhook or the sweeper registers it,
once. Outside refunds, disputes, unmatched payments and the provider's rate limit included."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from racecap.aws.items import to_item, values

from local.stripe_standin.server import Keys
from local.stripe_standin.webhooks import sign
from tests.integration.admin import wait_until
from tests.integration.flows import (
    browser_pays,
    confirm,
    event_ids,
    hold,
    intents_for,
    register,
    runner,
    standin,
    wait_confirmed,
    wait_for_audit,
    webhooks,
)

pytestmark = pytest.mark.integration


def _details(api: requests.Session, race_id: str, email: str | None = None) -> tuple[str, dict[str, Any]]:
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    resp = register(api, hold_id, runner(email, token=None))
    assert resp.status_code == 200, resp.text
    return hold_id, resp.json()


def _mail(stack: Any, kind: str, to: str) -> list[dict[str, Any]]:
    mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
    return [m for m in mail if m["tags"].get("kind") == kind and m["to"] == [to]]


def _expire(backend: Any, hold_id: str) -> None:
    long_ago = (datetime.now(UTC) - timedelta(minutes=15)).isoformat()
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
        UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
        ExpressionAttributeValues=values({":t": long_ago}),
    )


def _taken(backend: Any, race_id: str, api: requests.Session) -> int:
    (event_id,) = event_ids(api, race_id)
    return int(backend.inventory().usage(race_id, event_id, consistent=True).taken)


def test_a_price_edit_during_a_hold_leaves_the_held_runners_charge_at_the_held_price(api, stack, director):
    """The price is fixed on the hold when the place is taken; the edit changes new holds only."""
    dana = director("dana-prices")
    race = dana.create_race((5,))
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    held_price, currency = race["events"][0]["priceCents"], race["events"][0]["currency"]
    dana.open_now(rid)
    first = hold(api, rid, eid)
    assert first.status_code == 201, first.text
    edited = dana.patch(f"/api/admin/races/{rid}/events/{eid}", json={"priceCents": held_price + 4000})
    assert edited.status_code == 200, edited.text
    # Holds read the race through the version-stamped cache: an edit reaches them within the
    # stamp's ~1 s in-process life (cache.stamp_ttl), as it reaches the public page.
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["events"][0]["priceCents"] == held_price + 4000)
    time.sleep(1.2)
    second = hold(api, rid, eid)  # taken after the edit: the new price
    assert second.status_code == 201, second.text

    charged = {}
    for name, h in (("first", first.json()["holdId"]), ("second", second.json()["holdId"])):
        started = register(api, h, runner(token=None))
        assert started.status_code == 200, started.text
        (intent,) = intents_for(stack, hold_id=h)
        assert browser_pays(stack, intent["id"])["status"] == "succeeded"
        assert confirm(api, h).status_code == 202
        charged[name] = (started.json()["amountCents"], intent["amount"], intent["currency"])
    assert charged == {
        "first": (held_price, held_price, currency.lower()),
        "second": (held_price + 4000, held_price + 4000, currency.lower()),
    }


def test_details_then_browser_decline_then_success_then_confirm(api, backend, stack):
    race_id = backend.create_race([3])
    hold_id, started = _details(api, race_id)
    assert started["status"] == "PAYMENT_REQUIRED" and started["clientSecret"]
    assert (started["amountCents"], started["currency"]) == (2500, "USD")  # the server's price
    # A second tab (or a reload) gets the same intent: one per hold.
    second = register(api, hold_id, runner(_email_of(backend, hold_id), token=None))
    assert second.json()["clientSecret"] == started["clientSecret"]
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert intent["amount"] == 2500 and intent["payment_method_types"] == ["card"]
    assert set(intent["metadata"]) >= {"holdId", "raceId", "eventId", "email", "registrationId"}

    pending = confirm(api, hold_id)  # the browser has not paid: its word is not taken for it
    assert (pending.status_code, pending.json()["error"]) == (409, "PAYMENT_PENDING")
    assert browser_pays(stack, intent["id"], "pm_card_chargeDeclined")["status"] == "requires_payment_method"
    declined = confirm(api, hold_id)
    assert (declined.status_code, declined.json()["error"]) == (402, "PAYMENT_DECLINED")
    assert backend.holds().get(hold_id).status == "PAYING"  # the place stays held
    assert browser_pays(stack, intent["id"])["status"] == "succeeded"
    done = confirm(api, hold_id)
    assert done.status_code == 202, done.text
    wait_confirmed(api, [started["registrationId"]])
    assert confirm(api, hold_id).status_code == 202  # a repeat changes nothing
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (1, 1, 0)


def _email_of(backend: Any, hold_id: str) -> str:
    return str(backend.holds().get(hold_id).attempt.email)


def test_a_tab_closed_right_after_paying_is_registered_by_the_webhook_with_its_email(api, backend, stack):
    race_id = backend.create_race([3])
    email = f"closed-tab-{uuid.uuid4().hex[:6]}@example.com"
    hold_id, started = _details(api, race_id, email)
    (intent,) = intents_for(stack, hold_id=hold_id)
    browser_pays(stack, intent["id"])  # ...and the tab is gone: nobody calls confirm

    confirmed = wait_confirmed(api, [started["registrationId"]], timeout=60)
    assert confirmed[started["registrationId"]]["bib"] == 1
    wait_until(lambda: _mail(stack, "confirmation", email), timeout=60)
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()


def test_twelve_concurrent_confirms_make_one_registration_from_one_charge(api, backend, stack):
    race_id = backend.create_race([3])
    hold_id, started = _details(api, race_id)
    (intent,) = intents_for(stack, hold_id=hold_id)
    webhooks(stack, paused=True)  # the confirms, not the webhook, decide this one
    try:
        browser_pays(stack, intent["id"])
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda _: confirm(api, hold_id), range(12)))
    finally:
        webhooks(stack, paused=False)
    assert {r.status_code for r in answers} <= {202, 429}, [r.text for r in answers]
    assert any(r.status_code == 202 for r in answers)
    wait_confirmed(api, [started["registrationId"]])
    assert len(intents_for(stack, hold_id=hold_id)) == 1
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded) == (1, 1)


def test_an_unpaid_intent_is_cancelled_at_expiry_before_the_place_is_freed(api, backend, stack):
    race_id = backend.create_race([1])
    hold_id, _ = _details(api, race_id)
    assert _taken(backend, race_id, api) == 1
    _expire(backend, hold_id)

    wait_until(lambda: backend.holds().get(hold_id).status == "EXPIRED", timeout=30)
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert intent["status"] == "canceled"  # no browser can charge it any more
    assert _taken(backend, race_id, api) == 0
    late = browser_pays(stack, intent["id"])
    assert late["status"] == "canceled"


def _event(kind: str, obj: dict[str, Any]) -> bytes:
    body = {"id": f"evt_forged_{uuid.uuid4().hex[:10]}", "object": "event", "type": kind, "created": int(time.time())}
    return json.dumps({**body, "data": {"object": obj}, "api_version": "2024-06-20", "livemode": False}).encode()


def test_webhooks_with_a_bad_missing_or_old_signature_are_400_and_change_nothing(api, backend, stack):
    race_id = backend.create_race([3])
    hold_id, started = _details(api, race_id)
    (intent,) = intents_for(stack, hold_id=hold_id)
    payload = _event("payment_intent.succeeded", {**intent, "status": "succeeded"})
    headers = {"Content-Type": "application/json"}
    secret = Keys().webhook_secret
    tries = {
        "missing": {},
        "wrong secret": {"Stripe-Signature": sign(payload, "whsec_not_ours")},
        "replayed, old": {"Stripe-Signature": sign(payload, secret, timestamp=int(time.time()) - 3600)},
        "tampered": {"Stripe-Signature": sign(payload.replace(b"2500", b"1"), secret)},
    }
    for name, extra in tries.items():
        resp = api.post("/api/payments/webhook", data=payload, headers=headers | extra)
        assert resp.status_code == 400, (name, resp.text)
        assert resp.json()["error"] == "INVALID_SIGNATURE", name
    assert backend.holds().get(hold_id).status == "PAYING"
    assert backend.registrations().get(started["registrationId"]) is None
    # A late delivery, freshly signed (Stripe retries for days, signing each attempt anew), is
    # valid: the tolerance is on the signature's timestamp, not the event's.
    late = _event("payment_intent.payment_failed", {**intent, "created": int(time.time()) - 86400})
    resp = api.post("/api/payments/webhook", data=late, headers=headers | {"Stripe-Signature": sign(late, secret)})
    assert resp.status_code == 200, resp.text
    assert backend.holds().get(hold_id).status == "PAYING"


def test_duplicated_and_reordered_events_change_nothing_twice(api, backend, stack):
    race_id = backend.create_race([5])
    webhooks(stack, paused=True, duplicate=2, reorder=True)
    rids = []
    try:
        for _ in range(3):
            hold_id, started = _details(api, race_id)
            (intent,) = intents_for(stack, hold_id=hold_id)
            browser_pays(stack, intent["id"], "pm_card_chargeDeclined")
            browser_pays(stack, intent["id"])
            rids.append(started["registrationId"])
    finally:
        webhooks(stack, paused=False)  # the backlog arrives three times over, newest first
    wait_confirmed(api, rids, timeout=60)
    wait_until(lambda: webhooks(stack)["pending"] == 0, timeout=60)
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds, report.emails_sent) == (3, 3, 0, 3)
    webhooks(stack, duplicate=0, reorder=False)


def test_a_payment_for_a_hold_that_no_longer_exists_is_refunded_once_with_an_email(api, backend, stack):
    race_id = backend.create_race([3])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    assert api.delete(f"/api/holds/{hold_id}").status_code == 204
    email = f"orphan-{uuid.uuid4().hex[:6]}@example.com"
    # Planted at the provider: an anomaly the design makes impossible, money involved all the same.
    planted = standin(stack).post(
        f"{stack.stripe_url}/v1/payment_intents",
        data={
            "amount": "2500",
            "currency": "usd",
            "payment_method": "pm_card_visa",
            "confirm": "true",
            "metadata[holdId]": hold_id,
            "metadata[raceId]": race_id,
            "metadata[eventId]": event_id,
            "metadata[email]": email,
            "metadata[registrationId]": "reg_" + hold_id.removeprefix("hold_"),
        },
    )
    assert planted.status_code == 200, planted.text

    wait_until(lambda: _mail(stack, "unmatched_refund", email), timeout=60)
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (0, 1, 1)
    assert backend.holds().get(hold_id).status == "RELEASED"


def test_an_outside_refund_cancels_and_a_dispute_is_flagged_for_the_director(api, backend, stack):
    race_id = backend.create_race([2])
    rids, intents = [], []
    for _ in range(2):
        hold_id, started = _details(api, race_id)
        (intent,) = intents_for(stack, hold_id=hold_id)
        browser_pays(stack, intent["id"])
        assert confirm(api, hold_id).status_code == 202
        rids.append(started["registrationId"])
        intents.append(intent["id"])
    wait_confirmed(api, rids)
    assert _taken(backend, race_id, api) == 2

    control = standin(stack)
    assert control.post(f"{stack.stripe_url}/_standin/refund", json={"payment_intent": intents[0]}).ok
    assert control.post(f"{stack.stripe_url}/_standin/dispute", json={"payment_intent": intents[1]}).ok

    wait_until(lambda: backend.registrations().get(rids[0]).status == "CANCELLED", timeout=60)
    wait_until(lambda: backend.registrations().get(rids[1]).disputeId, timeout=60)
    assert _taken(backend, race_id, api) == 1  # the refunded place is back in the pool
    assert backend.registrations().get(rids[1]).status == "CONFIRMED"
    entries = [e for e in _audit_entries(backend, race_id) if e.get("target") == rids[0]]
    assert sorted((e["action"], e["actor"]["kind"], e["actor"]["id"]) for e in entries) == [
        ("registration.cancel", "provider", "payment-provider"),
        ("registration.refund.outside", "provider", "payment-provider"),
    ]
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert report.refunds == 1


def _audit_entries(backend: Any, race_id: str) -> list[dict[str, Any]]:
    from racecap.aws.items import query_all

    return list(
        query_all(
            backend.dynamodb,
            TableName=backend.table("Audit"),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=values({":pk": f"RACE#{race_id}"}),
        )
    )


def test_the_providers_rate_limit_is_a_429_with_retry_after_and_the_place_is_kept(api, backend, stack):
    race_id = backend.create_race([5])
    (event_id,) = event_ids(api, race_id)
    holds = [hold(api, race_id, event_id).json()["holdId"] for _ in range(4)]
    bodies = {h: runner() for h in holds}
    control = standin(stack)
    control.post(f"{stack.stripe_url}/_standin/ratelimit", json={"per_second": 0.2})
    try:
        answers = [api.post(f"/api/holds/{h}/registration", json=bodies[h]) for h in holds]
    finally:
        control.post(f"{stack.stripe_url}/_standin/ratelimit", json={"per_second": 25})
    limited = [r for r in answers if r.status_code == 429]
    assert limited, [r.status_code for r in answers]
    for r in limited:
        assert r.json()["error"] == "TOO_MANY_REQUESTS" and int(r.headers["Retry-After"]) >= 1
    assert _taken(backend, race_id, api) == 4  # every place is still held
    finished = [register(api, h, bodies[h]) for h, r in zip(holds, answers, strict=True) if r.status_code != 202]
    assert all(r.status_code == 202 for r in finished), [r.text for r in finished]


def test_a_crash_between_the_payment_and_its_queueing_is_caught_by_reconciliation(api, backend, stack):
    """Paid, then nothing: no confirm call (the API crashed), no webhook (not delivered). The
    scheduled reconciliation finds the succeeded payment at the provider and queues it."""
    race_id = backend.create_race([3])
    webhooks(stack, paused=True)
    try:
        hold_id, started = _details(api, race_id)
        (intent,) = intents_for(stack, hold_id=hold_id)
        browser_pays(stack, intent["id"])
        confirmed = wait_confirmed(api, [started["registrationId"]], timeout=60)
    finally:
        webhooks(stack, paused=False)
    assert confirmed[started["registrationId"]]["bib"] == 1
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (1, 1, 0)
