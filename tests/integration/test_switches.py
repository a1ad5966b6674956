"""A runner switches to another event of the race, on the real stack (issue 41): a cheaper event's
difference refunded to the card that paid, a dearer one's paid as an upgrade (declined first:
nothing changes), a sold-out target refused with nothing changed, an upgrade paid for a switch
that lost its registration refunded once; bibs stay 1..N per event, stock and places follow, and
the audit's books balance throughout."""

from __future__ import annotations

import csv
import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import browser_pays, hold_and_register, runner, wait_confirmed, wait_for_audit
from .test_own_entry import HEADER, _day, _link_token, _mail, _refunds_at_provider

pytestmark = pytest.mark.integration

PRICES = (4500, 6000, 2500)  # the 10K, the half (dearer), the 5K (cheaper)


def _race(director: Any, api: requests.Session, caps: tuple[int, ...], who: str) -> tuple[str, list[str], Any]:
    kim = director(who)
    body = race_body(caps)
    for event, price in zip(body["events"], PRICES, strict=False):
        event["priceCents"] = price
    race = kim.post("/api/admin/races", json=body).json()
    rid, eids = race["raceId"], [e["eventId"] for e in race["events"]]
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "switchesUntil": _day(20)}
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy}).status_code == 200
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    return rid, eids, kim


def _entry(api: requests.Session, stack: LocalStack, rid: str, eid: str, email: str) -> tuple[str, dict[str, str]]:
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    return reg_id, {HEADER: _link_token(stack, email)}


def _events(kim: Any, rid: str) -> dict[str, dict[str, Any]]:
    return {e["eventId"]: e for e in kim.get(f"/api/admin/races/{rid}/stats").json()["events"]}


def test_a_switch_to_a_cheaper_event_refunds_the_difference_and_a_dearer_one_is_paid_first(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, (ten, half, five), kim = _race(director, api, (5, 1, 5), "kim-switch")
    tag = rid[-6:].lower()
    ada, grace, bob = (f"{n}.{tag}@example.com" for n in ("ada", "grace", "bob"))
    ada_id, ada_me = _entry(api, stack, rid, ten, ada)

    quote = api.get("/api/my/registration/switch", headers=ada_me).json()
    assert (quote["allowed"], quote["currentEventId"], quote["until"]) == (True, ten, _day(20))
    offered = {t["eventId"]: (t["payCents"], t["refundCents"], t["available"]) for t in quote["targets"]}
    assert offered == {half: (1500, 0, True), five: (0, 2000, True)}

    # Not an event of this race: a 400 naming the field, nothing held.
    bad = api.post("/api/my/registration/switch", headers=ada_me, json={"eventId": "nope"})
    assert (bad.status_code, bad.json()["error"]) == (400, "VALIDATION_ERROR"), bad.text

    # Cheaper: moved at once, a new bib in the 5K, 20.00 back to the card that paid.
    done = api.post("/api/my/registration/switch", headers=ada_me, json={"eventId": five})
    assert done.status_code == 200, done.text
    answer = done.json()
    assert (answer["status"], answer["eventId"], answer["bib"], answer["refundCents"]) == ("SWITCHED", five, 1, 2000)
    again = api.post("/api/my/registration/switch", headers=ada_me, json={"eventId": five})
    assert (again.status_code, again.json()["status"]) == (200, "SWITCHED")  # a second click: nothing more
    reg = backend.registrations().get(ada_id)
    assert (reg.eventId, reg.bib, reg.switches, reg.pendingSwitch) == (five, 1, 1, None)
    refunds = wait_until(lambda: [r for r in _refunds_at_provider(stack, reg.chargeId) if r["status"] == "succeeded"])
    assert [int(r["amount"]) for r in refunds] == [2000]
    assert wait_until(lambda: _mail(stack, ada, "switch-confirmed"), timeout=45)
    mine = api.get("/api/my/registration", headers=ada_me).json()  # the same link opens it in its new event
    assert (mine["eventId"], mine["bib"]) == (five, 1)

    # Dearer, for Grace: a declined card changes nothing; then paid, she is moved with bib 1 there.
    grace_id, grace_me = _entry(api, stack, rid, ten, grace)
    declined = api.post(
        "/api/my/registration/switch", headers=grace_me,
        json={"eventId": half, "paymentMethod": "pm_card_chargeDeclined"},
    )  # fmt: skip
    assert (declined.status_code, declined.json()["error"]) == (402, "PAYMENT_DECLINED"), declined.text
    assert backend.registrations().get(grace_id).eventId == ten
    paid = api.post(
        "/api/my/registration/switch", headers=grace_me, json={"eventId": half, "paymentMethod": "pm_card_visa"}
    )
    assert paid.status_code == 200, paid.text
    assert (paid.json()["status"], paid.json()["bib"]) == ("SWITCHED", 1)
    ledger = kim.get(f"/api/admin/races/{rid}/registrations/{grace_id}").json()["ledger"]
    assert sorted(e["amountCents"] for e in ledger["entries"] if e["kind"] == "payment") == [1500, 4500]

    # The half (1 place) is full now: Bob's switch is refused and he stays where he was.
    bob_id, bob_me = _entry(api, stack, rid, ten, bob)
    full = api.post(
        "/api/my/registration/switch", headers=bob_me, json={"eventId": half, "paymentMethod": "pm_card_visa"}
    )
    assert (full.status_code, full.json()["error"]) == (409, "SOLD_OUT"), full.text
    assert backend.registrations().get(bob_id).eventId == ten

    # The 10K gave two places back and kept its bibs (the records of the entries that left).
    events = _events(kim, rid)
    assert (events[ten]["confirmed"], events[ten]["switchedOut"]) == (1, 2)
    assert (events[half]["switchedIn"], events[five]["switchedIn"]) == (1, 1)
    export = kim.get(f"/api/admin/races/{rid}/registrations/export?includeCancelled=true").text
    rows = list(csv.DictReader(io.StringIO(export)))
    left = sorted((r["bib"], r["status"], r["switchedTo"]) for r in rows if r["event"] == "Event 0")
    assert left == [("1", "SWITCHED", ada_id), ("2", "SWITCHED", grace_id), ("3", "CONFIRMED", "")]
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    trail = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    switched = [(e["target"], e["actor"]["kind"]) for e in trail if e["action"] == "registration.switched"]
    assert sorted(switched) == sorted([(ada_id, "runner"), (grace_id, "runner")])


def test_an_upgrade_paid_for_a_switch_whose_registration_was_cancelled_meanwhile_is_refunded_once(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, (ten, half), _ = _race(director, api, (5, 5), "kim-switch-lost")
    email = f"lost.{rid[-6:].lower()}@example.com"
    reg_id, me = _entry(api, stack, rid, ten, email)
    begun = api.post("/api/my/registration/switch", headers=me, json={"eventId": half})
    assert begun.status_code == 200, begun.text
    assert (begun.json()["status"], begun.json()["amountCents"]) == ("PAYMENT_REQUIRED", 1500)
    intent_id = begun.json()["clientSecret"].split("_secret_")[0]

    # The runner cancels (all back), then the browser's payment of the difference goes through.
    quote = api.get("/api/my/registration/cancellation", headers=me).json()
    cancelled = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": quote["amountCents"]})
    assert cancelled.status_code == 200, cancelled.text
    assert browser_pays(stack, intent_id)["status"] == "succeeded"
    lost = api.post("/api/my/registration/switch/confirm", headers=me)
    assert lost.status_code in (401, 409), lost.text  # cancelled: the switch is gone, its upgrade refunded
    back = wait_until(lambda: [r for r in _refunds_at_provider(stack, intent_id) if r["status"] == "succeeded"])
    assert [int(r["amount"]) for r in back] == [1500]
    reg = backend.registrations().get(reg_id)
    assert reg.eventId == ten and reg.status in ("CANCELLING", "CANCELLED")
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_switches_raced_against_the_runners_own_cancellation_leave_the_books_balanced(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    """Each pair: the switch (to a cheaper event: no payment) and the cancellation, at once. Either
    order is a legitimate outcome, never both half-done: a cancelled switched entry freed its new
    event's place, a switch never moved a cancelled one, and the audit's accounts hold."""
    rid, (ten, _, five), _ = _race(director, api, (10, 1, 10), "kim-switch-race")
    tag = rid[-6:].lower()
    entries = [_entry(api, stack, rid, ten, f"racer{i}.{tag}@example.com") for i in range(5)]

    def cancel(me: dict[str, str]) -> requests.Response:
        quote = api.get("/api/my/registration/cancellation", headers=me)
        if quote.status_code != 200:
            return quote
        return api.post(
            "/api/my/registration/cancellation", headers=me, json={"amountCents": quote.json()["amountCents"]}
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        races = [(pool.submit(cancel, me), pool.submit(api.post, "/api/my/registration/switch", headers=me,
                                                        json={"eventId": five})) for _, me in entries]  # fmt: skip
        outcomes = [(c.result(), s.result()) for c, s in races]
    for (cancelled, switched), (reg_id, _) in zip(outcomes, entries, strict=True):
        reg = backend.registrations().get(reg_id)
        assert cancelled.status_code == 200 or switched.status_code == 200, (cancelled.text, switched.text)
        if switched.status_code == 200:
            assert reg.eventId == five and reg.switches == 1
        else:
            assert reg.eventId == ten and not reg.switches, switched.text
            assert switched.status_code in (403, 409), switched.text
        if cancelled.status_code == 200:
            assert reg.status in ("CANCELLING", "CANCELLED")
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_switch_and_a_transfer_of_one_entry_never_overlap_and_a_paid_switch_finishes_without_its_page(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    """While a switch waits for its payment no offer can go out, and while an offer is out no switch
    begins (one of them goes first, never both half-way). A runner who paid the difference and
    closed the tab is moved by the provider's webhook, with no call from the page."""
    rid, (ten, half), kim = _race(director, api, (5, 5), "kim-switch-transfer")
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": {
        "runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "switchesUntil": _day(20),
        "transfersUntil": _day(20)}}).status_code == 200  # fmt: skip
    tag = rid[-6:].lower()
    ada = f"ada.{tag}@example.com"
    reg_id, me = _entry(api, stack, rid, ten, ada)
    begun = api.post("/api/my/registration/switch", headers=me, json={"eventId": half})
    assert begun.json()["status"] == "PAYMENT_REQUIRED", begun.text
    blocked = api.post("/api/my/registration/transfer", headers=me, json={"email": f"friend.{tag}@example.com"})
    assert (blocked.status_code, blocked.json()["error"]) == (403, "TRANSFER_NOT_ALLOWED"), blocked.text
    assert api.delete("/api/my/registration/switch", headers=me).json()["pendingEventId"] is None
    assert api.post("/api/my/registration/transfer", headers=me, json={"email": f"friend.{tag}@example.com"}).ok
    refused = api.post("/api/my/registration/switch", headers=me, json={"eventId": half})
    assert (refused.status_code, refused.json()["error"]) == (403, "SWITCH_NOT_ALLOWED"), refused.text
    assert api.delete("/api/my/registration/transfer", headers=me).ok

    # Paid in the browser, the page closed before its confirm call: the webhook moves the runner.
    again = api.post("/api/my/registration/switch", headers=me, json={"eventId": half})
    intent_id = again.json()["clientSecret"].split("_secret_")[0]
    assert browser_pays(stack, intent_id)["status"] == "succeeded"
    moved = wait_until(lambda: backend.registrations().get(reg_id).eventId == half, timeout=60)
    assert moved, "the webhook did not move the paid switch"
    late = api.post("/api/my/registration/switch/confirm", headers=me)  # the page comes back: the answer stands
    assert (late.status_code, late.json()["status"], late.json()["eventId"]) == (200, "SWITCHED", half), late.text
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    assert _events(kim, rid)[half]["switchedIn"] == 1


def _expire(backend: Any, hold_id: str) -> None:
    """The switch's hold ran out while nobody was looking (the sweeper's index says so too)."""
    from datetime import UTC, datetime, timedelta

    from racecap.aws.items import to_item, values

    long_ago = (datetime.now(UTC) - timedelta(minutes=15)).isoformat()
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
        UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
        ExpressionAttributeValues=values({":t": long_ago}),
    )


def test_the_sweeper_moves_a_paid_switch_whose_webhook_was_lost_and_frees_an_unpaid_ones_place(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    from .flows import webhooks

    rid, (ten, half), kim = _race(director, api, (5, 1), "kim-switch-sweeper")
    tag = rid[-6:].lower()
    paid_id, paid_me = _entry(api, stack, rid, ten, f"paid.{tag}@example.com")
    idle_id, idle_me = _entry(api, stack, rid, ten, f"idle.{tag}@example.com")

    # One runner holds the half's only place and walks away: at expiry it goes back.
    idle = api.post("/api/my/registration/switch", headers=idle_me, json={"eventId": half})
    assert idle.json()["status"] == "PAYMENT_REQUIRED", idle.text
    idle_hold = backend.registrations().get(idle_id).pendingSwitch["holdId"]
    full = api.get("/api/my/registration/switch", headers=paid_me).json()
    assert [t["eventId"] for t in full["targets"]] == [half]
    _expire(backend, idle_hold)
    assert wait_until(lambda: backend.holds().get(idle_hold).status == "EXPIRED", timeout=60)
    assert backend.registrations().get(idle_id).eventId == ten

    # The other pays in the browser with the webhooks down: the sweeper finds it paid and moves them.
    begun = api.post("/api/my/registration/switch", headers=paid_me, json={"eventId": half})
    assert begun.json()["status"] == "PAYMENT_REQUIRED", begun.text
    hold_id = backend.registrations().get(paid_id).pendingSwitch["holdId"]
    webhooks(stack, paused=True)
    try:
        assert browser_pays(stack, begun.json()["clientSecret"].split("_secret_")[0])["status"] == "succeeded"
        _expire(backend, hold_id)
        assert wait_until(lambda: backend.registrations().get(paid_id).eventId == half, timeout=60)
    finally:
        webhooks(stack, paused=False)
    assert backend.holds().get(hold_id).status == "CONFIRMED"
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    assert _events(kim, rid)[half]["switchedIn"] == 1
