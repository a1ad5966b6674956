"""A ballot's draw on the real stack (issue 43, slice 3): ``BallotDraw`` runs on its schedule once the
draw time has come; the winners fill exactly the places with no group split, and are the event's
waitlist's first numbers with their places pooled; everyone else follows in drawn order; the
published seed and list let ``tools/verify_draw.py`` re-compute the winners; a seed other than the
committed one is refused; a re-run from any step changes nothing and sends no second email;
winners who do not claim in their window are passed over to the next in drawn order (a group, whole,
or passed over whole while it does not fit), and the audit's place accounting holds."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from racecap.aws.items import from_item, query_all, to_item, values
from racecap.aws.keys import (
    BALLOT_DRAW_SK,
    ballot_app_key,
    ballot_claim_key,
    ballot_pk,
    ballot_seed_key,
    key,
    waitlist_line_key,
    waitlist_pk,
)
from racecap.aws.transactions import ConditionFailed
from racecap.ballot.models import Applicant, Application
from racecap.ballot.store import DynamoBallots
from racecap.waitlist.store import batch_write

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import register, runner, wait_for_audit

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _race(director: Any, cap: int, name: str) -> tuple[str, str, Any]:
    kim = director(name)
    body = race_body((cap,))
    body["events"][0] |= {"teamMinSize": 2, "teamMaxSize": 4}
    race = kim.post("/api/admin/races", json=body).json()
    return race["raceId"], race["events"][0]["eventId"], kim


def _ballot(kim: Any, rid: str, eid: str, *, kept: int = 0, pay_days: int = 7) -> dict[str, Any]:
    """Its window opens in a moment and closes a second later; the draw follows at once."""
    now = datetime.now(UTC)
    body = {
        "opensAt": (now + timedelta(seconds=2)).isoformat(),
        "closesAt": (now + timedelta(seconds=3)).isoformat(),
        "drawAt": (now + timedelta(seconds=4)).isoformat(),
        "keptPlaces": kept,
        "payDays": pay_days,
    }
    saved = kim.put(f"/api/admin/races/{rid}/events/{eid}/ballot", json=body)
    assert saved.status_code == 200, saved.text
    return dict(saved.json())


def _applications(backend: Any, rid: str, eid: str, sizes: list[int], tag: str) -> list[Application]:
    """Confirmed applications written straight into the table (the API path is
    test_ballot_apply's): one per size-1 entry, a group of n per size-n entry."""
    apps: list[Application] = []
    for n, size in enumerate(sizes):
        group = f"grp_{tag}{n:05d}" if size > 1 else None
        for m in range(size):
            apps.append(
                Application(
                    applicationId=f"app_{tag}{n:05d}_{m}",
                    raceId=rid,
                    eventId=eid,
                    state="CONFIRMED",
                    email=f"r{n}.{m}.{tag}@example.com",
                    firstName=f"Runner{n}",
                    lastName="Test",
                    dateOfBirth="1990-01-01",
                    groupId=group,
                    groupSize=size,
                    appliedAt="2026-11-01T09:00:00+00:00",
                    confirmedAt="2026-11-01T09:05:00+00:00",
                )
            )
    table = backend.table("Inventory")
    requests_ = []
    for a in apps:
        requests_.append(
            {
                "PutRequest": {
                    "Item": {**ballot_app_key(rid, eid, a.applicationId), **to_item(a.model_dump(exclude_none=True))}
                }
            }
        )
        claim = {"applicationId": a.applicationId, "eventId": eid}
        requests_.append({"PutRequest": {"Item": {**ballot_claim_key(rid, a.email), **to_item(claim)}}})
    for start in range(0, len(requests_), 25):
        batch_write(backend.dynamodb, table, requests_[start : start + 25])
    return apps


def _drawn(api: requests.Session, rid: str, eid: str, timeout: float = 180) -> dict[str, Any]:
    url = f"/api/races/{rid}/events/{eid}/ballot/draw"
    wait_until(lambda: api.get(url).status_code == 200, timeout=timeout, every=1)
    return dict(api.get(url).json())


def _record(backend: Any, rid: str, eid: str) -> dict[str, Any]:
    resp = backend.dynamodb.get_item(
        TableName=backend.table("Inventory"), Key=key(ballot_pk(rid, eid), BALLOT_DRAW_SK), ConsistentRead=True
    )
    return from_item(resp["Item"]) if "Item" in resp else {}


def _done(backend: Any, rid: str, eid: str, timeout: float = 180) -> dict[str, Any]:
    return dict(
        wait_until(
            lambda: [r for r in [_record(backend, rid, eid)] if r.get("state") == "DONE"], timeout=timeout, every=1
        )[0]
    )


def _line(backend: Any, rid: str, eid: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    table = backend.table("Inventory")
    line = from_item(
        backend.dynamodb.get_item(TableName=table, Key=waitlist_line_key(rid, eid), ConsistentRead=True)["Item"]
    )
    entries = list(
        query_all(
            backend.dynamodb,
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
            ExpressionAttributeValues=values({":pk": waitlist_pk(rid, eid), ":e": "ENTRY#"}),
            ConsistentRead=True,
        )
    )
    return line, sorted(entries, key=lambda e: int(e["seq"]))


def _taken(backend: Any, rid: str, eid: str) -> int:
    items = query_all(
        backend.dynamodb,
        TableName=backend.table("Inventory"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues=values({":pk": f"CAP#{rid}#{eid}"}),
        ConsistentRead=True,
    )
    return sum(int(i["taken"]) for i in items)


def _rerun_from_the_start_of_the_line(backend: Any, rid: str, eid: str, draw_at: str) -> None:
    """As if the job had stopped right after ordering: its cursor back to 0, the ballot due again."""
    table = backend.table("Inventory")
    backend.dynamodb.update_item(
        TableName=table,
        Key=key(ballot_pk(rid, eid), BALLOT_DRAW_SK),
        UpdateExpression="SET #s = :ordered, lined = :zero REMOVE doneAt",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues=values({":ordered": "ORDERED", ":zero": 0}),
    )
    DynamoBallots(backend.dynamodb, table).schedule(rid, eid, draw_at)


def test_each_runner_gets_one_result_email_and_an_unclaimed_winners_place_passes_down_the_drawn_order(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, kim = _race(director, 5, "kim-ballot-result")
    tag = rid[-5:].lower()
    apps = _applications(backend, rid, eid, [1, 1, 2, 1, 3, 1, 1, 1], tag)  # 11 runners, 8 tickets, 5 places
    kim.open_now(rid)  # winners register and pay while registration is open
    saved = _ballot(kim, rid, eid)
    _done(backend, rid, eid)
    _, entries = _line(backend, rid, eid)
    assert len(entries) == 11
    winners = {e["email"] for e in entries if int(e["seq"]) <= 5}
    assert len(winners) == 5

    def mail() -> list[dict[str, Any]]:
        got = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in got if tag in m["to"][0] and m["tags"].get("kind") in ("waitlist-offer", "ballot-result")]

    # Everyone gets one result: the winners their offer (as "you have a place"), the rest their number.
    wait_until(lambda: len(mail()) >= 11, timeout=90, every=1)
    first = mail()
    kinds = {m["to"][0]: m["tags"]["kind"] for m in first}
    assert Counter(m["to"][0] for m in first) == Counter({a.email: 1 for a in apps})
    assert {to for to, k in kinds.items() if k == "waitlist-offer"} == winners
    offer_mail = next(m for m in first if m["tags"]["kind"] == "waitlist-offer")
    assert "ballot drew you" in offer_mail["subject"]
    numbers = sorted(
        int(m["subject"].rsplit("number ", 1)[1].split()[0]) for m in first if m["tags"]["kind"] == "ballot-result"
    )
    assert numbers == [1, 2, 3, 4, 5, 6]

    # A re-run sends nothing twice.
    _rerun_from_the_start_of_the_line(backend, rid, eid, saved["settings"]["drawAt"])
    _done(backend, rid, eid)
    time.sleep(6)
    assert len(mail()) == 11

    # A winner's window ends unclaimed: the place goes to number 1 on the waitlist (drawn order).
    table = backend.table("Inventory")
    offers = list(
        query_all(
            backend.dynamodb,
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :o)",
            ExpressionAttributeValues=values({":pk": waitlist_pk(rid, eid), ":o": "OFFER#"}),
            ConsistentRead=True,
        )
    )
    lone = next(o for o in offers if not next(e for e in entries if e["entryId"] == o["entryId"]).get("groupId"))
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    backend.dynamodb.update_item(
        TableName=table,
        Key=key(waitlist_pk(rid, eid), f"OFFER#{lone['entryId']}"),
        UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
        ExpressionAttributeValues=values({":t": past}),
    )
    # The next ticket in drawn order that one place fits: a group ahead of it is passed over whole.
    behind = [e for e in entries if int(e["seq"]) > 5]
    sizes = Counter(e.get("groupId") or e["entryId"] for e in behind)
    next_up = next((e for e in behind if sizes[e.get("groupId") or e["entryId"]] == 1), None)
    if next_up is not None:
        wait_until(
            lambda: any(m["to"][0] == next_up["email"] and m["tags"]["kind"] == "waitlist-offer" for m in mail()),
            timeout=60,
            every=1,
        )
    else:  # only groups wait: the place stays pooled for the first group it fits
        wait_until(lambda: int(_line(backend, rid, eid)[0].get("pool", 0)) == 1, timeout=60, every=1)
    ahead = {e["email"] for e in behind if next_up is None or int(e["seq"]) < int(next_up["seq"])}
    assert not any(m["to"][0] in ahead and m["tags"]["kind"] == "waitlist-offer" for m in mail())
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.summary()


def test_a_seed_other_than_the_committed_one_is_refused_and_nothing_is_drawn(
    director: Any, api: requests.Session, backend: Any
) -> None:
    rid, eid, kim = _race(director, 10, "kim-ballot-seed")
    _applications(backend, rid, eid, [1, 2, 1], rid[-5:].lower())
    saved = _ballot(kim, rid, eid)
    backend.dynamodb.update_item(  # the stored seed swapped after the commitment was published
        TableName=backend.table("Inventory"),
        Key=ballot_seed_key(rid, eid),
        UpdateExpression="SET seed = :other",
        ExpressionAttributeValues=values({":other": "ab" * 32}),
    )
    time.sleep(8)  # the draw time passes and the job runs (every 3 s in tests), refusing each time
    assert api.get(f"/api/races/{rid}/events/{eid}/ballot/draw").json()["error"] == "BALLOT_NOT_DRAWN"
    assert saved["settings"]["commitment"] != ""
    assert _taken(backend, rid, eid) == 0


def test_ten_thousand_applications_for_a_thousand_places_drawn_verifiably_and_idempotently(
    director: Any, api: requests.Session, backend: Any, tmp_path: Path
) -> None:
    rid, eid, kim = _race(director, 1000, "kim-ballot-draw")
    rng = random.Random(43)
    sizes: list[int] = []
    while sum(sizes) < 3000:  # 30 % of the applications in groups of 2 to 4
        sizes.append(rng.randint(2, 4))
    sizes += [1] * (10_000 - sum(sizes))
    rng.shuffle(sizes)
    apps = _applications(backend, rid, eid, sizes, rid[-5:].lower())
    assert len(apps) == 10_000
    # 200 of them applied a second time, in another spelling: refused by their address's claim.
    store = DynamoBallots(backend.dynamodb, backend.table("Inventory"))
    refused = 0
    for a in rng.sample(apps, 200):
        spelled = Applicant(email=f"  {a.email.upper()} ", firstName="A", lastName="B", dateOfBirth="1990-01-01")
        twice = a.model_copy(update={"applicationId": f"{a.applicationId}_again", "state": "PENDING", "groupId": None,
                                     "email": spelled.email, "ttl": int(time.time()) + 3600})  # fmt: skip
        try:
            store.put_pending([twice], int(time.time()))
        except ConditionFailed:
            refused += 1
    assert refused == 200

    saved = _ballot(kim, rid, eid)
    commitment = saved["settings"]["commitment"]
    started = time.monotonic()
    drawn = _drawn(api, rid, eid)
    record = _done(backend, rid, eid)
    took = time.monotonic() - started
    groups = sum(1 for s in sizes if s > 1)
    assert (drawn["applications"], drawn["places"], drawn["winners"]) == (10_000, 1000, 1000), drawn
    assert drawn["tickets"] == sizes.count(1) + groups
    assert drawn["commitment"] == commitment and len(drawn["seed"]) == 64

    # The line: the winners are numbers 1 to 1000, every group side by side and never split.
    line, entries = _line(backend, rid, eid)
    assert (int(line["seq"]), int(line["waiting"]), int(line["pool"]), int(line["head"])) == (10_000, 10_000, 1000, 0)
    assert [int(e["seq"]) for e in entries] == list(range(1, 10_001))
    won = [e for e in entries if int(e["seq"]) <= 1000]
    by_group: dict[str, set[bool]] = {}
    for e in entries:
        if e.get("groupId"):
            by_group.setdefault(e["groupId"], set()).add(int(e["seq"]) <= 1000)
    assert all(len(sides) == 1 for sides in by_group.values()), "a group was split"
    assert _taken(backend, rid, eid) == 1000  # the winners' places pooled: sold out to the public
    assert len({e["email"] for e in entries}) == 10_000  # one entry per address

    # Anyone can re-compute the winners from the published seed and list.
    pages = [
        api.get(f"/api/races/{rid}/events/{eid}/ballot/list", params={"page": p}) for p in range(drawn["listPages"])
    ]
    assert all(p.status_code == 200 and p.headers["Content-Type"].startswith("text/csv") for p in pages)
    listed = tmp_path / "list.csv"
    listed.write_text("".join(p.text for p in pages))
    assert "@" not in listed.read_text()
    script = [sys.executable, str(ROOT / "tools" / "verify_draw.py"), "--commitment", commitment, "--places", "1000"]
    out = subprocess.run([*script, "--seed", drawn["seed"], str(listed)], capture_output=True, text=True, check=True)
    rows = [r.split(",") for r in out.stdout.splitlines()[1:]]
    verified_winners = {ticket for _, ticket, _, result in rows if result == "won"}
    ours = {e.get("groupId") or e["ballotApplicationId"] for e in won}
    assert verified_winners == ours and len(rows) == drawn["tickets"]
    other_seed = "0" * 64
    refused_seed = subprocess.run(
        [*script, "--seed", other_seed, str(listed)], check=False, capture_output=True, text=True
    )
    assert refused_seed.returncode == 1 and "REFUSED" in refused_seed.stdout + refused_seed.stderr

    # A re-run from the line's first page writes the same and moves no place twice.
    _rerun_from_the_start_of_the_line(backend, rid, eid, saved["settings"]["drawAt"])
    again = _done(backend, rid, eid)
    assert (again["drawnAt"], again["seed"], again["winners"]) == (record["drawnAt"], record["seed"], 1000)
    line_again, entries_again = _line(backend, rid, eid)
    assert (int(line_again["pool"]), int(line_again["waiting"])) == (1000, 10_000)
    assert [(e["seq"], e["entryId"]) for e in entries_again] == [(e["seq"], e["entryId"]) for e in entries]
    assert _taken(backend, rid, eid) == 1000
    # The 9,000 results (sent at the local SES stand-in's rate) would hold up every later test's
    # email on this stack for minutes: their sending is test_each_runner_gets_one_result_email's.
    backend.sqs.purge_queue(QueueUrl=backend.stack.queue_urls["Emails"])
    print(f"ballot draw of 10,000 applications: {took:.1f} s to DONE (order, 10,000 entries, 9,000 results queued)")


def test_guaranteed_entries_take_the_kept_places_once_the_ballot_is_drawn_and_keep_their_code(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    """Six places: four drawn among eight applications, two kept for guaranteed entries (a charity's
    code). Nobody else holds a place first-come; the code holds one only once the draw has moved
    the winners' places, never more than the kept ones, and the place keeps its code."""
    rid, eid, kim = _race(director, 6, "kim-ballot-kept")
    tag = rid[-5:].lower()
    _applications(backend, rid, eid, [1] * 8, tag)
    kim.open_now(rid)
    for body in (
        {"code": "CHARITY-RUN", "kind": "PERCENT", "percent": 100, "maxUses": 5, "guaranteed": True, "eventIds": [eid]},
        {"code": "SPRING10", "kind": "PERCENT", "percent": 10},
    ):
        made = kim.post(f"/api/admin/races/{rid}/codes", json=body)
        assert made.status_code == 201, made.text
    _ballot(kim, rid, eid, kept=2)
    url = f"/api/races/{rid}/events/{eid}/holds/guaranteed"

    early = api.post(url, json={"code": "CHARITY-RUN"})  # the draw is seconds away: not yet
    assert (early.status_code, early.json()["error"]) == (409, "KEPT_PLACES_NOT_OPEN"), early.text
    _done(backend, rid, eid)
    assert _taken(backend, rid, eid) == 4  # the winners' places moved to the line; the kept two are free

    assert api.post(f"/api/races/{rid}/events/{eid}/holds").json()["error"] == "BALLOT_ONLY"
    discount = api.post(url, json={"code": "SPRING10"})
    assert (discount.status_code, discount.json()["error"]) == (400, "CODE_INVALID")
    assert api.post(url, json={"code": "NOPE-123"}).status_code == 404
    assert _taken(backend, rid, eid) == 4  # refused before any place was taken

    first = api.post(url, json={"code": " charity-run "})
    assert first.status_code == 201, first.text
    assert (first.json()["priceCents"], first.json()["eventId"]) == (0, eid)
    hold_id = first.json()["holdId"]
    view = api.get(f"/api/holds/{hold_id}").json()
    assert view["code"] == "CHARITY-RUN"
    # The place keeps its code: not removed, not swapped for a discount.
    for attempt in (
        api.delete(f"/api/holds/{hold_id}/code"),
        api.put(f"/api/holds/{hold_id}/code", json={"code": "SPRING10"}),
    ):
        assert (attempt.status_code, attempt.json()["error"]) == (409, "CODE_REQUIRED"), attempt.text
    assert api.get(f"/api/holds/{hold_id}").json()["code"] == "CHARITY-RUN"

    second = api.post(url, json={"code": "CHARITY-RUN"})
    assert second.status_code == 201, second.text
    third = api.post(url, json={"code": "CHARITY-RUN"})  # both kept places are held: the code has uses, not places
    assert (third.status_code, third.json()["error"]) == (409, "SOLD_OUT"), third.text

    # A kept place given back goes back to the kept places, not to the ballot's line.
    line_before, _ = _line(backend, rid, eid)
    assert api.delete(f"/api/holds/{second.json()['holdId']}").status_code == 204
    line_after, _ = _line(backend, rid, eid)
    assert int(line_after.get("pool", 0)) == int(line_before.get("pool", 0))
    assert _taken(backend, rid, eid) == 5
    again = wait_until(lambda: [r for r in [api.post(url, json={"code": "CHARITY-RUN"})] if r.status_code == 201],
                       timeout=15, every=1)  # fmt: skip
    assert again

    registered = register(api, hold_id, runner(token=None))  # the charity's runner: a free entry
    assert (registered.status_code, registered.json()["status"]) == (202, "QUEUED"), registered.text
    uses = {c["code"]: c["uses"] for c in kim.get(f"/api/admin/races/{rid}/codes").json()["codes"]}
    assert uses["CHARITY-RUN"] == 2  # the third's refusal and the release gave their uses back
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.summary()
