"""An event's ballot on the real stack (issue 43, slice 2: applying): the director's settings
publish the seed's commitment before the window opens and are fixed once it has; the event takes
no first-come holds; runners apply alone or as a group behind the device token, proof-of-work and
rate limits; one application per address per race's ballot, whatever its spelling and however
many race for it at once; an application counts once its address is confirmed, per day in the
race's zone; withdrawing drops the runner's data and frees the address; no address in the trail."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
from racecap.aws.items import values
from racecap.fairness.work import solve

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold
from .runners import Runner, why

pytestmark = pytest.mark.integration

HEADER = "X-Racecap-Ballot"
CONFIRM = "ballot-confirm"
ZONE = "Europe/Berlin"


def _mail(stack: LocalStack, to: str) -> list[dict[str, Any]]:
    mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
    return [m for m in mail if to in m["to"] and m["tags"].get("kind") == CONFIRM]


def _tokens(stack: LocalStack, to: str, at_least: int = 1) -> list[str]:
    """The tokens in the confirmation emails' links to ``to``, oldest first."""
    found = wait_until(lambda: [m for m in [_mail(stack, to)] if len(m) >= at_least], timeout=45)[0]
    tokens = []
    for message in found:
        (token,) = set(re.findall(r"https?://\S+/#/ballot/(\S+)", message["text"]))
        assert f"#/ballot/{token}" in message["html"] and token.startswith("bal.")
        tokens.append(str(token))
    return tokens


def _iso(at: datetime) -> str:
    return at.isoformat()


def _ballot_race(director: Any, api: requests.Session, opens_in_s: float = 4) -> tuple[str, str, Any, dict[str, Any]]:
    """A race in Berlin with one event of 100 places taking teams of 2 to 4, its ballot opening soon."""
    kim = director("kim-ballot")
    body = race_body((100,), timeZone=ZONE)
    body["events"][0] |= {"teamMinSize": 2, "teamMaxSize": 4}
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    assert kim.patch(f"/api/admin/races/{rid}/fairness", json={"powDifficulty": 2}).status_code == 200
    now = datetime.now(UTC)
    local_draw = (now + timedelta(days=4)).astimezone(ZoneInfo(ZONE)).replace(tzinfo=None, second=0, microsecond=0)
    settings = {
        "opensAt": _iso(now + timedelta(seconds=opens_in_s)),
        "closesAt": _iso(now + timedelta(days=3)),
        "drawAt": local_draw.isoformat(),  # without an offset: the race's local time (Berlin)
        "keptPlaces": 10,
        "payDays": 5,
    }
    saved = kim.put(f"/api/admin/races/{rid}/events/{eid}/ballot", json=settings)
    assert saved.status_code == 200, saved.text
    stored = datetime.fromisoformat(saved.json()["settings"]["drawAt"])
    assert stored == local_draw.replace(tzinfo=ZoneInfo(ZONE)), (stored, local_draw)
    return rid, eid, kim, saved.json()


def _apply(
    api: requests.Session, rid: str, eid: str, email: str, who: Runner | None = None, **more: Any
) -> requests.Response:
    who = who or Runner(api)
    ch = who.challenge(rid)
    body = {"email": email, "firstName": "Ada", "lastName": "Lovelace", "dateOfBirth": "1990-05-01",
            "challenge": ch["challenge"], "nonce": solve(ch["challenge"], ch["difficulty"])} | more  # fmt: skip
    return who.call("POST", f"/api/races/{rid}/events/{eid}/ballot", json=body)


def _confirm(api: requests.Session, token: str) -> requests.Response:
    return api.post("/api/ballot/confirm", json={"token": token})


def _counted(kim: Any, rid: str, eid: str) -> dict[str, Any]:
    return dict(kim.get(f"/api/admin/races/{rid}/events/{eid}/ballot").json())


def _open(api: requests.Session, rid: str) -> None:
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["events"][0]["ballot"]["phase"] == "OPEN", timeout=20)


def test_settings_publish_the_commitment_then_runners_apply_confirm_and_withdraw_one_application_per_address(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    rid, eid, kim, saved = _ballot_race(director, api, opens_in_s=6)
    tag = rid[-6:].lower()
    commitment = saved["settings"]["commitment"]
    assert re.fullmatch(r"[0-9a-f]{64}", commitment) and saved["phase"] == "UPCOMING" and saved["places"] == 90
    # The race page shows the commitment before the window opens; saving again keeps it.
    shown = api.get(f"/api/races/{rid}").json()["events"][0]["ballot"]
    assert (shown["phase"], shown["commitment"], shown["places"], shown["payDays"]) == ("UPCOMING", commitment, 90, 5)
    early = _apply(api, rid, eid, f"early.{tag}@example.com")
    assert (early.status_code, early.json()["error"]) == (409, "BALLOT_CLOSED"), why(early)
    assert "opens" in early.json()["message"]

    _open(api, rid)
    # Places are drawn, never held first-come (even with registration open); the settings are now fixed.
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=10)
    held = hold(api, rid, eid)
    assert (held.status_code, held.json()["error"]) == (409, "BALLOT_ONLY"), why(held)
    late_edit = kim.put(
        f"/api/admin/races/{rid}/events/{eid}/ballot",
        json={k: saved["settings"][k] for k in ("opensAt", "closesAt", "drawAt")} | {"keptPlaces": 0},
    )
    assert (late_edit.status_code, late_edit.json()["error"]) == (409, "BALLOT_STARTED")

    # Alone: the link confirms the address; only then does the application count.
    ann = f"ann.{tag}@example.com"
    assert _apply(api, rid, eid, ann).status_code == 202
    (token,) = _tokens(stack, ann)
    pending = api.get("/api/ballot/me", headers={HEADER: token}).json()
    assert (pending["state"], pending["ballot"], pending["groupId"]) == ("PENDING", "OPEN", None)
    assert _counted(kim, rid, eid)["confirmed"] == 0
    confirmed = _confirm(api, token)
    assert (confirmed.status_code, confirmed.json()["state"]) == (200, "CONFIRMED"), why(confirmed)
    assert _confirm(api, token).json()["state"] == "CONFIRMED"  # a second click: the same
    # The same address in another spelling: the same 202 and no second application (its link goes
    # again, at most once in ten minutes: here it went a moment ago, so no second email either).
    again = _apply(api, rid, eid, f"  ANN.{tag.upper()}@Example.COM ")
    assert again.status_code == 202, why(again)
    today = datetime.now(ZoneInfo(ZONE)).date().isoformat()
    figures = _counted(kim, rid, eid)
    assert (figures["confirmed"], figures["withdrawn"], figures["byDay"]) == (1, 0, [{"day": today, "applications": 1}])

    # A group of three: drawn together, each address confirmed by its own runner.
    lead, bo, cy = (f"{n}.{tag}@example.com" for n in ("lead", "bo", "cy"))
    partners = [
        {"email": bo, "firstName": "Bo", "lastName": "Lee", "dateOfBirth": "1992-01-31"},
        {"email": cy, "firstName": "Cy", "lastName": "Lee", "dateOfBirth": "1985-12-01"},
    ]
    assert _apply(api, rid, eid, lead, partners=partners).status_code == 202
    group = set()
    for address in (lead, bo, cy):
        (t,) = _tokens(stack, address)
        mine = _confirm(api, t).json()
        assert (mine["state"], mine["groupSize"]) == ("CONFIRMED", 3)
        group.add(mine["groupId"])
    assert len(group) == 1 and None not in group
    assert "Ada" in _mail(stack, bo)[0]["text"]  # a partner is told who applied for them
    assert _counted(kim, rid, eid)["confirmed"] == 4

    # Refusals change nothing: a group with an address that applied, one too young, one too large.
    dee = f"dee.{tag}@example.com"
    taken = _apply(api, rid, eid, dee, partners=[{**partners[0], "email": ann.upper()}])
    assert (taken.status_code, taken.json()["error"]) == (409, "BALLOT_ALREADY_APPLIED"), why(taken)
    young = (datetime.now(UTC) - timedelta(days=400)).date().isoformat()
    baby = _apply(
        api, rid, eid, dee, partners=[{**partners[0], "email": f"kid.{tag}@example.com", "dateOfBirth": young}]
    )
    assert (baby.status_code, list(baby.json()["fields"])) == (400, ["partners.0.dateOfBirth"]), why(baby)
    crowd = [{**partners[0], "email": f"p{i}.{tag}@example.com"} for i in range(4)]
    too_many = _apply(api, rid, eid, dee, partners=crowd)
    assert (too_many.status_code, list(too_many.json()["fields"])) == (400, ["partners"]), why(too_many)
    assert _apply(api, rid, eid, dee).status_code == 202  # the address was never taken by the refusals
    assert len(_tokens(stack, dee)) == 1

    # Withdrawing: the data goes at once, the count falls, the address may apply again.
    assert api.delete("/api/ballot/me", headers={HEADER: token}).status_code == 204
    assert api.delete("/api/ballot/me", headers={HEADER: token}).status_code == 204  # safe to repeat
    gone = api.get("/api/ballot/me", headers={HEADER: token}).json()
    assert (gone["state"], gone["firstName"]) == ("WITHDRAWN", None)
    figures = _counted(kim, rid, eid)
    assert (figures["confirmed"], figures["withdrawn"], figures["byDay"]) == (3, 1, [{"day": today, "applications": 3}])
    assert _apply(api, rid, eid, ann).status_code == 202
    both = {api.get("/api/ballot/me", headers={HEADER: t}).json()["applicationId"] for t in _tokens(stack, ann, 2)}
    assert len(both) == 2 and pending["applicationId"] in both  # a new application beside the withdrawn one

    # The director's export: every application, whatever its state; no runner's data once withdrawn.
    export = kim.get(f"/api/admin/races/{rid}/events/{eid}/ballot/export")
    assert export.status_code == 200 and export.headers["Content-Type"].startswith("text/csv"), export.text
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert Counter(r["state"] for r in rows) == {"CONFIRMED": 3, "PENDING": 2, "WITHDRAWN": 1}
    (gone_row,) = [r for r in rows if r["state"] == "WITHDRAWN"]
    assert (gone_row["email"], gone_row["dateOfBirth"], gone_row["applicationId"]) == ("", "", pending["applicationId"])
    assert len({r["groupId"] for r in rows if r["groupId"]}) == 1 and sum(1 for r in rows if r["groupId"]) == 3

    assert api.get("/api/ballot/me").status_code == 401
    assert api.get("/api/ballot/me", headers={HEADER: token[:-3] + "abc"}).json()["error"] == "INVALID_TOKEN"
    trail = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    assert "event.ballot" in {e["action"] for e in trail} and "@" not in repr(trail)
    assert "seed" not in repr(trail)  # the commitment is public; the seed stays secret until the draw


def test_two_spellings_of_one_address_racing_each_other_make_one_application(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, _, _ = _ballot_race(director, api)
    tag = rid[-6:].lower()
    _open(api, rid)
    addresses = [f"racer{i}.{tag}@example.com" for i in range(25)]
    sent = [(a, Runner(api)) for a in addresses] + [(f" {a.upper()}", Runner(api)) for a in addresses]
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda s: _apply(api, rid, eid, s[0], s[1]), sent))
    assert {a.status_code for a in answers} == {202}, [why(a) for a in answers if a.status_code != 202][:3]
    from racecap.aws.keys import BALLOT_APP_SHARDS, ballot_app_pk

    apps = []
    for shard in range(BALLOT_APP_SHARDS):
        apps += backend.dynamodb.query(
            TableName=backend.table("Inventory"),
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=values({":pk": ballot_app_pk(rid, eid, shard)}),
        )["Items"]
    emails = sorted(i["email"]["S"] for i in apps)
    assert emails == sorted(addresses), emails


def test_applying_is_behind_the_device_proof_of_work_and_rate_limits(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    rid, eid, _, _ = _ballot_race(director, api)
    tag = rid[-6:].lower()
    _open(api, rid)
    url = f"/api/races/{rid}/events/{eid}/ballot"
    body = {"email": f"bot.{tag}@example.com", "firstName": "B", "lastName": "Ot", "dateOfBirth": "1990-01-01"}
    no_device = Runner(api, device=False).call("POST", url, json=body)
    assert (no_device.status_code, no_device.json()["error"]) == (401, "DEVICE_TOKEN_REQUIRED"), why(no_device)
    bot = Runner(api)
    no_proof = bot.call("POST", url, json=body)
    assert (no_proof.status_code, no_proof.json()["error"]) == (403, "PROOF_OF_WORK_REFUSED"), why(no_proof)
    ch = bot.challenge(rid)
    solved = body | {"challenge": ch["challenge"], "nonce": solve(ch["challenge"], ch["difficulty"])}
    assert bot.call("POST", url, json=solved).status_code == 202
    reused = bot.call("POST", url, json=solved | {"email": f"bot2.{tag}@example.com"})
    assert (reused.status_code, reused.json()["error"]) == (403, "PROOF_OF_WORK_REFUSED"), why(reused)
    answers = [_apply(api, rid, eid, f"spam{i}.{tag}@example.com", bot) for i in range(3)]
    assert answers[-1].status_code == 429 and int(answers[-1].headers["Retry-After"]) >= 1, [why(a) for a in answers]
    for bad in (
        {"firstName": ""},
        {"dateOfBirth": "01/05/1990"},
        {"dateOfBirth": "2999-01-01"},
    ):
        answer = _apply(api, rid, eid, f"x.{tag}@example.com", **bad)
        assert (answer.status_code, answer.json()["error"]) == (400, "VALIDATION_ERROR"), (bad, why(answer))
    # The same address twice in one group: the second has "applied already" (no schema can say it).
    same = {"email": f" X.{tag}@example.com", "firstName": "B", "lastName": "O", "dateOfBirth": "1990-01-01"}
    twice = _apply(api, rid, eid, f"x.{tag}@example.com", partners=[same])
    assert (twice.status_code, twice.json()["error"]) == (409, "BALLOT_ALREADY_APPLIED"), why(twice)
    unreadable = _apply(api, rid, eid, "not-an-address")
    assert (unreadable.status_code, unreadable.json()["error"]) == (400, "VALIDATION_ERROR"), why(unreadable)
    none = _apply(api, rid, "evt_nope", f"y.{tag}@example.com")
    assert (none.status_code, none.json()["error"]) == (404, "EVENT_NOT_FOUND")


def test_from_applying_to_the_result_through_the_api_each_runner_sees_won_or_their_number(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    """Applied and confirmed in the window, drawn on schedule: each application's page shows its result."""
    kim = director("kim-ballot-result-api")
    body = race_body((2,), timeZone=ZONE)
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    assert kim.patch(f"/api/admin/races/{rid}/fairness", json={"powDifficulty": 2}).status_code == 200
    now = datetime.now(UTC)
    settings = {"opensAt": _iso(now + timedelta(seconds=3)), "closesAt": _iso(now + timedelta(seconds=30)),
                "drawAt": _iso(now + timedelta(seconds=31))}  # fmt: skip
    assert kim.put(f"/api/admin/races/{rid}/events/{eid}/ballot", json=settings).status_code == 200
    _open(api, rid)
    tag = rid[-6:].lower()
    tokens = []
    for n in range(5):
        email = f"res{n}.{tag}@example.com"
        assert _apply(api, rid, eid, email).status_code == 202
        (token,) = _tokens(stack, email)
        assert _confirm(api, token).json()["state"] == "CONFIRMED"
        tokens.append(token)
    assert datetime.now(UTC) < now + timedelta(seconds=30), "the five applications took longer than the window"
    wait_until(lambda: api.get(f"/api/races/{rid}/events/{eid}/ballot/draw").status_code == 200, timeout=90, every=1)

    def results() -> list[tuple[str | None, int | None]]:
        mine = [api.get("/api/ballot/me", headers={HEADER: t}).json() for t in tokens]
        return [(m["result"], m["waitlistNumber"]) for m in mine]

    seen = wait_until(lambda: [r for r in [results()] if all(x for x, _ in r)], timeout=60, every=1)[0]
    assert sorted(seen, key=lambda r: (r[0], r[1] or 0)) == [
        ("WAITLIST", 1), ("WAITLIST", 2), ("WAITLIST", 3), ("WON", None), ("WON", None),
    ]  # fmt: skip
    won = next(t for t, r in zip(tokens, seen, strict=True) if r[0] == "WON")
    assert "you have a place" in api.get("/api/ballot/me", headers={HEADER: won}).json()["message"]
    # After the close, an application can no longer be withdrawn: it is in the draw.
    late = api.delete("/api/ballot/me", headers={HEADER: won})
    assert (late.status_code, late.json()["error"]) == (409, "BALLOT_CLOSED")


def test_an_application_answers_the_events_questions_each_runner_their_own(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    """The event's questions are asked at apply as at registration: required ones answered, each
    partner's errors under their own path, the answers kept with the application, shown to the
    runner and in the director's export (the waiver and any option's stock come at registration)."""
    rid, eid, kim, _ = _ballot_race(director, api)
    tag = rid[-6:].lower()
    shirt = {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "required": True,
             "options": [{"id": "S", "label": "Small"}, {"id": "M", "label": "Medium", "quantity": 1}]}  # fmt: skip
    pace = {"id": "pace", "kind": "SHORT_TEXT", "label": "Expected finish time", "maxLength": 10}
    saved = kim.put(f"/api/admin/races/{rid}/events/{eid}/questions", json={"questions": [shirt, pace]})
    assert saved.status_code == 200, saved.text
    _open(api, rid)

    lead, bo = f"lead.{tag}@example.com", f"bo.{tag}@example.com"
    unanswered = _apply(api, rid, eid, lead)
    assert (unanswered.status_code, list(unanswered.json()["fields"])) == (400, ["answers.shirt"]), why(unanswered)
    partner = {"email": bo, "firstName": "Bo", "lastName": "Lee", "dateOfBirth": "1992-01-31"}
    theirs = _apply(api, rid, eid, lead, answers={"shirt": "M"}, partners=[partner | {"answers": {"shirt": "XXL"}}])
    assert (theirs.status_code, list(theirs.json()["fields"])) == (400, ["partners.0.answers.shirt"]), why(theirs)
    assert _mail(stack, lead) == []  # refused whole: nothing written, no email

    # The option with one left is no limit here: stock is taken at registration, by the winners.
    both = _apply(
        api, rid, eid, lead, answers={"shirt": "M", "pace": "3:45"}, partners=[partner | {"answers": {"shirt": "M"}}]
    )
    assert both.status_code == 202, why(both)
    (token,) = _tokens(stack, lead)
    mine = _confirm(api, token).json()
    assert [(a["questionId"], a["text"]) for a in mine["answers"]] == [("shirt", "Medium"), ("pace", "3:45")]

    rows = {
        r["email"]: r
        for r in csv.DictReader(io.StringIO(kim.get(f"/api/admin/races/{rid}/events/{eid}/ballot/export").text))
    }
    assert (rows[lead]["T-shirt [shirt]"], rows[lead]["Expected finish time [pace]"]) == ("Medium", "3:45")
    assert (rows[bo]["T-shirt [shirt]"], rows[bo]["Expected finish time [pace]"]) == ("Medium", "")
