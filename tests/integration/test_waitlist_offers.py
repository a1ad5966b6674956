"""Offers from an event's waitlist on the real stack (issue 40, slice 2): places freed at one
moment go to the first runners in line and to nobody else; an offer not claimed in its window
passes to the next runner; a cap raise is offered; a claim past its window is refused and passed
on; after registration closed a claim is refused, the places go back on sale and every runner still
waiting hears the list closed. The stack's offer window is 20 s (``conftest.local_stack``) and its
sweeper runs every 3 s, so each test takes well under a minute.

The 50 runners in line are written through the waitlist's own store (its confirmation, the same
transaction the API's confirm runs): joining through the API is slice 1's tests'
(``test_waitlist.py``), and 50 joins would meet its per-network limits by design."""

from __future__ import annotations

import csv
import io
import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from racecap.aws.items import values
from racecap.aws.keys import hold_key, waitlist_entry_id
from racecap.places.store import DynamoInventory
from racecap.waitlist.models import Offer, WaitlistEntry
from racecap.waitlist.store import DynamoWaitlist

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold_and_register, register, runner, wait_confirmed, wait_for_audit
from .runners import Runner, why

pytestmark = pytest.mark.integration

OFFER, CLOSED = "waitlist-offer", "waitlist-closed"
WINDOW_S = 20  # the stack's WaitlistOfferWindowSeconds
SWEEP_S = 3  # the sweeper's minute x the stack's schedule scale (0.05)


def _mail(stack: LocalStack, kind: str) -> list[dict[str, Any]]:
    mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
    return [m for m in mail if m["tags"].get("kind") == kind]


def _mailed(stack: LocalStack, kind: str, emails: list[str]) -> list[str]:
    """Which of ``emails`` got an email of ``kind`` (each address once at most)."""
    to = [t for m in _mail(stack, kind) for t in m["to"]]
    return [e for e in emails if any(e in t for t in to)]


def _store(backend: Any) -> DynamoWaitlist:
    return DynamoWaitlist(backend.dynamodb, backend.table("Inventory"))


def _taken(backend: Any, rid: str, eid: str) -> int:
    return DynamoInventory(backend.dynamodb, backend.table("Inventory")).usage(rid, eid, consistent=True).taken


def _full_race(
    director: Any, api: requests.Session, cap: int, registered: int
) -> tuple[str, str, Any, list[str], list[str]]:
    """An open race whose one event (teams of 2-3 allowed, up to its cap; waitlist on) is sold out: ``registered``
    confirmed registrations, the rest held (their ids last)."""
    kim = director("kim-offers")
    race = kim.post("/api/admin/races", json=race_body((cap,))).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    setting = {"waitlist": {"enabled": True}, "teamMinSize": 2, "teamMaxSize": min(3, cap)}
    assert kim.patch(f"/api/admin/races/{rid}/events/{eid}", json=setting).status_code == 200
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=10)
    regs = [hold_and_register(api, rid, eid, runner())[1] for _ in range(registered)]
    wait_confirmed(api, regs)
    held = [Runner(api, device=False).hold(rid, eid) for _ in range(cap - registered)]
    assert all(h.status_code == 201 for h in held), [why(h) for h in held]
    return rid, eid, kim, regs, [h.json()["holdId"] for h in held]


def _line_of(backend: Any, rid: str, eid: str, n: int) -> list[str]:
    """``n`` runners confirmed in line, in order; their addresses."""
    store, tag = _store(backend), rid[-6:].lower()
    emails = [f"line{i:02d}.{tag}@example.com" for i in range(1, n + 1)]
    now = datetime.now(UTC).isoformat()
    for email in emails:
        entry = WaitlistEntry(
            entryId=waitlist_entry_id(rid, eid, email), raceId=rid, eventId=eid, state="PENDING", email=email,
            firstName="Ada", lastName="Line", joinedAt=now, ttl=int(time.time()) + 3600,
        )  # fmt: skip
        assert store.put_pending(entry, int(time.time()))
        store.confirm(entry, store.line(rid, eid), None, now)
    return emails


def _offers(backend: Any, rid: str, eid: str) -> dict[int, Offer]:
    """The offers made, by the entry's join number."""
    return {o.seq: o for o in _store(backend).offers(rid, eid)}


def _claim_token(stack: LocalStack, email: str) -> str:
    found = wait_until(lambda: [m for m in _mail(stack, OFFER) if any(email in t for t in m["to"])], timeout=45)
    (token,) = set(re.findall(r"https?://\S+/#/waitlist/offer/(\S+)", found[0]["text"]))
    assert token.startswith("wto.")
    return str(token)


def _expire_hold(backend: Any, hold_id: str) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=hold_key(hold_id),
        UpdateExpression="SET expiresAt = :past, gsi1sk = :past",
        ExpressionAttributeValues=values({":past": past}),
    )


def test_three_places_freed_at_once_go_to_the_first_three_in_line_then_to_the_next_as_offers_expire(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, kim, regs, held = _full_race(director, api, cap=3, registered=2)
    emails = _line_of(backend, rid, eid, 50)

    # Two cancellations and an expiry at the same moment, while the public tries to hold.
    _expire_hold(backend, held[0])

    def cancel(reg: str) -> requests.Response:
        return kim.post(f"/api/admin/races/{rid}/registrations/{reg}/cancel", json={"refund": "FULL"})

    def public(_: int) -> requests.Response:
        return Runner(api, device=False).hold(rid, eid)

    def team(_: int) -> requests.Response:
        return Runner(api, device=False).call("POST", f"/api/races/{rid}/events/{eid}/teams", json={"places": 2})

    with ThreadPoolExecutor(max_workers=24) as pool:
        cancels = [pool.submit(cancel, r) for r in regs]
        publics = list(pool.map(public, range(200)))
        teams = list(pool.map(team, range(5)))
    assert [c.result().status_code for c in cancels] == [200, 200], [why(c.result()) for c in cancels]
    refused = {(r.status_code, r.json().get("error")) for r in publics + teams}
    assert refused == {(409, "SOLD_OUT")}, [why(r) for r in publics + teams if r.status_code != 409][:3]

    # Exactly three offers, to entries 1-3; the places never left their shards.
    wait_until(lambda: len(_offers(backend, rid, eid)) == 3, timeout=30)
    time.sleep(2 * SWEEP_S)
    offers = _offers(backend, rid, eid)
    assert sorted(offers) == [1, 2, 3]
    assert _taken(backend, rid, eid) == 3
    wait_until(lambda: len(_mailed(stack, OFFER, emails)) == 3, timeout=45)
    assert _mailed(stack, OFFER, emails) == emails[:3]
    assert api.get(f"/api/races/{rid}").json()["events"][0]["status"] == "SOLD_OUT"

    # Entry 2 claims: its own hold, registered with the offered address only, paid as usual.
    token = _claim_token(stack, emails[1])
    seen = api.post("/api/waitlist/offer", json={"token": token}).json()
    assert (seen["state"], seen["priceCents"]) == ("OFFERED", 3000)
    claimed = api.post("/api/waitlist/offer/claim", json={"token": token})
    assert claimed.status_code == 201, why(claimed)
    assert api.post("/api/waitlist/offer/claim", json={"token": token}).json()["holdId"] == claimed.json()["holdId"]
    hold_id = claimed.json()["holdId"]
    elsewhere = register(api, hold_id, runner("someone.else@example.com"))
    assert (elsewhere.status_code, elsewhere.json()["error"]) == (400, "VALIDATION_ERROR"), why(elsewhere)
    mine = register(api, hold_id, runner(emails[1]))
    assert mine.status_code == 202, why(mine)
    wait_confirmed(api, [mine.json()["registrationId"]])
    third = api.post("/api/waitlist/offer/claim", json={"token": _claim_token(stack, emails[2])})
    assert third.status_code == 201, why(third)  # held, not yet paid: it stays entry 3's

    # Entry 1 lets its offer run out: entry 4 is offered within the window and two sweeper runs.
    expires = datetime.fromisoformat(offers[1].expiresAt)
    fourth = wait_until(lambda: _offers(backend, rid, eid).get(4), timeout=WINDOW_S + 4 * SWEEP_S + 10)
    assert datetime.fromisoformat(fourth.offeredAt) <= expires + timedelta(seconds=2 * SWEEP_S + 1)
    assert _offers(backend, rid, eid)[1].state == "EXPIRED"
    late = api.post("/api/waitlist/offer/claim", json={"token": _claim_token(stack, emails[0])})
    assert (late.status_code, late.json()["error"]) == (410, "OFFER_GONE"), why(late)

    # A raise of two: entries 5 and 6 are offered, and the event stays sold out.
    raised = kim.patch(f"/api/admin/races/{rid}/events/{eid}", json={"cap": 5})
    assert raised.status_code == 200, raised.text
    wait_until(lambda: {5, 6} <= set(_offers(backend, rid, eid)), timeout=3 * SWEEP_S + 10)
    assert 7 not in _offers(backend, rid, eid)
    assert _taken(backend, rid, eid) == 5
    assert Runner(api, device=False).hold(rid, eid).status_code == 409
    report = wait_for_audit(stack, backend, rid, timeout=30)  # every taken place accounted for
    assert report.ok, report.summary()


def test_a_claim_past_its_window_passes_the_place_on_and_a_closed_registration_returns_every_place(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, kim, regs, _ = _full_race(director, api, cap=2, registered=2)
    emails = _line_of(backend, rid, eid, 6)
    for reg in regs:
        assert kim.post(f"/api/admin/races/{rid}/registrations/{reg}/cancel", json={}).status_code == 200
    wait_until(lambda: sorted(_offers(backend, rid, eid)) == [1, 2], timeout=30)

    # Entry 1's window ends before the sweeper sees it: the claim itself answers 410 and passes on.
    first = _offers(backend, rid, eid)[1]
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key={"pk": {"S": f"WAITLIST#{rid}#{eid}"}, "sk": {"S": f"OFFER#{first.entryId}"}},
        UpdateExpression="SET expiresAt = :past",
        ExpressionAttributeValues=values({":past": (datetime.now(UTC) - timedelta(seconds=1)).isoformat()}),
    )
    late = api.post("/api/waitlist/offer/claim", json={"token": _claim_token(stack, emails[0])})
    assert (late.status_code, late.json()["error"]) == (410, "OFFER_EXPIRED"), why(late)
    assert 3 in _offers(backend, rid, eid)  # at once, not at the next sweep

    # The director releases one more place to the line: entry 4 is offered it.
    released = kim.post(f"/api/admin/races/{rid}/events/{eid}/waitlist/release", json={"places": 1})
    assert released.status_code == 200, released.text
    wait_until(lambda: 4 in _offers(backend, rid, eid), timeout=3 * SWEEP_S + 10)
    view = kim.get(f"/api/admin/races/{rid}/events/{eid}/waitlist").json()
    assert (view["length"], view["offersOut"], view["offersMade"], view["expired"]) == (2, 3, 4, 1)

    # Registration closes: entry 2's claim is refused, the places go back on sale, the rest hear.
    assert kim.post(f"/api/admin/races/{rid}/window/close").status_code == 200
    closed = api.post("/api/waitlist/offer/claim", json={"token": _claim_token(stack, emails[1])})
    assert (closed.status_code, closed.json()["error"]) == (409, "REGISTRATION_CLOSED"), why(closed)
    assert _taken(backend, rid, eid) == 0
    assert {o.state for o in _offers(backend, rid, eid).values()} == {"EXPIRED", "CLOSED"}
    # 5 and 6 never offered; 2-4's offers ended with the list (1's had expired: it heard then).
    told = emails[1:]
    wait_until(lambda: len(_mailed(stack, CLOSED, emails)) == len(told), timeout=45)
    time.sleep(SWEEP_S)
    assert _mailed(stack, CLOSED, emails) == told
    assert sum(len([t for t in m["to"] if rid[-6:].lower() in t]) for m in _mail(stack, CLOSED)) == len(told)
    report = wait_for_audit(stack, backend, rid, timeout=30)
    assert report.ok, report.summary()


def test_the_directors_close_tells_each_runner_waiting_or_offered_exactly_once_and_the_export_shows_the_list(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, kim, regs, _ = _full_race(director, api, cap=2, registered=1)
    emails = _line_of(backend, rid, eid, 4)
    assert kim.post(f"/api/admin/races/{rid}/registrations/{regs[0]}/cancel", json={}).status_code == 200
    wait_until(lambda: sorted(_offers(backend, rid, eid)) == [1], timeout=30)

    # The export: every entry in line order, with its place, state and offer (gzipped on request).
    got = kim.get(f"/api/admin/races/{rid}/waitlist/export", headers={"Accept-Encoding": "gzip"})
    assert got.status_code == 200, got.text
    assert got.headers["Content-Type"].startswith("text/csv") and got.headers.get("Content-Encoding") == "gzip"
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert [(r["email"], r["state"], r["position"], r["offerState"]) for r in rows] == [
        (emails[0], "OFFERED", "", "OFFERED"), (emails[1], "WAITING", "1", ""),
        (emails[2], "WAITING", "2", ""), (emails[3], "WAITING", "3", ""),
    ]  # fmt: skip

    # The director closes the list, twice: the offer ends, its place goes on sale, each runner
    # still waiting and the one whose offer ended get one email, and the trail names no address.
    for _ in range(2):
        closed = kim.post(f"/api/admin/races/{rid}/events/{eid}/waitlist/close")
        assert closed.status_code == 200, closed.text
        assert (closed.json()["closed"], closed.json()["offersOut"]) == (True, 0)
    assert _offers(backend, rid, eid)[1].state == "CLOSED"
    assert _taken(backend, rid, eid) == 1  # the one hold left; the offered place is free again
    wait_until(lambda: len(_mailed(stack, CLOSED, emails)) == 4, timeout=45)
    time.sleep(2 * SWEEP_S)  # a second email, were one coming, is on its way by now
    to = [t for m in _mail(stack, CLOSED) for t in m["to"]]
    assert {e: sum(e in t for t in to) for e in emails} == dict.fromkeys(emails, 1)
    (offered,) = [m for m in _mail(stack, CLOSED) if any(emails[0] in t for t in m["to"])]
    assert "not claimed before it closed" in offered["text"]
    trail = [e for e in kim.get(f"/api/admin/races/{rid}/audit").json()["entries"] if e["action"] == "waitlist.close"]
    assert len(trail) == 2 and "@" not in repr(trail)
    report = wait_for_audit(stack, backend, rid, timeout=30)
    assert report.ok, report.summary()
