"""A runner's own entry on the real stack (issue 39): the link in the confirmation email opens it,
ten clicks of "cancel" refund the policy's amount once, a director's refund racing the runner's
cancel never refunds more than was paid, "find my registration" answers and works alike for
every address, and no address ever lands in the audit trail."""

from __future__ import annotations

import csv
import io
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from racecap.aws.keys import reg_key

from local.stack import LocalStack

from .admin import ask_shirt_sizes, race_body, stock_taken, wait_until
from .flows import (
    hold_and_register,
    runner,
    spend_payment_budget,
    standin,
    standin_faults,
    wait_confirmed,
    wait_for_audit,
)

pytestmark = pytest.mark.integration

HEADER = "X-Racecap-Registration"


def _mail(stack: LocalStack, to: str, kind: str) -> list[dict[str, Any]]:
    mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
    return [m for m in mail if to in m["to"] and m["tags"].get("kind") == kind]


def _link_token(stack: LocalStack, to: str, kind: str = "confirmation") -> str:
    """The token in the link of the newest email of ``kind`` to ``to`` (in its text and its button)."""
    found = wait_until(lambda: _mail(stack, to, kind), timeout=45)
    text, page = found[0]["text"], found[0]["html"]
    (url,) = set(re.findall(r"https?://\S+/#/my/(\S+)", text))
    assert f"#/my/{url}" in page  # the button leads to the same link
    assert url.startswith("reg.")
    return str(url)


def _race(
    director: Any,
    api: requests.Session,
    price: int,
    policy: dict[str, Any],
    caps: tuple[int, ...] = (5,),
    *,
    who: str = "kim-own",
    teams: bool = False,
    sizes: list[dict[str, Any]] | None = None,
) -> tuple[str, str, Any]:
    """An open race of one event at ``price`` under ``policy`` (for teams of 2 to 4 with
    ``teams``; with a T-shirt question of ``sizes``): (race id, event id, its director)."""
    kim = director(who)
    body = race_body(caps)
    body["events"][0] |= {"priceCents": price, **({"teamMinSize": 2, "teamMaxSize": 4} if teams else {})}
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    patched = kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy})
    assert patched.status_code == 200, patched.text
    if sizes:
        ask_shirt_sizes(kim, rid, eid, sizes)
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    return rid, eid, kim


def _day(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).date().isoformat()


def _refunds_at_provider(stack: LocalStack, intent_id: str) -> list[dict[str, Any]]:
    listed = standin(stack).get(f"{stack.stripe_url}/v1/refunds", params={"payment_intent": intent_id, "limit": 100})
    return list(listed.json()["data"])


def test_ten_cancel_clicks_from_one_link_cancel_once_and_refund_the_policys_amount_to_the_cent(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    # 50 % until a month from now, less a 2.50 € fee: 45.00 € paid → 22.50 - 2.50 = 20.00 €.
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 50}], "feeCents": 250}
    rid, eid, kim = _race(director, api, 4500, policy)
    email = f"own.{rid[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    token = _link_token(stack, email)
    me = {HEADER: token}

    # The link opens the registration; the registration id alone opens nothing.
    mine = api.get("/api/my/registration", headers=me)
    assert mine.status_code == 200, mine.text
    view = mine.json()
    assert (view["registrationId"], view["status"], view["paidCents"], view["refundedCents"]) == (
        reg_id,
        "CONFIRMED",
        4500,
        0,
    )
    assert [a["action"] for a in view["actions"]] == ["cancel"] and view["timeZone"]
    for forged in ("", reg_id, token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "adm" + token[3:]):
        refused = api.get("/api/my/registration", headers={HEADER: forged})
        assert (refused.status_code, refused.json()["error"]) == (401, "INVALID_TOKEN"), (forged, refused.text)

    quote = api.get("/api/my/registration/cancellation", headers=me).json()
    assert (quote["allowed"], quote["percent"], quote["amountCents"], quote["feeCents"]) == (True, 50, 2000, 250)
    assert "20.00 EUR" in quote["note"]
    # A stale amount changes nothing: the runner is never refunded what they were not shown.
    stale = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 4500})
    assert (stale.status_code, stale.json()["error"]) == (409, "QUOTE_CHANGED")

    with ThreadPoolExecutor(10) as pool:
        clicks = list(
            pool.map(
                lambda _: api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 2000}),
                range(10),
            )
        )
    assert Counter(c.status_code for c in clicks) == {200: 10}, [c.text for c in clicks]
    assert {c.json()["registration"]["status"] for c in clicks} == {"CANCELLED"}
    assert {c.json()["refundedCents"] for c in clicks} == {2000}

    # One refund of exactly 20.00 € at the provider, one cancellation, one email.
    intent = backend.registrations().get(reg_id).chargeId
    refunds = _refunds_at_provider(stack, intent)
    assert [(r["amount"], r["status"]) for r in refunds] == [(2000, "succeeded")], refunds
    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    cancels = [e for e in audit if e["action"] == "registration.cancel"]
    assert (
        len(cancels) == 1 and cancels[0]["actor"]["kind"] == "runner" and cancels[0]["details"]["refundCents"] == 2000
    )
    wait_until(lambda: _mail(stack, email, "refund"), timeout=45)
    time.sleep(2)  # the repeats' emails were enqueued too: the sender sends one
    assert len(_mail(stack, email, "refund")) == 1
    again = api.get("/api/my/registration", headers=me).json()
    assert (again["status"], again["refundedCents"], again["cancelledBy"], again["actions"]) == (
        "CANCELLED",
        2000,
        "you",
        [],
    )
    (event,) = kim.get(f"/api/admin/races/{rid}/stats").json()["events"]
    assert (event["cancelled"], event["cancelledByRunners"], event["placesLeft"]) == (1, 1, 5)
    export = kim.get(f"/api/admin/races/{rid}/registrations/export", params={"includeCancelled": "true"})
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert [(r["registrationId"], r["cancelledBy"]) for r in rows] == [(reg_id, "runner")]

    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    _no_address_in_the_trail(kim, rid)


def test_a_runners_cancel_raced_by_the_directors_refund_never_refunds_more_than_was_paid(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}]}
    rid, eid, kim = _race(director, api, 10_000, policy)
    email = f"race.{rid[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    me = {HEADER: _link_token(stack, email)}
    assert api.get("/api/my/registration/cancellation", headers=me).json()["amountCents"] == 10_000

    refund_url = f"/api/admin/races/{rid}/registrations/{reg_id}/refunds"
    with ThreadPoolExecutor(2) as pool:
        runner_side = pool.submit(
            api.post, "/api/my/registration/cancellation", headers=me, json={"amountCents": 10_000}
        )
        director_side = pool.submit(kim.post, refund_url, json={"amountCents": 3000, "reason": "a partial refund"})
        cancel, refund = runner_side.result(), director_side.result()
    if cancel.status_code == 409:  # the director's refund got in first: the runner is shown the rest
        assert (cancel.json()["error"], refund.status_code) == ("QUOTE_CHANGED", 201), (cancel.text, refund.text)
        quote = api.get("/api/my/registration/cancellation", headers=me).json()
        assert quote["amountCents"] == 7000
        cancel = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 7000})
    else:  # the runner's got in first: nothing is left for the director's (or it is being cancelled)
        assert refund.status_code == 409 and refund.json()["error"] in ("REFUND_TOO_LARGE", "CONFLICT"), refund.text
    assert cancel.status_code == 200, cancel.text

    intent = backend.registrations().get(reg_id).chargeId
    refunds = _refunds_at_provider(stack, intent)
    assert sum(r["amount"] for r in refunds) == 10_000, refunds
    statement = kim.get(f"/api/admin/races/{rid}/registrations/{reg_id}").json()["ledger"]
    assert statement["refundedCents"] == 10_000 and statement["leftCents"] == 0
    ledger = sorted(e["providerId"] for e in statement["entries"] if e["kind"] == "refund")
    assert ledger == sorted(r["id"] for r in refunds)  # the ledger is the provider's refunds
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_director_refund_before_the_runners_click_changes_the_quote_and_the_stale_click_changes_nothing(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}]}
    rid, eid, kim = _race(director, api, 10_000, policy)
    email = f"stale.{rid[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    me = {HEADER: _link_token(stack, email)}
    assert api.get("/api/my/registration/cancellation", headers=me).json()["amountCents"] == 10_000
    refunded = kim.post(f"/api/admin/races/{rid}/registrations/{reg_id}/refunds", json={"amountCents": 3000})
    assert refunded.status_code == 201, refunded.text
    stale = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 10_000})
    assert (stale.status_code, stale.json()["error"]) == (409, "QUOTE_CHANGED") and "70.00 EUR" in stale.json()[
        "message"
    ]
    assert backend.registrations().get(reg_id).status == "CONFIRMED"  # nothing happened
    cancel = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 7000})
    assert cancel.status_code == 200 and cancel.json()["refundedCents"] == 7000, cancel.text
    intent = backend.registrations().get(reg_id).chargeId
    assert sorted(r["amount"] for r in _refunds_at_provider(stack, intent)) == [3000, 7000]


@pytest.mark.parametrize("fault", ["timeout", "rate-limited"])
def test_a_runners_cancel_the_provider_did_not_answer_is_finished_by_the_sweeper_and_refunded_once(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any, fault: str
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 80}]}
    rid, eid, _ = _race(director, api, 5000, policy)
    email = f"sweep.{fault}.{rid[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    me = {HEADER: _link_token(stack, email)}
    intent = backend.registrations().get(reg_id).chargeId
    try:
        if fault == "timeout":
            standin_faults(stack, lose_answers=3, lose_answers_on="/v1/refunds", lose_answers_for=intent)
        else:
            spend_payment_budget(stack, seconds=3.0)
        answer = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 4000})
    finally:
        standin_faults(stack, lose_answers=0, lose_answers_on="/v1/", lose_answers_for="")
    assert answer.status_code == 429 and int(answer.headers["Retry-After"]) >= 1, answer.text
    assert backend.registrations().get(reg_id).status == "CANCELLING"
    # Nobody clicks again: the sweeper (every 3 s here) finishes it under its own key.
    wait_until(lambda: backend.registrations().get(reg_id).status == "CANCELLED", timeout=30)
    intent = backend.registrations().get(reg_id).chargeId
    assert [r["amount"] for r in _refunds_at_provider(stack, intent)] == [4000]  # refunded once
    assert api.get("/api/my/registration", headers=me).json()["refundedCents"] == 4000
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_find_my_registration_answers_alike_for_every_address_and_emails_the_registered_one_only(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any, in_process_env: None
) -> None:
    from racecap import clients
    from racecap.registration.wiring import link_requests

    policy = {"runnersMayCancel": False}
    rid, eid, _ = _race(director, api, 3000, policy)
    known = f"known.{rid[-6:].lower()}@example.com"
    unknown = f"unknown.{rid[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(known))
    wait_confirmed(api, [reg_id])

    # Through the API: the same status and the same words for both addresses.
    answers = [api.post(f"/api/races/{rid}/registration-link", json={"email": e}) for e in (known, unknown)]
    assert [a.status_code for a in answers] == [202, 202], [a.text for a in answers]
    assert answers[0].json() == answers[1].json()
    token = _link_token(stack, known, "registration-link")
    mine = api.get("/api/my/registration", headers={HEADER: token}).json()
    assert mine["registrationId"] == reg_id and mine["actions"] == []  # this race's runners may not cancel
    time.sleep(3)  # the unknown address's request went through the sender too: it sent nothing
    assert _mail(stack, unknown, "registration-link") == [] and not [
        m
        for m in requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        if unknown in m["to"]
    ]

    # In this process, counted: the same AWS calls for a registered address and for any other.
    calls: list[str] = []

    def count(**kwargs: Any) -> None:
        calls.append(kwargs["event_name"].split(".")[-1])

    for client in (clients.dynamodb(), clients.sqs()):
        client.meta.events.register("before-call", count)
    requests_ = link_requests()
    requests_.request(rid, f"warm.{rid[-6:].lower()}@example.com", None, None)  # the race's definition, cached
    counted = []
    for address in (known, unknown):
        calls.clear()
        requests_.request(rid, address, None, None)
        counted.append(Counter(calls))
    assert counted[0] == counted[1], counted
    assert counted[0]["SendMessage"] == 1, counted  # one queued message each

    # Rate-limited per address: a fourth ask at once is refused with a time to wait.
    for _ in range(3):
        api.post(f"/api/races/{rid}/registration-link", json={"email": known})
    limited = api.post(f"/api/races/{rid}/registration-link", json={"email": known})
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1, limited.text
    # Bad input: a 400 that changes nothing; an unknown race: 404, whoever asks.
    bad = api.post(f"/api/races/{rid}/registration-link", json={"email": "not-an-address"})
    assert (bad.status_code, bad.json()["error"]) == (400, "VALIDATION_ERROR")
    missing = api.post("/api/races/no-such-race/registration-link", json={"email": known})
    assert (missing.status_code, missing.json()["error"]) == (404, "RACE_NOT_FOUND")


def test_a_revoked_link_opens_nothing_and_says_so(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, _ = _race(director, api, 3000, {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}]})
    email = f"revoked.{rid[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    me = {HEADER: _link_token(stack, email)}
    assert api.get("/api/my/registration", headers=me).status_code == 200
    # What an email change does to the links sent before it: the registration's link version moves on.
    backend.dynamodb.update_item(
        TableName=backend.table("Registrations"),
        Key=reg_key(reg_id),
        UpdateExpression="SET linkVersion = :v",
        ExpressionAttributeValues={":v": {"N": "1"}},
    )
    for path in ("", "/cancellation"):
        refused = api.get(f"/api/my/registration{path}", headers=me)
        assert (refused.status_code, refused.json()["error"]) == (401, "LINK_REVOKED"), refused.text
    refused = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 3000})
    assert (refused.status_code, refused.json()["error"]) == (401, "LINK_REVOKED")


def _no_address_in_the_trail(kim: Any, race_id: str) -> None:
    """No email address anywhere in the race's audit trail: not in a detail, not in an actor."""
    entries = kim.get(f"/api/admin/races/{race_id}/audit").json()["entries"]
    assert entries
    found = [e for e in entries if re.search(r"[^@\s\"]+@[^@\s\"]+\.[a-z]{2,}", str(e))]
    assert found == [], found


def _change_token(stack: LocalStack, to: str) -> str:
    found = wait_until(lambda: _mail(stack, to, "email-change"), timeout=45)
    (token,) = set(re.findall(r"https?://\S+/#/my/email/(\S+)", found[0]["text"]))
    return str(token)


def test_a_runner_changes_their_address_the_claim_moves_old_links_stop_and_the_new_address_gets_the_details(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, kim = _race(director, api, 3000, {"runnersMayCancel": False})
    tag = rid[-6:].lower()
    old, new, taken = f"old.{tag}@example.com", f"new.{tag}@example.com", f"taken.{tag}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(old))
    _, other_id = hold_and_register(api, rid, eid, runner(taken))
    wait_confirmed(api, [reg_id, other_id])
    me = {HEADER: _link_token(stack, old)}

    same = api.post("/api/my/registration/email", headers=me, json={"email": old.upper()})
    assert (same.status_code, same.json()["error"]) == (409, "SAME_EMAIL")
    asked = api.post("/api/my/registration/email", headers=me, json={"email": new})
    assert asked.status_code == 202, asked.text
    # Nothing moves until the new address confirms.
    assert backend.registrations().get(reg_id).email == old
    token = _change_token(stack, new)
    with ThreadPoolExecutor(5) as pool:  # a double click, and three more
        confirms = list(
            pool.map(lambda _: api.post("/api/my/registration/email/confirm", json={"token": token}), range(5))
        )
    assert Counter(c.status_code for c in confirms) == {200: 5}, [c.text for c in confirms]
    assert {c.json()["email"] for c in confirms} == {new}
    fresh = {HEADER: confirms[0].json()["linkToken"]}

    # One registration per email throughout: the claim moved, the old address is free again.
    moved = backend.registrations()
    assert moved.get(reg_id).email == new and moved.get(reg_id).linkVersion == 1
    assert moved.by_email(rid, old) is None and moved.by_email(rid, new).registrationId == reg_id
    # Earlier links stop; the new one (in the answer, and in the email to the new address) opens it.
    revoked = api.get("/api/my/registration", headers=me)
    assert (revoked.status_code, revoked.json()["error"]) == (401, "LINK_REVOKED")
    assert api.get("/api/my/registration", headers=fresh).json()["email"] == new
    assert wait_until(lambda: _mail(stack, old, "email-moved"), timeout=45)  # the old address hears of it
    emailed = {HEADER: _link_token(stack, new, "email-changed")}
    assert api.get("/api/my/registration", headers=emailed).json()["registrationId"] == reg_id

    # Another runner's address: asking says nothing; confirming says it is taken, and changes nothing.
    assert api.post("/api/my/registration/email", headers=fresh, json={"email": taken}).status_code == 202
    refused = api.post("/api/my/registration/email/confirm", json={"token": _change_token(stack, taken)})
    assert (refused.status_code, refused.json()["error"]) == (409, "EMAIL_ALREADY_REGISTERED"), refused.text
    assert backend.registrations().get(reg_id).email == new
    assert backend.registrations().by_email(rid, taken).registrationId == other_id
    # The first change's link, used again after the address moved on, opens nothing new.
    again = api.post("/api/my/registration/email/confirm", json={"token": token})
    assert again.status_code == 200 and again.json()["email"] == new

    # The old address may register again (its claim was released).
    _, third = hold_and_register(api, rid, eid, runner(old))
    wait_confirmed(api, [third])
    report = wait_for_audit(stack, backend, rid)  # one confirmation each: the new address's email is its own kind
    assert report.ok, report.violations
    _no_address_in_the_trail(kim, rid)
    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    changes = [e for e in audit if e["action"] == "registration.email.changed"]
    assert [(e["target"], e["actor"]["kind"]) for e in changes] == [(reg_id, "runner")]


def test_a_runner_corrects_their_details_and_swaps_a_size_only_for_one_with_stock_and_a_cancel_returns_the_new_one(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "editUntil": _day(20)}
    rid, eid, kim = _race(director, api, 3000, policy)
    sizes = [{"id": "S", "label": "Small", "quantity": 1}, {"id": "M", "label": "Medium", "quantity": 2},
             {"id": "L", "label": "Large"}]  # fmt: skip
    ask_shirt_sizes(kim, rid, eid, sizes)
    tag = rid[-6:].lower()
    mine, other = f"edit.{tag}@example.com", f"small.{tag}@example.com"
    _, reg_id = hold_and_register(api, rid, eid, runner(mine) | {"answers": {"shirt": "M"}})
    _, other_id = hold_and_register(api, rid, eid, runner(other) | {"answers": {"shirt": "S"}})
    wait_confirmed(api, [reg_id, other_id])
    me = {HEADER: _link_token(stack, mine)}
    view = api.get("/api/my/registration", headers=me).json()
    assert [(a["action"], a["until"]) for a in view["actions"]] == [
        ("edit", policy["editUntil"]),
        ("cancel", view["raceDate"]),
    ]
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 1}

    # A typo and a date of birth: only what is sent changes; the trail names fields, not values.
    fixed = api.patch("/api/my/registration", headers=me, json={"firstName": "Ada-Marie", "dateOfBirth": "1991-01-02"})
    assert fixed.status_code == 200, fixed.text
    assert (fixed.json()["firstName"], fixed.json()["dateOfBirth"], fixed.json()["lastName"]) == (
        "Ada-Marie",
        "1991-01-02",
        "Lovelace",
    )
    bad = api.patch("/api/my/registration", headers=me, json={"dateOfBirth": "02/01/1991"})
    assert (bad.status_code, bad.json()["error"]) == (400, "VALIDATION_ERROR")

    # Small has none left: refused, naming the answer, and nothing moved.
    sold = api.patch("/api/my/registration", headers=me, json={"answers": {"shirt": "S"}})
    assert (sold.status_code, sold.json()["error"], sold.json()["fields"]) == (
        409,
        "OPTION_SOLD_OUT",
        {"answers.shirt": "Small is sold out."},
    ), sold.text
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 1}
    # Large has no limit: Medium's unit goes back in the same write.
    large = api.patch("/api/my/registration", headers=me, json={"answers": {"shirt": "L"}})
    assert large.status_code == 200 and [a["text"] for a in large.json()["answers"]] == ["Large"], large.text
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 0}
    assert api.patch("/api/my/registration", headers=me, json={"answers": {"shirt": "M"}}).status_code == 200
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 1}

    # A later cancellation gives back the unit the edit took, not the one registration took.
    quote = api.get("/api/my/registration/cancellation", headers=me).json()
    cancel = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": quote["amountCents"]})
    assert cancel.status_code == 200, cancel.text
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 0}
    after = api.patch("/api/my/registration", headers=me, json={"firstName": "Ada"})
    assert after.status_code == 409  # a cancelled registration has nothing to correct

    # Without an edit cut-off, runners may not edit (the director decides).
    other_me = {HEADER: _link_token(stack, other)}
    kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": {**policy, "editUntil": None}})
    wait_until(lambda: api.patch("/api/my/registration", headers=other_me, json={"firstName": "Bo"}).status_code == 403)
    audit = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    # (The other runner's edit may land while the race's cached definition is a few seconds old.)
    edits = [
        e["details"]["fields"] for e in audit if e["action"] == "registration.details.changed" and e["target"] == reg_id
    ]
    assert sorted(map(tuple, edits)) == [("answers",), ("answers",), ("dateOfBirth", "firstName")]
    _no_address_in_the_trail(kim, rid)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_team_member_cancels_their_own_place_the_captains_card_is_refunded_and_both_are_told(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    # The refund goes to the card that paid (the captain's); the provider does not answer the
    # first call, so the sweeper finishes the cancellation: the captain still hears of it.
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "feeCents": 500}
    rid, eid, kim = _race(director, api, 3000, policy, (10,), who="kim-own-team", teams=True)
    tag = rid[-6:].lower()
    members = [runner(f"crew{i}.{tag}@example.com", token=None) | {"firstName": f"Crew{i}"} for i in range(3)]
    team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": 3})
    assert team.status_code == 201, team.text
    paid = api.post(
        f"/api/holds/{team.json()['holdId']}/team",
        json={"teamName": "Night Owls", "members": members, "paymentMethod": "pm_card_visa"},
    )
    assert paid.status_code == 202, paid.text
    ids = backend.holds().get(team.json()["holdId"]).memberIds
    wait_confirmed(api, ids)
    captain, leaver = members[0]["email"], members[1]["email"]
    me = {HEADER: _link_token(stack, leaver)}
    quote = api.get("/api/my/registration/cancellation", headers=me).json()
    assert (quote["paidCents"], quote["amountCents"]) == (3000, 2500)  # their share, less the fee

    try:
        payment = backend.registrations().get(ids[0]).chargeId  # the team's one payment, the captain's
        standin_faults(stack, lose_answers=3, lose_answers_on="/v1/refunds", lose_answers_for=payment)
        answer = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": 2500})
    finally:
        standin_faults(stack, lose_answers=0, lose_answers_on="/v1/", lose_answers_for="")
    assert answer.status_code == 429, answer.text
    wait_until(lambda: backend.registrations().get(ids[1]).status == "CANCELLED", timeout=30)

    intent = backend.registrations().get(ids[0]).chargeId
    assert [r["amount"] for r in _refunds_at_provider(stack, intent)] == [2500]  # once, on the team's payment
    wait_until(lambda: _mail(stack, captain, "refund") and _mail(stack, leaver, "refund"), timeout=45)
    (told,) = _mail(stack, captain, "refund")
    assert "Hi Crew0" in told["text"] and "Crew1's place" in told["text"] and "25.00" in told["text"], told["text"]
    assert len(_mail(stack, leaver, "refund")) == 1
    assert not _mail(stack, members[2]["email"], "refund")  # the third member is not told
    others = [backend.registrations().get(r) for r in (ids[0], ids[2])]
    assert [r.status for r in others] == ["CONFIRMED", "CONFIRMED"]
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    _no_address_in_the_trail(kim, rid)


def test_a_team_member_swaps_their_own_size_and_their_cancel_returns_the_new_unit_not_a_teammates(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "editUntil": _day(20)}
    sizes = [{"id": "S", "label": "Small", "quantity": 1}, {"id": "M", "label": "Medium", "quantity": 3},
             {"id": "L", "label": "Large", "quantity": 3}]  # fmt: skip
    rid, eid, kim = _race(director, api, 2000, policy, (10,), who="kim-own-team-size", teams=True, sizes=sizes)
    tag = rid[-6:].lower()
    members = [
        runner(f"sized{i}.{tag}@example.com", token=None) | {"firstName": f"Sized{i}", "answers": {"shirt": size}}
        for i, size in enumerate(("M", "M", "S"))
    ]
    team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": 3}).json()
    paid = api.post(
        f"/api/holds/{team['holdId']}/team",
        json={"teamName": "Sizes", "members": members, "paymentMethod": "pm_card_visa"},
    )
    assert paid.status_code == 202, paid.text
    ids = backend.holds().get(team["holdId"]).memberIds
    wait_confirmed(api, ids)
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 2, "L": 0}

    # The second member: Small is gone (their teammate has it), Large has room.
    me = {HEADER: _link_token(stack, members[1]["email"])}
    sold = api.patch("/api/my/registration", headers=me, json={"answers": {"shirt": "S"}})
    assert (sold.status_code, sold.json()["error"]) == (409, "OPTION_SOLD_OUT"), sold.text
    large = api.patch("/api/my/registration", headers=me, json={"answers": {"shirt": "L"}})
    assert large.status_code == 200, large.text
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 1, "L": 1}
    recorded = [m.stock for m in backend.holds().get(team["holdId"]).attempt.team()]
    assert [[e.split("#")[1] for e in s or []] for s in recorded] == [["M"], ["L"], ["S"]]

    # Their cancellation gives back Large (what they hold now), and no teammate's unit.
    quote = api.get("/api/my/registration/cancellation", headers=me).json()
    done = api.post("/api/my/registration/cancellation", headers=me, json={"amountCents": quote["amountCents"]})
    assert done.status_code == 200, done.text
    assert stock_taken(kim, rid, eid) == {"S": 1, "M": 1, "L": 0}
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
