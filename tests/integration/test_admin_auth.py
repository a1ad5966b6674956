"""Directors sign in with a JWT (Cognito on AWS, the local issuer here) and see only their races."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

import blueprint
from local.auth import Issuer, director_sub
from local.stack import LocalStack

pytestmark = pytest.mark.integration

ADMIN_ROUTES = [r for r in blueprint.ROUTES if r.auth == "director"]


def _url(route: blueprint.Route, race_id: str = "race_x", event_id: str = "evt_x") -> str:
    path = route.path.replace("{raceId}", race_id).replace("{eventId}", event_id).replace("{registrationId}", "reg_x")
    return path.replace("{version}", "1")  # a question set's version: a well-formed one


def _call(api: requests.Session, route: blueprint.Route, token: str | None, **ids: str) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {} if route.method in ("POST", "PATCH") else None
    return api.request(route.method, _url(route, **ids), json=body, headers=headers)


def _forged(issuer: Issuer, **claims: Any) -> str:
    """A token with the right shape, kid and claims, signed with a key that is not the issuer's."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    body = {"sub": director_sub("mallory"), "iss": issuer.issuer, "aud": issuer.audience, "iat": now, "exp": now + 600}
    return jwt.encode(body | claims, key, algorithm="RS256", headers={"kid": issuer.kid})


@pytest.mark.parametrize("route", ADMIN_ROUTES, ids=lambda r: r.route_key)
def test_every_admin_route_refuses_a_missing_token(api: requests.Session, route: blueprint.Route) -> None:
    resp = _call(api, route, None)
    # The HTTP API's JWT authorizer answers before the function runs, in its own shape
    # (an HTTP API cannot reshape it); the OpenAPI document says so.
    assert resp.status_code == 401
    assert resp.json() == {"message": "Unauthorized"}
    assert resp.headers["www-authenticate"] == "Bearer"


def test_forged_expired_and_foreign_tokens_are_refused(api: requests.Session, stack: LocalStack) -> None:
    issuer = stack.issuer
    now = time.time()
    bad = {
        "forged signature": _forged(issuer),
        "expired": issuer.mint("alice", now=now - 7200),
        "not yet valid": issuer.mint("alice", now=now + 3600),
        "another audience": issuer.mint("alice", aud="someone-elses-app"),
        "another issuer": issuer.mint("alice", iss="https://evil.example/pool"),
        "garbage": "not.a.jwt",
        "unsigned": jwt.encode({"sub": "x", "iss": issuer.issuer, "aud": issuer.audience}, None, algorithm="none"),
    }
    for what, token in bad.items():
        resp = api.get("/api/admin/races", headers={"Authorization": f"Bearer {token}"})
        assert resp.status_code == 401, what
        assert resp.json() == {"message": "Unauthorized"}, what
        assert resp.headers["www-authenticate"].startswith('Bearer scope="" error="invalid_token"'), what
    # Not a bearer token at all
    basic = api.get("/api/admin/races", headers={"Authorization": "Basic YWxpY2U6cHc="})
    assert basic.status_code == 401


def test_an_access_token_naming_the_client_in_client_id_is_accepted(api: requests.Session, stack: LocalStack) -> None:
    # Cognito access tokens carry client_id instead of aud; the JWT authorizer accepts either.
    token = stack.issuer.mint("carol", token_use="access", client_id=stack.issuer.audience, aud=None)
    resp = api.get("/api/admin/races", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text


def test_a_director_sees_and_changes_only_their_own_races(director: Any, api: requests.Session) -> None:
    alice, bob = director("alice"), director("bob")
    race = alice.create_race((20,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]

    assert race_id in [r["raceId"] for r in alice.get("/api/admin/races").json()["races"]]
    assert race_id not in [r["raceId"] for r in bob.get("/api/admin/races").json()["races"]]
    # Well-formed calls, so that the only thing wrong with them is whose race it is.
    bodies = {
        "POST /api/admin/races/{raceId}/events": {"name": "Bob's 5K", "cap": 10, "priceCents": 1000},
        "PATCH /api/admin/races/{raceId}": {"name": "Bob's now"},
        "PATCH /api/admin/races/{raceId}/events/{eventId}": {"cap": 1},
        "POST /api/admin/races/{raceId}/registrations/{registrationId}/refunds": {"amountCents": 100, "reason": "x"},
        "PUT /api/admin/races/{raceId}/events/{eventId}/questions": {"questions": []},
        "POST /api/admin/races/{raceId}/codes": {"code": "BOBS", "kind": "PERCENT", "percent": 5},
        "POST /api/admin/races/{raceId}/codes/bulk": {"count": 1, "prefix": "BOB", "kind": "PERCENT", "percent": 5},
        "POST /api/admin/races/{raceId}/events/{eventId}/waitlist/release": {"places": 1},
        "PUT /api/admin/races/{raceId}/events/{eventId}/ballot": {
            "opensAt": "2030-01-01T09:00",
            "closesAt": "2030-01-02T09:00",
            "drawAt": "2030-01-03T09:00",
        },
    }
    for route in ADMIN_ROUTES:
        if "{raceId}" not in route.path:
            continue
        body = bodies.get(route.route_key, {} if route.method in ("POST", "PATCH") else None)
        url = _url(route, race_id=race_id, event_id=event_id)
        resp = bob.request(route.method, url, json=body, headers={"Authorization": f"Bearer {bob.token}"})
        # 404 as if it did not exist: never 403 (another director's ids are not confirmed),
        # never a validation error that would tell Bob the race is there.
        assert resp.status_code == 404, (route.route_key, resp.status_code, resp.text)
        assert resp.json()["error"] in ("RACE_NOT_FOUND", "NOT_FOUND"), resp.text

    # Bob's well-formed edits of Alice's race change nothing.
    assert bob.patch(f"/api/admin/races/{race_id}", json={"name": "Bob's now"}).status_code == 404
    assert bob.patch(f"/api/admin/races/{race_id}/events/{event_id}", json={"cap": 1}).status_code == 404
    assert bob.post(f"/api/admin/races/{race_id}/window/open").status_code == 404
    mine = alice.get(f"/api/admin/races/{race_id}").json()
    assert (mine["name"], mine["events"][0]["cap"], mine["registrationState"]) == (race["name"], 20, "SCHEDULED")
    assert mine["version"] == race["version"]


def test_the_claims_reach_the_audit_trail_as_who(director: Any) -> None:
    alice = director("alice")
    race = alice.create_race()
    (entry,) = alice.get(f"/api/admin/races/{race['raceId']}/audit").json()["entries"]
    # Typed, and without the director's address: the trail outlives every retention period.
    assert entry["actor"] == {"kind": "director", "id": director_sub("alice"), "name": "alice"}
    assert entry["action"] == "race.create"


def test_make_token_prints_a_token_for_the_running_stack(
    stack: LocalStack, api: requests.Session, tmp_path: Any
) -> None:
    cmd = [sys.executable, "-m", "local.auth", "token", "--director", "dora", "--work-dir", str(stack.work_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=blueprint.ROOT, check=True)
    token = out.stdout.strip()
    assert "dora" in out.stderr and token.count(".") == 2
    assert api.get("/api/admin/races", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    nothing = [sys.executable, "-m", "local.auth", "token", "--work-dir", str(tmp_path)]
    missing = subprocess.run(nothing, capture_output=True, text=True, timeout=60, cwd=blueprint.ROOT, check=False)
    assert missing.returncode != 0 and missing.stdout == ""
    assert "make run" in missing.stderr


def test_make_token_signs_in_the_demo_director_and_make_director_invites_one(
    stack: LocalStack, api: requests.Session, backend: Any
) -> None:
    """`make token` (no DIRECTOR) is the demo director of moto's user pool, who owns `make run`'s
    demo race; `make director EMAIL=…` adds a director and `make totp` reads the demo's code."""
    from local import directors
    from local.seed import demo_draft

    assert stack.directors is not None
    race = backend.admin().create_race(stack.directors.demo_sub, demo_draft(), open_now=False)
    run = [sys.executable, "-m", "local.auth", "token", "--work-dir", str(stack.work_dir)]
    out = subprocess.run(run, capture_output=True, text=True, timeout=90, cwd=blueprint.ROOT, check=True)
    assert directors.DEMO_EMAIL in out.stderr
    mine = api.get("/api/admin/races", headers={"Authorization": f"Bearer {out.stdout.strip()}"})
    assert race.raceId in {r["raceId"] for r in mine.json()["races"]}

    tool = [sys.executable, "-m", "local.directors", "--work-dir", str(stack.work_dir)]
    email = f"ana-{uuid.uuid4().hex[:6]}@racecap.localhost"
    invited = subprocess.run([*tool, "invite", "--email", email], capture_output=True, text=True, timeout=60,
                             cwd=blueprint.ROOT, check=True)  # fmt: skip
    assert "temporary password: " in invited.stdout and f"{stack.url}/admin/" in invited.stdout
    again = subprocess.run([*tool, "invite", "--email", email], capture_output=True, text=True, timeout=60,
                           cwd=blueprint.ROOT, check=False)  # fmt: skip
    assert again.returncode != 0 and "already a director" in again.stderr
    code = subprocess.run([*tool, "code"], capture_output=True, text=True, timeout=60, cwd=blueprint.ROOT, check=True)
    assert code.stdout.strip().isdigit() and len(code.stdout.strip()) == 6
