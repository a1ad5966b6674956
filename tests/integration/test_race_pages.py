"""Runners reading races through the gateway, the same handler and the caching hierarchy."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_given_a_published_race_when_listing_then_it_appears_with_its_window(api, backend):
    race_id = backend.create_race([50, 100], name="Listing Test 10K")

    resp = api.get("/api/races")

    assert resp.status_code == 200
    races = {r["raceId"]: r for r in resp.json()["races"]}
    assert race_id in races
    assert races[race_id]["name"] == "Listing Test 10K"
    assert races[race_id]["status"] == "OPEN"
    assert {"registrationOpensAt", "registrationClosesAt", "raceDate"} <= races[race_id].keys()


def test_given_a_race_when_reading_it_then_events_show_cap_price_and_places_left(api, backend):
    race_id = backend.create_race([30, 7])

    resp = api.get(f"/api/races/{race_id}")

    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    race = resp.json()
    assert race["status"] == "OPEN"
    assert sorted(e["cap"] for e in race["events"]) == [7, 30]
    for event in race["events"]:
        assert event["spotsLeft"] == event["cap"]
        assert event["priceCents"] == 2500
        assert event["currency"] == "USD"
        assert event["status"] == "OPEN"
        assert event["eventId"].startswith("evt_")


def test_unknown_race_is_a_json_404(api):
    resp = api.get("/api/races/race_doesnotexist")

    assert resp.status_code == 404
    assert resp.json()["error"] == "RACE_NOT_FOUND"
    assert resp.json()["message"]


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("GET", "/api/nope", 404, None),
        ("GET", "/api/races/x/y/z", 404, None),
        ("POST", "/api/admin/nope", 404, None),  # no token needed to learn it does not exist
        ("DELETE", "/api/races", 405, "GET"),
        ("TRACE", "/api/races/x", 405, "GET"),
        ("GET", "/api/holds/h1", 405, "DELETE"),
        ("PUT", "/api/admin/races/r1", 405, "GET, PATCH"),
        ("GET", "/api/races/\u00ae", 404, None),  # an id no route takes: the race does not exist
    ],
)
def test_unknown_routes_and_methods_answer_in_the_contracts_shape(api, method, path, status, allow):
    # The blueprint's catch-all (ANY /api/{proxy+}) takes them, on AWS as here.
    resp = api.request(method, path)

    assert resp.status_code == status, resp.text
    assert set(resp.json()) == {"error", "message"}
    assert resp.json()["error"] == ("NOT_FOUND" if status == 404 else "METHOD_NOT_ALLOWED")
    assert resp.headers.get("Allow") == allow


def test_outside_every_route_the_gateway_answers_as_api_gateway_does(api):
    resp = api.get("/api")

    assert resp.status_code == 404
    assert resp.json() == {"message": "Not Found"}


def test_api_documents_itself(api):
    doc = api.get("/api/openapi.json")
    ui = api.get("/api/docs")

    assert doc.status_code == 200
    assert "/api/races/{raceId}" in doc.json()["paths"]
    assert ui.status_code == 200
    assert "swagger" in ui.text.lower()


def test_site_is_served_at_root_with_the_api_on_the_same_origin(api):
    resp = api.get("/")

    assert resp.status_code == 200
    assert "text/html" in resp.headers["Content-Type"]
