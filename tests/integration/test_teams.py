"""Team entries on the real stack: a captain holds a team's places together across the cap's
shards (all or none), pays once for every member, and each member is a registration of their
own — bib, email, and a share of the one payment that a cancellation refunds alone."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests
from racecap.aws.items import values
from racecap.aws.keys import shard_key

from local.stack import LocalStack

from .admin import ask_shirt_sizes, race_body, wait_until
from .flows import intents_for, register, runner, standin, wait_confirmed, wait_for_audit

pytestmark = pytest.mark.integration


def _team_race(director: Any, api: requests.Session, cap: int, sizes: tuple[int, int] = (2, 8)) -> tuple[Any, str, str]:
    kim = director(f"kim-team-{uuid.uuid4().hex[:6]}")
    body = race_body((cap,))
    body["events"][0] |= {"teamMinSize": sizes[0], "teamMaxSize": sizes[1], "priceCents": 2500}
    race = kim.post("/api/admin/races", json=body)
    assert race.status_code == 201, race.text
    rid, eid = race.json()["raceId"], race.json()["events"][0]["eventId"]
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    return kim, rid, eid


def _leave(backend: Any, rid: str, eid: str, left: list[int]) -> None:
    """Other runners' places, arranged: shard n keeps ``left[n]`` of its places free."""
    for n, free in enumerate(left):
        backend.dynamodb.update_item(
            TableName=backend.table("Inventory"),
            Key=shard_key(rid, eid, f"SHARD#{n:03d}"),
            UpdateExpression="SET taken = cap - :free",
            ExpressionAttributeValues=values({":free": free}),
        )


def _members(n: int, rid: str) -> list[dict[str, str]]:
    tag = rid[-6:].lower()
    return [runner(f"member{i}.{tag}@example.com", token=None) | {"firstName": f"Member{i}"} for i in range(n)]


def test_a_team_of_six_takes_two_places_on_each_of_three_shards_and_five_left_is_not_sold_out(
    director: Any, api: requests.Session, backend: Any
) -> None:
    kim, rid, eid = _team_race(director, api, cap=75, sizes=(2, 8))  # three shards of 25
    page = api.get(f"/api/races/{rid}").json()["events"][0]
    assert (page["teamMinSize"], page["teamMaxSize"]) == (2, 8)

    _leave(backend, rid, eid, [2, 2, 1])  # five places left, on three shards
    short = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": 6})
    assert short.status_code == 409 and short.json()["error"] == "NOT_ENOUGH_PLACES", short.text
    assert "Only 5 places" in short.json()["message"]
    # Nothing was taken, and the event is not sold out: a single runner still gets a place.
    assert [s["taken"] for s in backend.inventory().usage(rid, eid, consistent=True).shards] == [23, 23, 24]
    api.headers.pop("X-Racecap-Device", None)
    assert api.get(f"/api/races/{rid}").json()["events"][0]["status"] != "SOLD_OUT"
    single = api.post(f"/api/races/{rid}/events/{eid}/holds")
    assert single.status_code == 201, single.text
    assert api.delete(f"/api/holds/{single.json()['holdId']}").status_code in (200, 204)

    _leave(backend, rid, eid, [2, 2, 2])  # six left: two on each shard
    # Held is every place taken and not confirmed: the ones this test took directly count too.
    held_before = kim.get(f"/api/admin/races/{rid}/stats").json()["events"][0]["held"]
    team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": 6})
    assert team.status_code == 201, team.text
    assert (team.json()["places"], team.json()["totalCents"]) == (6, 6 * 2500)
    assert [s["taken"] for s in backend.inventory().usage(rid, eid, consistent=True).shards] == [25, 25, 25]
    held = backend.holds().get(team.json()["holdId"])
    assert (held.places, held.shardTakes) == (6, {"SHARD#000": 2, "SHARD#001": 2, "SHARD#002": 2})
    view = api.get(f"/api/holds/{held.holdId}").json()
    assert (view["places"], view["status"], view["priceCents"]) == (6, "HELD", 2500)

    # The director's live figures count the team's six places as held (once their cache of up
    # to two seconds has moved on).
    def held_now() -> int:
        stats = kim.get(f"/api/admin/races/{rid}/stats")
        assert stats.status_code == 200, stats.text
        return int(stats.json()["events"][0]["held"])

    wait_until(lambda: held_now() - held_before == 6, timeout=10)

    # Released, all six places come back together.
    assert api.delete(f"/api/holds/{held.holdId}").status_code in (200, 204)
    assert [s["taken"] for s in backend.inventory().usage(rid, eid, consistent=True).shards] == [23, 23, 23]

    # Sizes outside the event's range are refused, naming the field.
    for places in (1, 9):
        bad = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": places})
        assert bad.status_code == 400 and "places" in bad.json().get("fields", {}), bad.text


def test_a_team_of_four_pays_once_and_is_four_registrations_and_one_members_cancellation_refunds_their_share(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    kim, rid, eid = _team_race(director, api, cap=10, sizes=(3, 6))
    members = _members(4, rid)

    # Member 3's email is registered already: the team is told which member, nothing is charged.
    taken = api.post(f"/api/races/{rid}/events/{eid}/holds")
    assert register(api, taken.json()["holdId"], runner(members[2]["email"])).status_code == 202
    team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": 4})
    assert team.status_code == 201, team.text
    hold_id = team.json()["holdId"]
    body = {"teamName": "Harbour Harriers", "members": members, "paymentMethod": "pm_card_visa"}
    clash = api.post(f"/api/holds/{hold_id}/team", json=body)
    assert clash.status_code == 409 and clash.json()["error"] == "EMAIL_ALREADY_REGISTERED", clash.text
    assert clash.json()["fields"] == {"members.2.email": "Already registered for this race."}
    # Nothing charged: the team's intent came before the claims and is recorded on no hold (the
    # fixed team's send below, the same captain and amount, replays it).
    assert [i["status"] for i in intents_for(stack, hold_id=hold_id)] == ["requires_payment_method"]
    assert api.get(f"/api/holds/{hold_id}").json()["status"] == "HELD"  # the team keeps its places

    # Fixed: one payment for four places, four registrations with their own bibs.
    members[2]["email"] = f"member2b.{rid[-6:].lower()}@example.com"
    paid = api.post(f"/api/holds/{hold_id}/team", json=body)
    assert paid.status_code == 202, paid.text
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert (intent["amount"], intent["status"]) == (4 * 2500, "succeeded")
    captain = paid.json()["registrationId"]
    held = backend.holds().get(hold_id)
    assert held.memberIds[0] == captain and len(set(held.memberIds)) == 4
    confirmed = wait_confirmed(api, held.memberIds)
    assert len({c["bib"] for c in confirmed.values()}) == 4
    regs = [backend.registrations().get(r) for r in held.memberIds]
    assert [r.email for r in regs] == [m["email"] for m in members]
    assert {(r.teamName, r.amountCents, r.chargeId) for r in regs} == {("Harbour Harriers", 2500, intent["id"])}

    # One member cancelled with a full refund: their 25.00 share only, the team's others stay.
    leaver = held.memberIds[1]
    cancelled = kim.post(f"/api/admin/races/{rid}/registrations/{leaver}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["refundedCents"] == 2500
    events = standin(stack).get(f"{stack.stripe_url}/v1/events", params={"type": "refund.created", "limit": 100})
    refunds = [e["data"]["object"] for e in events.json()["data"]]
    assert [r["amount"] for r in refunds if r.get("payment_intent") == intent["id"]] == [2500]
    wait_until(lambda: backend.registrations().get(leaver).status == "CANCELLED", timeout=30)
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
    # The refund's webhook changed nothing else: no member flagged or cancelled as refunded outside.
    others = [backend.registrations().get(r) for r in held.memberIds if r != leaver]
    assert [(r.status, r.outsideRefunds) for r in others] == [("CONFIRMED", None)] * 3
    stats = kim.get(f"/api/admin/races/{rid}/stats")
    assert stats.status_code == 200, stats.text
    (event,) = stats.json()["events"]
    assert (event["cancelled"], event["refundedCents"]) == (1, 2500)
    # The director's sheet: each member a row with the team's name and their share paid.
    export = kim.get(f"/api/admin/races/{rid}/registrations/export").text.splitlines()
    header = export[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=False)) for line in export[1:]]
    team_rows = [r for r in rows if r["team"]]
    assert sorted(r["email"] for r in team_rows) == sorted(m["email"] for i, m in enumerate(members) if i != 1)
    assert {(r["team"], r["amountPaid"]) for r in team_rows} == {("Harbour Harriers", "25.00")}


def test_results_rank_teams_by_their_best_times_as_the_director_chose(
    director: Any, api: requests.Session, backend: Any
) -> None:
    from .results import registration_item, results_url, seed_registrations, upload, wait_for_upload

    kim, rid, eid = _team_race(director, api, cap=20, sizes=(2, 4))
    teams = {1: "Gulls", 2: "Gulls", 3: "Gulls", 4: "Terns", 5: "Terns", 6: None}

    def entry(bib: int) -> dict[str, Any]:
        item = registration_item(rid, eid, bib, f"R{bib}", "Lee", "1990-01-01")
        if teams[bib]:
            item["PutRequest"]["Item"]["teamName"] = {"S": str(teams[bib])}
        return item

    seed_registrations(backend, (entry(b) for b in teams))
    sheet = "bib,chip_time,gun_time,status\n1,0:40:00,,\n2,0:50:00,,\n3,0:30:00,,\n4,0:35:00,,\n5,,,DNF\n6,0:20:00,,\n"
    done = wait_for_upload(kim, upload(kim, rid, eid, sheet, teamScoring=2))
    assert done["status"] == "READY", done
    assert kim.post(results_url(rid, eid, "/publish")).json()["published"] is True
    standings = wait_until(
        lambda: (r := api.get(f"/api/races/{rid}/events/{eid}/results/1/teams")).status_code == 200 and r.json(),
        timeout=5,
    )
    assert standings["teamScoring"] == 2
    rows = [(t["place"], t["team"], t["total"]) for t in standings["teams"]]
    assert rows == [(1, "Gulls", "1:10:00"), (None, "Terns", None)]  # Terns: one finisher of the two that count
    gulls = standings["teams"][0]["members"]
    assert [(m["bib"], m["scored"]) for m in gulls] == [(3, True), (1, True), (2, False)]


def test_two_members_choosing_the_same_limited_size_take_two_units_or_are_told_it_is_sold_out(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    # Both units land on one stock shard: one write of two units, held to the shard's cap (a
    # transaction names an item once; naming it twice was a 500, found by the own-entry tests).
    kim, rid, eid = _team_race(director, api, cap=10, sizes=(2, 4))
    ask_shirt_sizes(kim, rid, eid, [{"id": "M", "label": "Medium", "quantity": 3}, {"id": "L", "label": "Large"}])

    def team_of(shirts: tuple[str, ...], tag: str) -> requests.Response:
        members = [m | {"answers": {"shirt": s}} for m, s in zip(_members(len(shirts), rid + tag), shirts, strict=True)]
        team = api.post(f"/api/races/{rid}/events/{eid}/teams", json={"places": len(shirts)}).json()
        body = {"teamName": f"Team {tag}", "members": members, "paymentMethod": "pm_card_visa"}
        return api.post(f"/api/holds/{team['holdId']}/team", json=body)

    def medium_taken() -> int:
        stock = kim.get(f"/api/admin/races/{rid}/events/{eid}/questions").json()["stock"]
        return sum(s["taken"] for s in stock if s["optionId"] == "M")

    first = team_of(("M", "M"), "a")
    assert first.status_code == 202, first.text
    assert medium_taken() == 2
    # One Medium left: a team wanting two is told which member's size is gone, and nothing moved.
    second = team_of(("L", "M", "M"), "b")
    assert second.status_code == 409 and second.json()["error"] == "OPTION_SOLD_OUT", second.text
    assert set(second.json()["fields"]) & {"members.1.answers.shirt", "members.2.answers.shirt"}
    assert medium_taken() == 2
    third = team_of(("M", "L"), "c")
    assert third.status_code == 202, third.text
    assert medium_taken() == 3
    wait_confirmed(api, [first.json()["registrationId"], third.json()["registrationId"]])
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.violations
