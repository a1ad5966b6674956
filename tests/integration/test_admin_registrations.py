"""A director's view of the runners: live stats, the searchable list, and cancel + refund
(the place goes back, the runner is refunded once and told once, however often it is asked)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from local.stack import LocalStack

from .admin import wait_until
from .flows import (
    hold,
    hold_and_register,
    intents_for,
    register,
    runner,
    standin,
    wait_confirmed,
    wait_for_audit,
)

pytestmark = pytest.mark.integration

RUNNERS = [("Grace", "Hopper"), ("Alan", "Turing"), ("Ada", "Lovelace"), ("Katherine", "Johnson")]


@pytest.fixture
def race_with_runners(director: Any, api: requests.Session) -> dict[str, Any]:
    """A race with 4 confirmed registrations (through the real queue and writer) and 2 live holds."""
    kim = director("kim")
    race = kim.create_race((20,))
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    regs = {}
    for first, last in RUNNERS:
        body = runner(f"{first.lower()}.{last.lower()}.{rid[-6:].lower()}@example.com") | {
            "firstName": first,
            "lastName": last,
        }
        regs[last] = {"body": body, "id": hold_and_register(api, rid, eid, body)[1]}
    confirmed = wait_confirmed(api, [r["id"] for r in regs.values()])
    for r in regs.values():
        r["bib"] = confirmed[r["id"]]["bib"]
    holds = [hold(api, rid, eid).json()["holdId"] for _ in range(2)]
    return {"director": kim, "raceId": rid, "eventId": eid, "regs": regs, "holds": holds}


def test_live_stats_count_held_queued_confirmed_and_registrations_per_minute(race_with_runners: dict[str, Any]) -> None:
    kim, rid = race_with_runners["director"], race_with_runners["raceId"]
    stats = kim.get(f"/api/admin/races/{rid}/stats", params={"minutes": 5}).json()
    (event,) = stats["events"]
    assert (event["cap"], event["held"], event["queued"], event["confirmed"], event["placesLeft"]) == (20, 2, 0, 4, 14)
    assert event["revenueCents"] == 4 * 3000
    assert len(event["perMinute"]) == 5
    assert sum(m["confirmed"] for m in event["perMinute"]) == 4
    assert event["perMinute"][-1]["minute"] >= event["perMinute"][0]["minute"]
    assert stats["totals"]["confirmed"] == 4


def test_search_by_name_email_or_bib_and_page_through(race_with_runners: dict[str, Any]) -> None:
    kim, rid, regs = race_with_runners["director"], race_with_runners["raceId"], race_with_runners["regs"]
    url = f"/api/admin/races/{rid}/registrations"

    def names(**params: Any) -> list[str]:
        return [r["lastName"] for r in kim.get(url, params=params).json()["registrations"]]

    assert sorted(names()) == sorted(last for _, last in RUNNERS)
    assert names(q="TURING") == ["Turing"]  # case-insensitive
    assert names(q="grace hop") == ["Hopper"]  # every word must match
    assert names(q=regs["Lovelace"]["body"]["email"].upper()) == ["Lovelace"]  # a whole email: exact lookup
    assert names(q=str(regs["Johnson"]["bib"])) == ["Johnson"]  # a number: the bib
    assert names(q="nobody-like-this") == []

    first = kim.get(url, params={"limit": 3}).json()
    assert len(first["registrations"]) == 3 and first["nextCursor"]
    rest = kim.get(url, params={"limit": 3, "cursor": first["nextCursor"]}).json()
    bibs = [r["bib"] for r in first["registrations"] + rest["registrations"]]
    assert bibs == sorted(bibs) and len(set(bibs)) == 4
    assert kim.get(url, params={"cursor": "%%%"}).status_code == 400


def test_cancel_refunds_once_returns_the_place_and_tells_the_runner_once(
    race_with_runners: dict[str, Any], api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim, rid, eid = race_with_runners["director"], race_with_runners["raceId"], race_with_runners["eventId"]
    reg = race_with_runners["regs"]["Turing"]
    refunds_before = standin(stack).get(f"{stack.stripe_url}/_standin/stats").json()["refunds"]
    url = f"/api/admin/races/{rid}/registrations/{reg['id']}/cancel"

    # Two directors' tabs click at once, then a third click later.
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: kim.post(url, json={"reason": "injured"}), range(2)))
    assert [r.status_code for r in both] == [200, 200], [r.text for r in both]
    assert sorted(r.json()["changed"] for r in both) in ([False, True], [True, True])
    again = kim.post(url)
    assert again.status_code == 200 and again.json()["changed"] is False
    assert {r.json()["refundId"] for r in [*both, again]} == {again.json()["refundId"]}

    # One refund at the provider, of the whole charge.
    assert standin(stack).get(f"{stack.stripe_url}/_standin/stats").json()["refunds"] == refunds_before + 1
    (intent,) = intents_for(stack, hold_id="hold_" + reg["id"].removeprefix("reg_"))
    refund = standin(stack).get(f"{stack.stripe_url}/v1/refunds/{again.json()['refundId']}").json()
    assert (refund["payment_intent"], refund["amount"]) == (intent["id"], 3000)

    # The place is back, the counters moved, and the list shows the cancellation.
    (event,) = kim.get(f"/api/admin/races/{rid}/stats").json()["events"]
    assert (event["confirmed"], event["cancelled"], event["placesLeft"], event["refundedCents"]) == (3, 1, 15, 3000)
    cancelled = kim.get(f"/api/admin/races/{rid}/registrations", params={"status": "CANCELLED"}).json()
    assert [(r["lastName"], r["status"]) for r in cancelled["registrations"]] == [("Turing", "CANCELLED")]

    # One refund email, however many times it was asked for.
    def refund_mails() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if m["tags"].get("kind") == "refund" and m["tags"].get("registrationId") == reg["id"]]

    wait_until(refund_mails, timeout=30)
    time.sleep(2)  # the duplicates have been enqueued too: give the sender time to (not) send them
    (mail,) = refund_mails()
    assert mail["to"] == [reg["body"]["email"]]

    # The email's claim was released: the runner may register again.
    h = hold(api, rid, eid)
    assert h.status_code == 201
    again_reg = register(api, h.json()["holdId"], reg["body"] | {"paymentMethod": "pm_card_visa"})
    assert again_reg.status_code == 202, again_reg.text

    # Every non-negotiable still holds for the race: bibs, places, charges, emails, DLQs.
    wait_confirmed(api, [again_reg.json()["registrationId"]])
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.summary()

    # Who did it, and why, is on record.
    entry = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"][0]
    assert (entry["action"], entry["target"], entry["details"]["reason"]) == (
        "registration.cancel",
        reg["id"],
        "injured",
    )


def test_cancelling_an_unknown_or_foreign_registration_is_not_found(
    race_with_runners: dict[str, Any], director: Any
) -> None:
    kim, rid = race_with_runners["director"], race_with_runners["raceId"]
    assert kim.post(f"/api/admin/races/{rid}/registrations/reg_nope/cancel").status_code == 404
    other = director("kim").create_race((5,))
    reg_id = race_with_runners["regs"]["Hopper"]["id"]
    # A real registration, addressed through another race of the same director
    assert kim.post(f"/api/admin/races/{other['raceId']}/registrations/{reg_id}/cancel").status_code == 404
    assert (
        kim.get(f"/api/admin/races/{rid}/registrations", params={"q": "Hopper"}).json()["registrations"][0]["status"]
        == "CONFIRMED"
    )
