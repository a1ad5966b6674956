"""A captain switches the whole team to another event, on the real stack (issue 41, teams): a team
runs in one event, so a member alone is refused; the captain answers each member's questions for
the new event, pays a dearer event's difference for the team (or each member's share of a cheaper
one goes back to the team's card), and every member moves in one transaction: new bibs 1..N
there, sizes, places, counters, one confirmation each. A member who cancels meanwhile stops it
(the upgrade goes back); a team whose move cannot fit in one transaction is refused up front."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from local.stack import LocalStack

from .admin import ask_shirt_sizes, race_body, stock_taken, wait_until
from .flows import browser_pays, runner, wait_confirmed, wait_for_audit
from .test_own_entry import HEADER, _day, _link_token, _mail, _refunds_at_provider
from .test_switches import _events

pytestmark = pytest.mark.integration

SIZES = [{"id": "M", "label": "Medium", "quantity": 4}, {"id": "L", "label": "Large", "quantity": 4}]


def _race(
    director: Any, api: requests.Session, who: str, prices: tuple[int, ...], cap: int = 10, team_max: int = 8
) -> tuple[str, list[str], Any]:
    kim = director(who)
    body = race_body(tuple(cap for _ in prices))
    for event, price in zip(body["events"], prices, strict=True):
        event |= {"priceCents": price, "teamMinSize": 2, "teamMaxSize": team_max}
    race = kim.post("/api/admin/races", json=body)
    assert race.status_code == 201, race.text
    rid, eids = race.json()["raceId"], [e["eventId"] for e in race.json()["events"]]
    policy = {"runnersMayCancel": True, "tiers": [{"until": _day(30), "percent": 100}], "switchesUntil": _day(20)}
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy}).status_code == 200
    return rid, eids, kim


def _open(kim: Any, api: requests.Session, rid: str) -> None:
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)


def _team(
    api: requests.Session, backend: Any, rid: str, eid: str, n: int, tag: str, shirts: tuple[str, ...] = ()
) -> tuple[list[str], list[dict[str, Any]]]:
    members = [
        runner(f"{tag}{i}.{rid[-6:].lower()}@example.com", token=None)
        | {"firstName": f"{tag.title()}{i}"}
        | ({"answers": {"shirt": shirts[i]}} if shirts else {})
        for i in range(n)
    ]
    team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": n})
    assert team.status_code == 201, team.text
    paid = api.post(
        f"/api/holds/{team.json()['holdId']}/team",
        json={"teamName": f"The {tag.title()}s", "members": members, "paymentMethod": "pm_card_visa"},
    )
    assert paid.status_code == 202, paid.text
    ids = backend.holds().get(team.json()["holdId"]).memberIds
    wait_confirmed(api, ids)
    return ids, members


def test_a_captain_moves_the_whole_team_to_a_dearer_event_with_its_sizes_and_a_member_alone_is_refused(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, (ten, half), kim = _race(director, api, "kim-team-switch", (2500, 4000))
    ask_shirt_sizes(kim, rid, ten, SIZES, required=True)
    ask_shirt_sizes(kim, rid, half, SIZES, required=True)
    _open(kim, api, rid)
    ids, members = _team(api, backend, rid, ten, 3, "crew", ("M", "M", "L"))
    assert stock_taken(kim, rid, ten) == {"M": 2, "L": 1}

    # A member alone: refused, their captain moves the team.
    member = {HEADER: _link_token(stack, members[1]["email"])}
    alone = api.get("/api/my/registration/switch", headers=member).json()
    assert not alone["allowed"] and "captain" in alone["note"], alone
    refused = api.post("/api/my/registration/switch", headers=member, json={"eventId": half})
    assert (refused.status_code, refused.json()["error"]) == (403, "SWITCH_NOT_ALLOWED"), refused.text

    captain = {HEADER: _link_token(stack, members[0]["email"])}
    quote = api.get("/api/my/registration/switch", headers=captain).json()
    assert quote["allowed"], quote
    assert [m["registrationId"] for m in quote["team"]] == ids
    (target,) = quote["targets"]
    assert (target["priceCents"], target["payCents"], target["available"]) == (12000, 4500, True), target

    # Each member's size for the half; one member's missing answer names that member's field.
    answers = [{"answers": {"shirt": s}} for s in ("L", "M", "M")]
    short = api.post("/api/my/registration/switch", headers=captain,
                     json={"eventId": half, "members": [*answers[:2], {"answers": {}}]})  # fmt: skip
    assert short.status_code == 400, short.text
    assert any(f.startswith("members.2.") for f in short.json()["fields"]), short.json()
    moved = api.post(
        "/api/my/registration/switch", headers=captain,
        json={"eventId": half, "members": answers, "paymentMethod": "pm_card_visa"},
    )  # fmt: skip
    assert moved.status_code == 200, moved.text
    assert (moved.json()["status"], moved.json()["eventId"], moved.json()["bib"]) == ("SWITCHED", half, 1)

    regs = [backend.registrations().get(r) for r in ids]
    assert [(r.eventId, r.bib, r.status, r.switches) for r in regs] == [(half, b, "CONFIRMED", 1) for b in (1, 2, 3)]
    assert stock_taken(kim, rid, ten) == {"M": 0, "L": 0}
    assert stock_taken(kim, rid, half) == {"M": 2, "L": 1}
    events = _events(kim, rid)
    assert (events[ten]["confirmed"], events[ten]["switchedOut"]) == (0, 3)
    assert (events[half]["confirmed"], events[half]["switchedIn"]) == (3, 3)
    ledger = kim.get(f"/api/admin/races/{rid}/registrations/{ids[0]}").json()["ledger"]
    assert sorted(e["amountCents"] for e in ledger["entries"] if e["kind"] == "payment") == [2500, 4500]
    for m in members:
        assert wait_until(lambda m=m: _mail(stack, m["email"], "switch-confirmed"), timeout=45)
    again = api.post("/api/my/registration/switch", headers=captain, json={"eventId": half, "members": answers})
    assert (again.status_code, again.json()["status"]) == (200, "SWITCHED")  # a second click: nothing more
    trail = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    (entry,) = [e for e in trail if e["action"] == "registration.switched"]
    assert (entry["target"], entry["actor"]["kind"], entry["details"]["team"]) == (ids[0], "runner", ids)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_team_switch_to_a_cheaper_event_refunds_each_share_and_a_member_cancelling_first_stops_a_paid_one(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, (ten, half, five), kim = _race(director, api, "kim-team-switch-back", (2500, 4000, 1500))
    _open(kim, api, rid)

    # Cheaper: each member's share of the difference back to the team's one payment, at once.
    ids, members = _team(api, backend, rid, half, 3, "gull")
    captain = {HEADER: _link_token(stack, members[0]["email"])}
    done = api.post("/api/my/registration/switch", headers=captain, json={"eventId": five})
    assert done.status_code == 200, done.text
    assert (done.json()["status"], done.json()["refundCents"]) == ("SWITCHED", 7500)
    charge = backend.registrations().get(ids[0]).chargeId
    back = wait_until(
        lambda: len(r := [x for x in _refunds_at_provider(stack, charge) if x["status"] == "succeeded"]) == 3 and r
    )
    assert sorted(int(r["amount"]) for r in back) == [2500, 2500, 2500]
    regs = [backend.registrations().get(r) for r in ids]
    assert [(r.eventId, r.bib, r.ledgerRefundedCents) for r in regs] == [(five, b, 2500) for b in (1, 2, 3)]

    # Dearer, for another team: the captain's card step begins, a member cancels meanwhile, then
    # the difference is paid: nothing moves and the upgrade goes back, once.
    ids2, members2 = _team(api, backend, rid, ten, 3, "tern")
    captain2 = {HEADER: _link_token(stack, members2[0]["email"])}
    begun = api.post("/api/my/registration/switch", headers=captain2, json={"eventId": half})
    assert begun.status_code == 200, begun.text
    assert (begun.json()["status"], begun.json()["amountCents"]) == ("PAYMENT_REQUIRED", 4500)
    intent_id = begun.json()["clientSecret"].split("_secret_")[0]
    leaver = {HEADER: _link_token(stack, members2[2]["email"])}
    quote = api.get("/api/my/registration/cancellation", headers=leaver).json()
    cancelled = api.post(
        "/api/my/registration/cancellation", headers=leaver, json={"amountCents": quote["amountCents"]}
    )
    assert cancelled.status_code == 200, cancelled.text
    assert browser_pays(stack, intent_id)["status"] == "succeeded"
    lost = api.post("/api/my/registration/switch/confirm", headers=captain2)
    assert (lost.status_code, lost.json()["error"]) == (409, "SWITCH_GONE"), lost.text
    upgrade_back = wait_until(lambda: [r for r in _refunds_at_provider(stack, intent_id) if r["status"] == "succeeded"])
    assert [int(r["amount"]) for r in upgrade_back] == [4500]
    assert [backend.registrations().get(r).eventId for r in ids2] == [ten, ten, ten]
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations


def test_a_team_whose_move_cannot_fit_in_one_transaction_is_refused_before_anything_is_held(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    # 25 members to a cheaper event: 3 writes each, a refund each, and the rest: over 100.
    rid, (ten, five), kim = _race(director, api, "kim-team-switch-big", (2500, 1500), cap=30, team_max=25)
    _open(kim, api, rid)
    ids, members = _team(api, backend, rid, ten, 25, "big")
    captain = {HEADER: _link_token(stack, members[0]["email"])}
    (target,) = api.get("/api/my/registration/switch", headers=captain).json()["targets"]
    assert not target["available"] and "too large" in target["note"], target
    refused = api.post("/api/my/registration/switch", headers=captain, json={"eventId": five})
    assert (refused.status_code, refused.json()["error"]) == (409, "TEAM_SWITCH_TOO_LARGE"), refused.text
    assert "organiser" in refused.json()["message"]
    assert _events(kim, rid)[five]["confirmed"] == 0
    assert backend.registrations().get(ids[0]).pendingSwitch is None  # nothing held
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
