"""Runners reading races through the gateway, the same handler and the caching hierarchy."""

from __future__ import annotations

import time

import pytest

from tests.integration.latency import machine

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
        ("PUT", "/api/holds/h1", 405, "DELETE, GET"),
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


class _Counting:
    """A DynamoDB client that counts the calls made through it."""

    def __init__(self, client: object) -> None:
        self._client = client
        self.calls = 0

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def counted(*args: object, **kwargs: object) -> object:
            self.calls += 1
            return attr(*args, **kwargs)

        return counted


def test_the_race_list_shows_each_events_places_with_no_database_read_per_request(backend):
    from racecap.places.store import DynamoInventory
    from racecap.races.catalog import RaceCatalog
    from racecap.races.store import DynamoRaceStore

    race_id = backend.create_race([3, 2], name="Listed With Places")
    counting = _Counting(backend.dynamodb)
    catalog = RaceCatalog(
        DynamoRaceStore(counting, backend.table("Races")),
        DynamoInventory(counting, backend.table("Inventory")),
        backend.cache(),
    )
    listed = next(r for r in catalog.list_races().races if r.raceId == race_id)
    assert [(e.spotsLeft, e.status) for e in listed.events] == [(3, "OPEN"), (2, "OPEN")]

    # 300 list requests in this environment within a second or so: answered from the caches.
    before = counting.calls
    for _ in range(300):
        catalog.list_races()
    assert counting.calls - before <= 4, counting.calls - before  # a rebuild at most, not one per request


def test_the_race_list_says_sold_out_within_the_caches_time_to_live(api, backend):
    from racecap.races.catalog import AVAILABILITY_LOCAL_TTL, AVAILABILITY_TTL, LIST_LOCAL_TTL, LIST_TTL

    race_id = backend.create_race([2], name="Selling Out")
    event_id = api.get(f"/api/races/{race_id}").json()["events"][0]["eventId"]

    def listed_event() -> dict:
        race = next((r for r in api.get("/api/races").json()["races"] if r["raceId"] == race_id), None)
        return race["events"][0] if race else {}

    # A new race is on the list once the environments' copy of the list's stamp (a second) is gone.
    deadline = time.monotonic() + 5
    while not listed_event() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert listed_event()["status"] == "OPEN"
    for _ in range(2):
        assert api.post(f"/api/races/{race_id}/events/{event_id}/holds").status_code == 201
    gone = time.monotonic()
    ttl = LIST_TTL + LIST_LOCAL_TTL + AVAILABILITY_TTL + AVAILABILITY_LOCAL_TTL
    while listed_event()["status"] != "SOLD_OUT":
        assert time.monotonic() - gone < ttl + 1.0, (listed_event(), machine())
        time.sleep(0.2)
    assert listed_event()["spotsLeft"] == 0
