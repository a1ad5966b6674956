"""Directors' results: presigned upload to S3 (moto), processing on the S3 event, the
line-by-line report, atomic version replacement, publish/unpublish, audit, isolation."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from .admin import DirectorSession, wait_until
from .results import registration_item, results_url, seed_registrations, upload, wait_for_upload

pytestmark = pytest.mark.integration

RUNNERS = {  # bib -> (first, last, born); the race is on 2099-05-01
    1: ("Zoë", "Łukasiewicz", "1980-05-02"),  # 118 on race day: 115-119
    2: ("Ann", "Lee", "2060-05-01"),  # 39 on race day
    3: ("Marc", "Dupont", "2059-06-01"),  # 39
    4: ("Bea", "Smith", "2055-01-01"),  # 44
    5: ("Carl", "Jones", "2070-01-01"),  # 29
    6: ("Dina", "Ortiz", "2070-01-01"),
}
GOOD = """bib,chip_time,gun_time,status,category,split_10k
3,2:59:59,3:00:10,finished,M,1:20:00
2,3:05:00,3:05:30,,F,1:25:00
4,3:05:00,3:06:00,Finished,f,
5,,,DNF,M,1:30:00
1,3:30:00.5,3:31:00,finished,F,
"""


def current(api: requests.Session, race_id: str) -> dict[str, Any]:
    return dict(api.get(f"/api/races/{race_id}/results").json())


@pytest.fixture(scope="module")
def race(stack: Any, backend: Any) -> dict[str, Any]:
    kim = DirectorSession(stack, "kim")
    resp = kim.post(
        "/api/admin/races",
        json={
            "name": "Results Race",
            "raceDate": "2099-05-01",
            "currency": "EUR",
            "registrationOpensAt": "2099-01-01T09:00:00Z",
            "registrationClosesAt": "2099-04-01T09:00:00Z",
            "events": [{"name": "10K", "cap": 100, "priceCents": 2500}, {"name": "5K", "cap": 50, "priceCents": 1500}],
        },
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    event_id = body["events"][0]["eventId"]
    seed_registrations(backend, (registration_item(body["raceId"], event_id, b, *v) for b, v in RUNNERS.items()))
    yield {"director": kim, "raceId": body["raceId"], "eventId": event_id, "other": body["events"][1]["eventId"]}
    kim.close()


def test_a_good_file_becomes_a_version_that_publishing_shows(race: dict[str, Any], api: requests.Session) -> None:
    kim, race_id, event_id = race["director"], race["raceId"], race["eventId"]
    ticket = upload(kim, race_id, event_id, GOOD)
    assert ticket["status"] == "WAITING_FOR_FILE"
    assert ticket["uploadUrl"].startswith("http://127.0.0.1:")
    done = wait_for_upload(kim, ticket)
    assert done["status"] == "READY", done
    assert (done["rows"], done["version"], done["errors"]) == (5, 1, [])

    # Not shown before publishing.
    pointer = api.get(f"/api/races/{race_id}/results").json()
    assert [e["published"] for e in pointer["events"]] == [False, False]
    assert api.get(f"/api/races/{race_id}/events/{event_id}/results/1").status_code == 404

    assert kim.post(results_url(race_id, event_id, "/publish")).json()["published"] is True
    # The pointer is cached for about a second in each environment.
    pointer = wait_until(lambda: (p := current(api, race_id))["events"][0]["published"] and p, timeout=3)
    assert pointer["events"][0] | {"name": None} == {
        "eventId": event_id, "name": None, "published": True, "version": 1, "finishers": 4,
    }  # fmt: skip
    page = api.get(f"/api/races/{race_id}/events/{event_id}/results/1").json()
    got = [
        (r["place"], r["bib"], r["name"], r["genderPlace"], r["ageGroup"], r["ageGroupPlace"]) for r in page["results"]
    ]
    assert got == [
        (1, 3, "Marc Dupont", 1, "35-39", 1),
        (2, 2, "Ann Lee", 1, "35-39", 1),  # a tie at 3:05:00 shares second place...
        (2, 4, "Bea Smith", 1, "40-44", 1),
        (4, 1, "Zoë Łukasiewicz", 3, "115-119", 1),  # ...and the next place is fourth
        (None, 5, "Carl Jones", None, "25-29", None),  # DNF: listed last, no place
    ]
    assert page["results"][3]["chipTime"] == "3:30:00.5"
    assert page["genders"] == ["F", "M"] and page["total"] == 5
    runner = api.get(f"/api/races/{race_id}/events/{event_id}/results/1/bibs/3").json()["result"]
    assert runner["splits"] == [{"name": "10k", "time": "1:20:00"}]
    assert runner["of"] == {"overall": 4, "gender": 1, "ageGroup": 1}


def test_a_file_with_bad_lines_is_reported_by_line_and_changes_nothing(
    race: dict[str, Any], api: requests.Session
) -> None:
    kim, race_id, event_id = race["director"], race["raceId"], race["eventId"]
    before = kim.get(results_url(race_id, event_id)).json()
    bad = (
        "bib,chip_time,gun_time,status,category\n"
        "3,2:59:59,3:00:10,finished,M\n"
        "99,3:00:00,3:00:00,,M\n"  # line 3: nobody has bib 99 in this event
        "3,3:10:00,3:10:00,,M\n"  # line 4: bib 3 again
        "2,three hours,3:05:30,,F\n"  # line 5: not a time
        "4,3:05:00,3:06:00,,W\n"  # line 6: unknown category
        "5,,,RETIRED,M\n"  # line 7: unknown status
        "6,,3:00:00,,F\n"  # line 8: a finisher without the chip time they are ranked by
    )
    done = wait_for_upload(kim, upload(kim, race_id, event_id, bad))
    assert done["status"] == "REJECTED"
    assert [e["line"] for e in done["errors"]] == [3, 4, 5, 6, 7, 8]
    reasons = " | ".join(e["reason"] for e in done["errors"])
    for words in ("bib 99 is not a registered runner", "repeated (first on line 2)", "'three hours' is not a time",
                  "category 'W' is not one of F, M, X", "'RETIRED' is not one of", "needs a chip time"):  # fmt: skip
        assert words.lower() in reasons.lower()
    after = kim.get(results_url(race_id, event_id)).json()
    assert (after["version"], after["published"]) == (before["version"], before["published"])

    header = wait_for_upload(kim, upload(kim, race_id, event_id, "bib,time,colour\n1,2:00:00,red\n"))
    assert header["status"] == "REJECTED" and {e["line"] for e in header["errors"]} == {1}


def test_a_corrected_upload_replaces_the_version_and_unpublish_hides_it(
    race: dict[str, Any], api: requests.Session, director: Any
) -> None:
    kim, race_id, event_id = race["director"], race["raceId"], race["eventId"]
    base = f"/api/races/{race_id}/events/{event_id}/results"
    published = kim.post(results_url(race_id, event_id, "/publish")).json()
    fixed = GOOD.replace("3,2:59:59,3:00:10", "3,3:15:00,3:15:10")
    done = wait_for_upload(kim, upload(kim, race_id, event_id, fixed))
    assert done["status"] == "READY" and done["version"] == published["version"] + 1
    new = done["version"]
    # Published results follow the new version within the pointer's second of caching.
    wait_until(lambda: current(api, race_id)["events"][0]["version"] == new, timeout=3)
    first = api.get(f"{base}/{new}").json()["results"][0]
    assert (first["bib"], first["place"]) == (2, 1)
    # The previous version stays readable as it was: a runner paging through it sees one version.
    assert api.get(f"{base}/{new - 1}").json()["results"][0]["bib"] == 3

    hidden = kim.post(results_url(race_id, event_id, "/unpublish")).json()
    assert hidden["published"] is False
    wait_until(lambda: current(api, race_id)["events"][0]["version"] is None, timeout=3)
    assert api.get(f"{base}/{new}").json()["error"] == "RESULTS_NOT_FOUND"
    assert kim.post(results_url(race_id, event_id, "/publish")).status_code == 200

    actions = [e["action"] for e in kim.get(f"/api/admin/races/{race_id}/audit?limit=200").json()["entries"]]
    for action in ("results.upload", "results.version", "results.publish", "results.unpublish"):
        assert action in actions


def test_another_director_finds_nothing(race: dict[str, Any], director: Any) -> None:
    mo = director("mo")
    race_id, event_id = race["raceId"], race["eventId"]
    assert mo.get(results_url(race_id, event_id)).status_code == 404
    assert mo.post(results_url(race_id, event_id, "/uploads")).status_code == 404
    assert mo.post(results_url(race_id, event_id, "/unpublish")).status_code == 404
    assert (
        requests.post(race["director"].base + results_url(race_id, event_id, "/uploads"), timeout=10).status_code == 401
    )
    kim = race["director"]
    assert kim.post(results_url(race_id, race["other"], "/publish")).status_code == 409  # nothing uploaded
    assert kim.post(results_url(race_id, "evt_nope", "/uploads")).status_code == 404
    assert kim.post(results_url(race_id, event_id, "/uploads"), json={"rankBy": "fastest"}).status_code == 400
