"""An event's waitlist on the real stack (issue 40, slice 1): a sold-out event with its list on
takes joins behind the opening queue's device token, proof-of-work and rate limits; joining twice
is one entry, an unconfirmed one does not count, confirmations give join numbers in order (ten at
once, no gaps), places are seq - head, the director's cap refuses the 11th of 10 with a clear 409,
leaving drops the runner's data, and no address lands in the audit trail."""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from racecap.aws.items import values
from racecap.aws.keys import waitlist_line_key
from racecap.fairness.work import solve

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold
from .runners import Runner, why

pytestmark = pytest.mark.integration

HEADER = "X-Racecap-Waitlist"
CONFIRM, JOINED = "waitlist-confirm", "waitlist-joined"


def _mail(stack: LocalStack, to: str, kind: str) -> list[dict[str, Any]]:
    mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
    return [m for m in mail if to in m["to"] and m["tags"].get("kind") == kind]


def _token(stack: LocalStack, to: str) -> str:
    """The token in the confirmation email's link (its text and its button lead to the same)."""
    found = wait_until(lambda: _mail(stack, to, CONFIRM), timeout=45)
    (token,) = set(re.findall(r"https?://\S+/#/waitlist/(\S+)", found[0]["text"]))
    assert f"#/waitlist/{token}" in found[0]["html"] and token.startswith("wtl.")
    return str(token)


def _sold_out_race(
    director: Any, api: requests.Session, waitlist: dict[str, Any] | None = None
) -> tuple[str, str, Any]:
    """A race whose one event (one place) is held, with its waitlist on and an easy proof-of-work."""
    kim = director("kim-waitlist")
    race = kim.post("/api/admin/races", json=race_body((1,))).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    setting = {"enabled": True} | (waitlist or {})
    patched = kim.patch(f"/api/admin/races/{rid}/events/{eid}", json={"waitlist": setting})
    assert patched.status_code == 200, patched.text
    assert patched.json()["events"][0]["waitlist"] == {"offerWindowHours": 48, "maxLength": None} | setting
    assert kim.patch(f"/api/admin/races/{rid}/fairness", json={"powDifficulty": 2}).status_code == 200
    kim.open_now(rid)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=10)
    assert hold(api, rid, eid).status_code == 201
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["events"][0]["status"] == "SOLD_OUT", timeout=10)
    assert api.get(f"/api/races/{rid}").json()["events"][0]["waitlist"] is True
    return rid, eid, kim


def _join(api: requests.Session, rid: str, eid: str, email: str, who: Runner | None = None) -> requests.Response:
    who = who or Runner(api)
    ch = who.challenge(rid)
    body = {"email": email, "firstName": "Ada", "lastName": "Lovelace", "challenge": ch["challenge"],
            "nonce": solve(ch["challenge"], ch["difficulty"])}  # fmt: skip
    return who.call("POST", f"/api/races/{rid}/events/{eid}/waitlist", json=body)


def _joined(api: requests.Session, stack: LocalStack, rid: str, eid: str, email: str) -> str:
    answer = _join(api, rid, eid, email)
    assert answer.status_code == 202, why(answer)
    return _token(stack, email)


def _confirm(api: requests.Session, token: str) -> requests.Response:
    return api.post("/api/waitlist/confirm", json={"token": token})


def _no_address_in_the_trail(kim: Any, rid: str) -> None:
    trail = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    assert trail and "@" not in repr(trail), trail


def test_joining_twice_is_one_entry_unconfirmed_does_not_count_and_places_are_seq_minus_head(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any
) -> None:
    rid, eid, kim = _sold_out_race(director, api)
    tag = rid[-6:].lower()
    ada, bo, cy = (f"{n}.{tag}@example.com" for n in ("ada", "bo", "cy"))
    listing = f"/api/admin/races/{rid}/events/{eid}/waitlist"

    # Joining twice, from two devices, the address typed two ways: the same answer, one entry.
    first, second = _join(api, rid, eid, ada), _join(api, rid, eid, f"  {ada.upper()} ")
    assert (first.status_code, second.status_code) == (202, 202), (why(first), why(second))
    assert first.json() == second.json()
    token = _token(stack, ada)
    view = kim.get(listing).json()
    assert [(e["email"], e["state"], e["number"]) for e in view["entries"]] == [(ada, "PENDING", None)]
    assert (view["length"], view["joined"]) == (0, 0)  # unconfirmed: it does not count
    time.sleep(2)
    assert len(_mail(stack, ada, CONFIRM)) == 1  # repeats share one email
    pending = api.get("/api/waitlist/me", headers={HEADER: token})
    assert (pending.status_code, pending.json()["state"], pending.json()["position"]) == (200, "PENDING", None)

    # Confirming gives the next number; a second click answers the same.
    mine = _confirm(api, token)
    assert mine.status_code == 200, mine.text
    assert (mine.json()["state"], mine.json()["number"], mine.json()["position"]) == ("WAITING", 1, 1)
    assert _confirm(api, token).json()["number"] == 1
    on_list = wait_until(lambda: _mail(stack, ada, JOINED), timeout=45)
    assert "position 1" in on_list[0]["subject"]

    # bo joins before cy but confirms after: the number follows the confirmation.
    bo_token, cy_token = _joined(api, stack, rid, eid, bo), _joined(api, stack, rid, eid, cy)
    assert _confirm(api, cy_token).json()["position"] == 2
    assert _confirm(api, bo_token).json()["position"] == 3
    view = kim.get(listing).json()
    assert [(e["email"], e["number"], e["position"]) for e in view["entries"]] == [(ada, 1, 1), (cy, 2, 2), (bo, 3, 3)]
    assert (view["length"], view["joined"], view["head"]) == (3, 3, 0)

    # The place is seq - head: as offers pass numbers (the next slice moves head), places move up.
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=waitlist_line_key(rid, eid),
        UpdateExpression="SET head = :h",
        ExpressionAttributeValues=values({":h": 1}),
    )
    assert api.get("/api/waitlist/me", headers={HEADER: bo_token}).json()["position"] == 2

    # The link is the only key: forged, of another kind, or missing, it opens nothing.
    for forged in ("", token[:-2] + ("AA" if not token.endswith("AA") else "BB"), "reg" + token[3:]):
        refused = api.get("/api/waitlist/me", headers={HEADER: forged})
        assert (refused.status_code, refused.json()["error"]) == (401, "INVALID_TOKEN"), refused.text
    _no_address_in_the_trail(kim, rid)


def test_a_cap_on_the_lists_length_refuses_the_11th_of_10_with_a_clear_409_and_ten_at_once_get_ten_numbers(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    rid, eid, kim = _sold_out_race(director, api, {"maxLength": 10})
    tag = rid[-6:].lower()
    emails = [f"cap{i}.{tag}@example.com" for i in range(11)]
    tokens = [_joined(api, stack, rid, eid, e) for e in emails]  # all eleven joined while there was room
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda t: _confirm(api, t), tokens[:10]))
    assert [a.status_code for a in answers] == [200] * 10, [a.text for a in answers]
    assert sorted(a.json()["number"] for a in answers) == list(range(1, 11))  # no gaps, none twice

    eleventh = _confirm(api, tokens[10])
    assert (eleventh.status_code, eleventh.json()["error"]) == (409, "WAITLIST_FULL"), eleventh.text
    assert "full (10 runners)" in eleventh.json()["message"]
    late = _join(api, rid, eid, f"late.{tag}@example.com")
    assert (late.status_code, late.json()["error"]) == (409, "WAITLIST_FULL"), why(late)
    view = kim.get(f"/api/admin/races/{rid}/events/{eid}/waitlist").json()
    assert (view["length"], view["joined"]) == (10, 10)

    # The director removes one (the trail names the entry, not the address): there is room again.
    removed = view["entries"][3]
    gone = kim.delete(f"/api/admin/races/{rid}/events/{eid}/waitlist/entries/{removed['entryId']}")
    assert gone.status_code == 204, gone.text
    assert kim.delete(f"/api/admin/races/{rid}/events/{eid}/waitlist/entries/{removed['entryId']}").status_code == 204
    missing = kim.delete(f"/api/admin/races/{rid}/events/{eid}/waitlist/entries/nope")
    assert (missing.status_code, missing.json()["error"]) == (404, "WAITLIST_ENTRY_NOT_FOUND")
    assert _confirm(api, tokens[10]).json()["number"] == 11
    trail = kim.get(f"/api/admin/races/{rid}/audit").json()["entries"]
    removals = [e for e in trail if e["action"] == "waitlist.entry.remove"]
    assert [e["target"] for e in removals] == [removed["entryId"]]
    _no_address_in_the_trail(kim, rid)
    # The removed address's link shows it was removed; joining again does not bring it back.
    removed_token = tokens[emails.index(removed["email"])]
    assert api.get("/api/waitlist/me", headers={HEADER: removed_token}).json()["state"] == "REMOVED"


def test_leaving_drops_the_runners_data_and_shortens_the_line(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    rid, eid, kim = _sold_out_race(director, api)
    tag = rid[-6:].lower()
    leaver, stayer = f"leave.{tag}@example.com", f"stay.{tag}@example.com"
    token = _joined(api, stack, rid, eid, leaver)
    _confirm(api, token)
    _confirm(api, _joined(api, stack, rid, eid, stayer))
    me = {HEADER: token}
    left = api.delete("/api/waitlist/me", headers=me)
    assert left.status_code == 204, left.text
    assert api.delete("/api/waitlist/me", headers=me).status_code == 204  # a repeat: nothing more
    assert api.get("/api/waitlist/me", headers=me).json()["state"] == "LEFT"
    view = kim.get(f"/api/admin/races/{rid}/events/{eid}/waitlist").json()
    assert view["length"] == 1
    assert [(e["state"], e["email"], e["firstName"]) for e in view["entries"] if e["state"] == "LEFT"] == [
        ("LEFT", "", "")
    ]
    assert api.delete("/api/waitlist/me").status_code == 401  # no link: nothing


def test_joining_is_behind_the_device_proof_of_work_and_rate_limits_and_only_for_a_sold_out_event_with_its_list_on(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    rid, eid, kim = _sold_out_race(director, api)
    tag = rid[-6:].lower()
    url = f"/api/races/{rid}/events/{eid}/waitlist"
    body = {"email": f"bot.{tag}@example.com", "firstName": "B", "lastName": "Ot"}

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
    # One device (and network) joining address after address meets its bucket: three at once.
    answers = [_join(api, rid, eid, f"spam{i}.{tag}@example.com", bot) for i in range(3)]
    assert [a.status_code for a in answers][-1] == 429, [why(a) for a in answers]
    assert int(answers[-1].headers["Retry-After"]) >= 1
    bad = _join(api, rid, eid, "not-an-address")
    assert (bad.status_code, bad.json()["error"]) == (400, "VALIDATION_ERROR")

    # The director switches the list off: no more joins.
    off = kim.patch(f"/api/admin/races/{rid}/events/{eid}", json={"waitlist": {"enabled": False}})
    assert off.status_code == 200, off.text
    # (A Response is falsy unless 2xx: the answer is returned in a list.)
    (closed,) = wait_until(
        lambda: [r for r in [_join(api, rid, eid, f"off.{tag}@example.com")] if r.status_code == 409]
    )
    assert closed.json()["error"] == "WAITLIST_CLOSED"
    # An event with places left sends runners to hold one.
    race = kim.post("/api/admin/races", json=race_body((5,))).json()
    other_rid, other_eid = race["raceId"], race["events"][0]["eventId"]
    kim.patch(f"/api/admin/races/{other_rid}/events/{other_eid}", json={"waitlist": {"enabled": True}})
    kim.patch(f"/api/admin/races/{other_rid}/fairness", json={"powDifficulty": 2})
    kim.open_now(other_rid)
    wait_until(lambda: api.get(f"/api/races/{other_rid}").json()["status"] == "OPEN", timeout=10)
    open_places = _join(api, other_rid, other_eid, f"early.{tag}@example.com")
    assert (open_places.status_code, open_places.json()["error"]) == (409, "NOT_SOLD_OUT"), why(open_places)


def test_copying_a_race_carries_each_events_waitlist_setting_but_not_its_runners(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    rid, eid, kim = _sold_out_race(director, api, {"offerWindowHours": 24, "maxLength": 50})
    _confirm(api, _joined(api, stack, rid, eid, f"copy.{rid[-6:].lower()}@example.com"))
    copy = kim.post(f"/api/admin/races/{rid}/copy", json={})
    assert copy.status_code == 201, copy.text
    copied = kim.get(f"/api/admin/races/{copy.json()['raceId']}").json()["events"][0]
    assert copied["waitlist"] == {"enabled": True, "offerWindowHours": 24, "maxLength": 50}
    view = kim.get(f"/api/admin/races/{copy.json()['raceId']}/events/{copied['eventId']}/waitlist").json()
    assert (view["length"], view["entries"]) == (0, [])


def test_no_log_line_names_a_runner_who_joined_confirmed_or_left_the_waitlist(
    director: Any, api: requests.Session, stack: LocalStack
) -> None:
    import uuid

    rid, eid, _ = _sold_out_race(director, api)
    tag = uuid.uuid4().hex[:10]
    email = f"Private.Waiter.{tag}@Example.com"
    who = Runner(api)
    ch = who.challenge(rid)
    body = {"email": email, "firstName": f"Zephyrine{tag}", "lastName": f"Quillfeather{tag}",
            "challenge": ch["challenge"], "nonce": solve(ch["challenge"], ch["difficulty"])}  # fmt: skip
    assert who.call("POST", f"/api/races/{rid}/events/{eid}/waitlist", json=body).status_code == 202
    bad = who.call("POST", f"/api/races/{rid}/events/{eid}/waitlist", json=body | {"lastName": ""})
    assert bad.status_code == 400  # a refused form logs what it logs without the runner in it
    token = _token(stack, email.lower())
    assert _confirm(api, token).status_code == 200
    wait_until(lambda: _mail(stack, email.lower(), JOINED), timeout=45)
    assert api.delete("/api/waitlist/me", headers={HEADER: token}).status_code == 204

    logs = sorted(stack.log_dir.glob("**/*.log"))
    found = [
        f"{path.name}: {line[:200]}"
        for path in logs
        for line in path.read_text(errors="replace").splitlines()
        if tag in line.lower()
    ]
    assert found == []
