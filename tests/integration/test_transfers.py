"""A runner hands their place to someone else, on the real stack (issue 41): offered from the
runner's link, accepted from the link emailed to the new runner, moved in one write (the email
claim, the runner's details replaced on the registration and the hold, the bib kept, options with
stock swapped); a transfer raced against the runner's own cancellation: exactly one wins; a fee
paid for a transfer that lost is refunded, once, and the books still balance."""

from __future__ import annotations

import csv
import io
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from racecap.aws.items import from_item
from racecap.aws.keys import hold_key

from local.stack import LocalStack

from .admin import stock_taken, wait_until
from .flows import browser_pays, hold_and_register, runner, wait_confirmed, wait_for_audit
from .test_own_entry import HEADER, _day, _link_token, _mail, _race, _refunds_at_provider

pytestmark = pytest.mark.integration


def _offer_token(stack: LocalStack, to: str) -> str:
    found = wait_until(lambda: _mail(stack, to, "transfer-offer"), timeout=45)
    (token,) = set(re.findall(r"https?://\S+/#/transfer/(\S+)", found[0]["text"]))
    assert token.startswith("trf.")
    return str(token)


def _new_runner(token: str, **extra: Any) -> dict[str, Any]:
    return {"token": token, "firstName": "Grace", "lastName": "Hopper", "dateOfBirth": "1992-12-09", **extra}


def _hold(backend: Any, hold_id: str) -> dict[str, Any]:
    resp = backend.dynamodb.get_item(TableName=backend.table("Inventory"), Key=hold_key(hold_id), ConsistentRead=True)
    return from_item(resp["Item"])


def test_a_place_handed_over_keeps_its_bib_replaces_the_runner_everywhere_and_swaps_the_shirt(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "transfersUntil": _day(20)}
    sizes = [{"id": "M", "label": "Medium", "quantity": 1}, {"id": "L", "label": "Large"}]
    rid, eid, kim = _race(director, api, 3000, policy, who="kim-transfer", sizes=sizes)
    tag = rid[-6:].lower()
    ada, grace = f"ada.{tag}@example.com", f"grace.{tag}@example.com"
    hold_id, reg_id = hold_and_register(api, rid, eid, runner(ada) | {"answers": {"shirt": "M"}})
    bib = wait_confirmed(api, [reg_id])[reg_id]["bib"]
    me = {HEADER: _link_token(stack, ada)}
    view = api.get("/api/my/registration", headers=me).json()
    assert [a["action"] for a in view["actions"]] == ["cancel", "transfer"]
    quote = api.get("/api/my/registration/transfer", headers=me).json()
    assert (quote["allowed"], quote["feeCents"], quote["until"], quote["pendingTo"]) == (True, 0, _day(20), None)

    # Its own address is no one to hand it to; a first offer is withdrawn, its link stops working.
    own = api.post("/api/my/registration/transfer", headers=me, json={"email": ada})
    assert (own.status_code, own.json()["error"]) == (409, "CONFLICT"), own.text
    first = f"first.{tag}@example.com"
    assert api.post("/api/my/registration/transfer", headers=me, json={"email": first}).status_code == 202
    withdrawn_token = _offer_token(stack, first)
    assert api.get("/api/my/registration/transfer", headers=me).json()["pendingTo"] == f"f***@{first.split('@')[1]}"
    assert api.delete("/api/my/registration/transfer", headers=me).json()["pendingTo"] is None
    gone = api.post("/api/transfers/offer", json={"token": withdrawn_token})
    assert (gone.status_code, gone.json()["error"]) == (409, "OFFER_GONE"), gone.text

    offered = api.post("/api/my/registration/transfer", headers=me, json={"email": grace})
    assert offered.status_code == 202, offered.text
    token = _offer_token(stack, grace)
    assert token != withdrawn_token
    seen = api.post("/api/transfers/offer", json={"token": token}).json()
    assert (seen["email"], seen["fromFirstName"], seen["feeCents"], seen["eventId"]) == (grace, "Ada", 0, eid)

    # The event's questions are asked as at registration: an answer not offered is a 400 naming it.
    missing = api.post("/api/transfers/accept", json=_new_runner(token, answers={"shirt": "XL"}))
    assert (missing.status_code, missing.json()["error"]) == (400, "VALIDATION_ERROR"), missing.text
    assert "answers.shirt" in missing.json()["fields"]
    assert api.get("/api/my/registration", headers=me).status_code == 200  # nothing moved

    done = api.post("/api/transfers/accept", json=_new_runner(token, answers={"shirt": "L"}))
    assert done.status_code == 200, done.text
    answer = done.json()
    assert (answer["status"], answer["registrationId"], answer["bib"]) == ("TRANSFERRED", reg_id, bib)
    again = api.post("/api/transfers/accept", json=_new_runner(token, answers={"shirt": "L"}))
    assert (again.status_code, again.json().get("status")) == (200, "TRANSFERRED"), again.text  # a second click

    # The registration is Grace's, with Ada's link revoked and Grace's working.
    revoked = api.get("/api/my/registration", headers=me)
    assert (revoked.status_code, revoked.json()["error"]) == (401, "LINK_REVOKED")
    hers = api.get("/api/my/registration", headers={HEADER: answer["linkToken"]}).json()
    assert (hers["firstName"], hers["lastName"], hers["email"], hers["bib"]) == ("Grace", "Hopper", grace, bib)
    reg = backend.registrations().get(reg_id)
    assert (reg.email, reg.dateOfBirth, reg.transfers, reg.transferOffer) == (grace, "1992-12-09", 1, None)
    attempt = _hold(backend, hold_id)["attempt"]
    assert (attempt["email"], attempt["firstName"], attempt["dateOfBirth"]) == (grace, "Grace", "1992-12-09")
    assert attempt["stock"] == [] and stock_taken(kim, rid, eid)["M"] == 0  # Medium went back with Ada's answers
    assert wait_until(lambda: _mail(stack, grace, "transfer-confirmed"), timeout=45)
    assert wait_until(lambda: _mail(stack, ada, "transferred-away"), timeout=45)

    # Nothing of Ada is left in the tables (the registration, the hold's attempt, the claim).
    assert not _anywhere(backend, ada)
    stats = kim.get(f"/api/admin/races/{rid}/stats").json()
    assert stats["events"][0]["transfers"] == 1 and stats["totals"]["transfers"] == 1
    export = kim.get(f"/api/admin/races/{rid}/registrations/export").text
    (row,) = [r for r in csv.DictReader(io.StringIO(export)) if r["registrationId"] == reg_id]
    assert (row["email"], row["transfers"], row["bib"]) == (grace, "1", str(bib)) and row["transferredAt"]

    # One registration per email: Grace cannot register again; Ada's claim is free.
    taken = hold_and_register_status(api, rid, eid, runner(grace))
    assert taken == 409
    _, third = hold_and_register(api, rid, eid, runner(ada) | {"answers": {"shirt": "M"}})
    wait_confirmed(api, [third])
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    trail = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    moved = [e for e in trail if e["action"] == "registration.transferred"]
    assert [(e["target"], e["actor"]["kind"]) for e in moved] == [(reg_id, "runner")]
    assert not any(ada in str(e) or grace in str(e) for e in trail)  # no address in the trail


def _anywhere(backend: Any, text: str) -> list[str]:
    """The keys of every item of the Registrations and Inventory tables that mention ``text``."""
    found = []
    for table in ("Registrations", "Inventory"):
        pages = backend.dynamodb.get_paginator("scan").paginate(TableName=backend.table(table))
        found += [str(item["pk"]) for page in pages for item in page["Items"] if text in str(item)]
    return found


def hold_and_register_status(api: requests.Session, race_id: str, event_id: str, body: dict[str, Any]) -> int:
    from .flows import hold, register

    held = hold(api, race_id, event_id)
    assert held.status_code == 201, held.text
    return register(api, held.json()["holdId"], body).status_code


def test_transfers_raced_against_the_runners_own_cancellation_exactly_one_wins_each_time(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "transfersUntil": _day(20)}
    rid, eid, _ = _race(director, api, 2500, policy, (20,), who="kim-transfer-race")
    tag = rid[-6:].lower()
    entries = []
    for i in range(6):
        email = f"racer{i}.{tag}@example.com"
        _, reg_id = hold_and_register(api, rid, eid, runner(email))
        entries.append((email, reg_id))
    wait_confirmed(api, [r for _, r in entries])
    pairs = []
    for i, (email, reg_id) in enumerate(entries):
        me = {HEADER: _link_token(stack, email)}
        friend = f"friend{i}.{tag}@example.com"
        assert api.post("/api/my/registration/transfer", headers=me, json={"email": friend}).status_code == 202
        pairs.append((me, _offer_token(stack, friend), reg_id))

    def cancel(me: dict[str, str]) -> requests.Response:
        quote = api.get("/api/my/registration/cancellation", headers=me)
        if quote.status_code != 200:
            return quote  # the transfer won before the runner read the quote: the link is revoked
        return api.post(
            "/api/my/registration/cancellation", headers=me, json={"amountCents": quote.json()["amountCents"]}
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        races = [(pool.submit(cancel, me), pool.submit(api.post, "/api/transfers/accept", json=_new_runner(tok)))
                 for me, tok, _ in pairs]  # fmt: skip
        outcomes = [(c.result(), a.result()) for c, a in races]
    for (cancelled, accepted), (_, _, reg_id) in zip(outcomes, pairs, strict=True):
        wins = [cancelled.status_code == 200, accepted.status_code == 200]
        assert wins.count(True) == 1, (cancelled.text, accepted.text)
        reg = backend.registrations().get(reg_id)
        if accepted.status_code == 200:
            assert reg.status == "CONFIRMED" and reg.transfers == 1
            assert cancelled.status_code in (401, 409), cancelled.text  # the link was revoked, or the quote moved
        else:
            assert reg.status in ("CANCELLING", "CANCELLED") and not reg.transfers
            assert (accepted.status_code, accepted.json()["error"]) == (409, "OFFER_GONE"), accepted.text
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_transfer_fee_is_a_payment_of_its_own_and_one_paid_for_a_transfer_that_lost_is_refunded(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}],
              "transfersUntil": _day(20), "transferFeeCents": 800}  # fmt: skip
    rid, eid, kim = _race(director, api, 3000, policy, who="kim-transfer-fee")
    tag = rid[-6:].lower()
    ada, bob = f"ada.{tag}@example.com", f"bob.{tag}@example.com"
    _, paid_id = hold_and_register(api, rid, eid, runner(ada))
    _, lost_id = hold_and_register(api, rid, eid, runner(bob))
    wait_confirmed(api, [paid_id, lost_id])

    # Ada's place: the new runner pays the fee with a card confirmed on the server.
    me = {HEADER: _link_token(stack, ada)}
    assert api.get("/api/my/registration/transfer", headers=me).json()["feeCents"] == 800
    friend = f"friend.{tag}@example.com"
    assert api.post("/api/my/registration/transfer", headers=me, json={"email": friend}).status_code == 202
    token = _offer_token(stack, friend)
    assert api.post("/api/transfers/offer", json={"token": token}).json()["feeCents"] == 800
    paid = api.post("/api/transfers/accept", json=_new_runner(token, paymentMethod="pm_card_visa"))
    assert (paid.status_code, paid.json()["status"]) == (200, "TRANSFERRED"), paid.text
    statement = kim.get(f"/api/admin/races/{rid}/registrations/{paid_id}").json()["ledger"]
    payments = [(e["reason"], e["amountCents"]) for e in statement["entries"] if e["kind"] == "payment"]
    assert payments == [("entry", 3000), ("transfer_fee", 800)]
    assert statement["chargedCents"] == 3800

    # Bob's: the new runner begins paying, Bob cancels first, then the browser's payment lands.
    bob_me = {HEADER: _link_token(stack, bob)}
    other = f"other.{tag}@example.com"
    assert api.post("/api/my/registration/transfer", headers=bob_me, json={"email": other}).status_code == 202
    lost_token = _offer_token(stack, other)
    begun = api.post("/api/transfers/accept", json=_new_runner(lost_token))
    assert (begun.status_code, begun.json()["status"]) == (200, "PAYMENT_REQUIRED"), begun.text
    intent_id = begun.json()["clientSecret"].split("_secret_")[0]
    amount = api.get("/api/my/registration/cancellation", headers=bob_me).json()["amountCents"]
    cancelled = api.post("/api/my/registration/cancellation", headers=bob_me, json={"amountCents": amount})
    assert cancelled.status_code == 200, cancelled.text
    browser_pays(stack, intent_id)  # cancelled by the withdrawal? no: Bob cancelled, the intent was still payable
    late = api.post("/api/transfers/confirm", json={"token": lost_token})
    assert (late.status_code, late.json()["error"]) == (409, "OFFER_GONE"), late.text
    try:
        wait_until(lambda: sum(r["amount"] for r in _refunds_at_provider(stack, intent_id)) == 800, timeout=45)
    except AssertionError:
        statement = kim.get(f"/api/admin/races/{rid}/registrations/{lost_id}").json()
        raise AssertionError((statement, _refunds_at_provider(stack, intent_id))) from None
    assert backend.registrations().get(lost_id).status in ("CANCELLING", "CANCELLED")
    # Both fees are in the gross, the lost one's refund in the refunds: the books balance.
    totals = wait_until(
        lambda: (t := kim.get(f"/api/admin/races/{rid}/stats").json()["totals"])["otherPaymentsCents"] == 1600 and t,
        timeout=30,
    )
    assert (totals["transfers"], totals["grossCents"], totals["refundedCents"]) == (1, 7600, 3800)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_team_member_hands_over_their_own_place_and_the_team_keeps_the_rest(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "transfersUntil": _day(20),
              "transferredRefundable": False}  # fmt: skip
    sizes = [{"id": "M", "label": "Medium", "quantity": 3}, {"id": "L", "label": "Large", "quantity": 3}]
    rid, eid, kim = _race(director, api, 2000, policy, (10,), who="kim-transfer-team", teams=True, sizes=sizes)
    tag = rid[-6:].lower()
    members = [
        runner(f"member{i}.{tag}@example.com", token=None) | {"firstName": f"Member{i}", "answers": {"shirt": "M"}}
        for i in range(3)
    ]
    team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": 3}).json()
    paid = api.post(
        f"/api/holds/{team['holdId']}/team",
        json={"teamName": "Handover", "members": members, "paymentMethod": "pm_card_visa"},
    )
    assert paid.status_code == 202, paid.text
    ids = backend.holds().get(team["holdId"]).memberIds
    wait_confirmed(api, ids)

    second = members[1]["email"]
    me = {HEADER: _link_token(stack, second)}
    new = f"newcomer.{tag}@example.com"
    assert api.post("/api/my/registration/transfer", headers=me, json={"email": new}).status_code == 202
    done = api.post("/api/transfers/accept", json=_new_runner(_offer_token(stack, new), answers={"shirt": "L"}))
    assert (done.status_code, done.json()["status"], done.json()["registrationId"]) == (200, "TRANSFERRED", ids[1])

    # Only that member changed: the team's record names the newcomer in their slot, with their size.
    team_members = _hold(backend, team["holdId"])["attempt"]["members"]
    assert [m["email"] for m in team_members] == [members[0]["email"], new, members[2]["email"]]
    assert team_members[1]["stock"][0].startswith("shirt#L#") and team_members[0]["stock"][0].startswith("shirt#M#")
    assert stock_taken(kim, rid, eid) == {"M": 2, "L": 1}
    assert backend.registrations().get(ids[1]).teamName == "Handover"
    assert not _anywhere(backend, second)
    # The organiser's rule: a place taken over may be cancelled, not refunded (the teammates' may).
    theirs = api.get("/api/my/registration/cancellation", headers={HEADER: done.json()["linkToken"]}).json()
    assert (theirs["allowed"], theirs["amountCents"]) == (True, 0) and "not refunded" in theirs["note"], theirs
    first = api.get("/api/my/registration/cancellation", headers={HEADER: _link_token(stack, members[0]["email"])})
    assert first.json()["amountCents"] == 2000, first.text
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
