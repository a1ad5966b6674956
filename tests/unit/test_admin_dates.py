"""The admin API's dates and times through its routers (on the fakes): each lies in the years a
director may name (``racecap.models.YEARS``), so no offset the API adds to one (a copy's shift,
the retention days, a time zone's hours) leaves Python's years 1-9999. A fuzzer's race date of
9999 answered 500 on a copy; every such input now answers 400 naming its field."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from racecap.api.admin import codes as codes_api
from racecap.api.admin import common
from racecap.api.admin import races as races_api
from racecap.codes.service import CodesAdmin
from racecap.http import make_resolver

import blueprint
from tests.fakes.codes import FakeCodes
from tests.unit.admin_world import DANA, AdminWorld

Call = Callable[..., tuple[int, Any]]


@pytest.fixture
def world() -> AdminWorld:
    return AdminWorld()


@pytest.fixture
def call(world: AdminWorld, placeholder_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Call:
    """``call(method, path, body)``: the admin routers' answer (status, JSON) for DANA, through
    CloudFront, with the services on the fakes."""
    codes = CodesAdmin(FakeCodes(world.tables), world.admin, world.audit)
    for module in (races_api, common):
        monkeypatch.setattr(module, "race_admin", lambda: world.admin)
    monkeypatch.setattr(codes_api, "codes_admin", lambda: codes)
    app = make_resolver()
    app.include_router(races_api.router)
    app.include_router(codes_api.router)
    headers = {
        blueprint.ORIGIN_VERIFY_HEADER: placeholder_env["ORIGIN_VERIFY_SECRET"],
        "content-type": "application/json",
    }

    def answer(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        event = {
            "version": "2.0", "routeKey": f"{method} {path}", "rawPath": path, "rawQueryString": "",
            "headers": headers, "body": None if body is None else json.dumps(body), "isBase64Encoded": False,
            "requestContext": {
                "http": {"method": method, "path": path, "sourceIp": "127.0.0.1"}, "stage": "$default",
                "authorizer": {"jwt": {"claims": {"sub": DANA.sub, "username": DANA.username}, "scopes": []}},
            },
        }  # fmt: skip
        got = app.resolve(event, None)  # type: ignore[arg-type]
        return got["statusCode"], json.loads(got["body"] or "null")

    return answer


def _race(**over: Any) -> dict[str, Any]:
    now = datetime.now(UTC).replace(microsecond=0)
    return {
        "name": "Harbour Run",
        "location": "Harbour",
        "raceDate": (now + timedelta(days=30)).date().isoformat(),
        "registrationOpensAt": (now + timedelta(days=1)).isoformat(),
        "registrationClosesAt": (now + timedelta(days=10)).isoformat(),
        "events": [{"name": "10K", "cap": 5, "priceCents": 2500}],
    } | over


def _tiered(starts_at: str) -> dict[str, Any]:
    return {"name": "10K", "cap": 5, "priceCents": 2500, "priceTiers": [{"startsAt": starts_at, "priceCents": 3000}]}


def _refused(answer: tuple[int, Any], field: str) -> dict[str, Any]:
    status, body = answer
    assert status == 400, body
    assert body["error"] == "VALIDATION_ERROR" and body["message"], body
    assert field in body.get("fields", {}), body
    return body


def test_a_copy_centuries_ahead_is_a_400_naming_the_race_date(call: Call, world: AdminWorld) -> None:
    # Given a race of next month
    status, race = call("POST", "/api/admin/races", _race())
    assert status == 201, race
    copy = f"/api/admin/races/{race['raceId']}/copy"
    # When it is copied to 9999 (the fuzzer's 500) or past the last year: a 400 naming raceDate
    for day in ("9999-12-31", "9999-06-01", "3000-01-01"):
        body = _refused(call("POST", copy, {"raceDate": day}), "raceDate")
        assert "2999" in body["fields"]["raceDate"]
    # and nothing was created
    assert [r.raceId for r in world.admin.list_races(DANA).races] == [race["raceId"]]
    # The last year itself is a copy like any other
    status, copied = call("POST", copy, {"raceDate": "2999-12-31"})
    assert status == 201 and copied["raceDate"] == "2999-12-31", copied
    assert copied["personalDataDeletedOn"] > "2999-12-31"


def test_a_copy_whose_shifted_times_would_leave_the_years_names_the_field(call: Call) -> None:
    # Given a race of next month with a price tier in 2999 (the last year a time may name)
    status, race = call("POST", "/api/admin/races", _race(events=[_tiered("2999-06-01T09:00:00Z")]))
    assert status == 201, race
    # When its copy moves everything centuries on: the tier would be in 3900-something
    body = _refused(
        call("POST", f"/api/admin/races/{race['raceId']}/copy", {"raceDate": "2999-12-01"}),
        "events.0.priceTiers.0.startsAt",
    )
    assert body["message"] == "The copy would not be a valid race."


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"raceDate": "9999-12-31"}, "raceDate"),
        ({"raceDate": "1899-12-31"}, "raceDate"),
        # Times a zone moves past 9999 or before year 1 (naive: the race's local time)
        ({"timeZone": "America/Los_Angeles", "registrationClosesAt": "9999-12-31T23:00:00"}, "registrationClosesAt"),
        ({"timeZone": "Asia/Tokyo", "registrationOpensAt": "0001-01-01T00:00:00"}, "registrationOpensAt"),
        ({"registrationClosesAt": "9999-12-31T23:59:59Z"}, "registrationClosesAt"),
        ({"events": [_tiered("9999-12-31T23:00:00")]}, "events.0.priceTiers.0.startsAt"),
    ],
)
def test_a_new_race_with_a_date_outside_the_years_is_a_400_naming_it(
    call: Call, world: AdminWorld, over: dict[str, Any], field: str
) -> None:
    _refused(call("POST", "/api/admin/races", _race(**{"timeZone": "UTC", **over})), field)
    assert world.admin.list_races(DANA).races == []  # nothing stored, so nothing to read back as a 500


def test_edits_with_a_date_outside_the_years_are_400s_and_change_nothing(call: Call, world: AdminWorld) -> None:
    status, race = call("POST", "/api/admin/races", _race())
    assert status == 201, race
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    # The race date was stored, then every read of the race answered 500 (its retention date).
    _refused(call("PATCH", f"/api/admin/races/{rid}", {"raceDate": "9999-12-31"}), "raceDate")
    _refused(call("PATCH", f"/api/admin/races/{rid}", {"registrationOpensAt": "9999-12-30T00:00:00"}), "registrationOpensAt")  # fmt: skip
    tiers = [{"startsAt": "9999-12-31T23:00:00", "priceCents": 3000}]
    _refused(call("PATCH", f"/api/admin/races/{rid}/events/{eid}", {"priceTiers": tiers}), "priceTiers.0.startsAt")
    _refused(call("POST", f"/api/admin/races/{rid}/events", {"name": "5K", "cap": 5, "priceCents": 0, "priceTiers": tiers}), "priceTiers.0.startsAt")  # fmt: skip
    status, now = call("GET", f"/api/admin/races/{rid}")
    assert status == 200 and (now["raceDate"], now["version"]) == (race["raceDate"], race["version"])


@pytest.mark.parametrize("route", ["codes", "codes/bulk"])
def test_a_code_valid_outside_the_years_is_a_400_naming_it(call: Call, world: AdminWorld, route: str) -> None:
    status, race = call("POST", "/api/admin/races", _race(timeZone="America/Los_Angeles"))
    assert status == 201, race
    terms = {"kind": "PERCENT", "percent": 10, "validTo": "9999-12-31T23:00:00"}  # naive: Los Angeles, past 9999 in UTC
    body = {"code": "SPRING"} if route == "codes" else {"count": 2, "prefix": "SPONSOR"}
    _refused(call("POST", f"/api/admin/races/{race['raceId']}/{route}", terms | body), "validTo")


def test_a_race_stored_before_the_bound_still_reads_and_its_copy_is_a_400(call: Call, world: AdminWorld) -> None:
    # Given a race stored at 9999-12-31 while any date was accepted (its retention date overflows)
    status, race = call("POST", "/api/admin/races", _race())
    assert status == 201, race
    stored = world.race(race["raceId"])
    world.races.apply_update(stored, {"raceDate": "9999-12-31"})
    # Then it still reads (its personal data is never due for deletion) and a copy a year on is a 400
    status, view = call("GET", f"/api/admin/races/{race['raceId']}")
    assert status == 200 and view["personalDataDeletedOn"] == "9999-12-31", view
    _refused(call("POST", f"/api/admin/races/{race['raceId']}/copy", {}), "raceDate")


def test_a_code_valid_to_before_its_start_once_both_are_in_utc_is_a_400(call: Call) -> None:
    # One time with an offset and one without (the race's, Los Angeles: UTC-8 in January) could
    # not be compared: a 500. Both in UTC, validTo is first: a 400 naming it; then a valid pair.
    status, race = call("POST", "/api/admin/races", _race(timeZone="America/Los_Angeles"))
    assert status == 201, race
    url = f"/api/admin/races/{race['raceId']}/codes"
    code = {"kind": "PERCENT", "percent": 10, "code": "SPRING"}
    for terms in (
        {"validFrom": "2027-01-01T10:00:00", "validTo": "2027-01-01T17:00:00Z"},  # 18:00Z then 17:00Z
        {"validFrom": "2027-01-01T19:00:00Z", "validTo": "2027-01-01T10:00:00"},
    ):
        _refused(call("POST", url, code | terms), "validTo")
    status, made = call("POST", url, code | {"validFrom": "2027-01-01T10:00:00", "validTo": "2027-01-01T19:00:00Z"})
    assert status == 201 and made["validFrom"].startswith("2027-01-01T18:00:00"), made
