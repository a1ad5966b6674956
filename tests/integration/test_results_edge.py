"""Results through the cache stand-in (nginx configured from blueprint.CACHE_BEHAVIOURS):
the headers the functions send are what a real HTTP cache acts on. A new version shows
within 5 s, and no page ever mixes two versions while runners read during the switch."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests

from .admin import DirectorSession
from .results import registration_item, results_url, seed_registrations, upload, wait_for_upload

pytestmark = pytest.mark.integration

N = 45  # runners: 5 pages of 10


def sheet(offset_s: int) -> str:
    """Bib b finishes in 1:00:00 + b*10 s + offset: each version's times say which it is."""
    lines = ["bib,chip_time,gun_time,category"]
    for bib in range(1, N + 1):
        t = 3600 + bib * 10 + offset_s
        stamp = f"{t // 3600}:{t % 3600 // 60:02d}:{t % 60:02d}"
        lines.append(f"{bib},{stamp},{stamp},{'FM'[bib % 2]}")
    return "\n".join(lines) + "\n"


def seconds(stamp: str) -> int:
    h, m, s = (int(x) for x in stamp.split(":"))
    return h * 3600 + m * 60 + s


@pytest.fixture(scope="module")
def event(stack: Any, backend: Any) -> dict[str, Any]:
    eve = DirectorSession(stack, "eve")
    resp = eve.post(
        "/api/admin/races",
        json={
            "name": "Edge Race",
            "raceDate": "2099-06-01",
            "registrationOpensAt": "2099-01-01T09:00:00Z",
            "registrationClosesAt": "2099-05-01T09:00:00Z",
            "events": [{"name": "Half", "cap": 100, "priceCents": 2500}],
        },
    )
    assert resp.status_code == 201, resp.text
    race_id, event_id = resp.json()["raceId"], resp.json()["events"][0]["eventId"]
    seed_registrations(
        backend,
        (registration_item(race_id, event_id, b, f"Runner{b}", f"Family{b}", "1990-01-01") for b in range(1, N + 1)),
    )
    yield {"director": eve, "raceId": race_id, "eventId": event_id, "edge": stack.edge_url}
    eve.close()


def _current(edge: str, race_id: str) -> dict[str, Any]:
    resp = requests.get(f"{edge}/api/races/{race_id}/results", timeout=10)
    assert resp.status_code == 200, (resp.status_code, resp.headers, resp.text[:300])
    return dict(resp.json()["events"][0])


def _wait_visible(edge: str, race_id: str, check: Any, limit: float) -> float:
    """Seconds from now until a request *sent* then sees the change (what the cache's
    staleness bounds; a slow answer on a loaded machine is not staleness)."""
    started = time.monotonic()
    while True:
        sent = time.monotonic() - started
        if check(_current(edge, race_id)):
            return sent
        assert sent < limit, f"not visible through the cache after {limit}s"
        time.sleep(0.05)


def test_publishing_shows_through_the_cache_within_5_seconds_and_hits_are_served_by_it(event: dict[str, Any]) -> None:
    eve, race_id, event_id, edge = event["director"], event["raceId"], event["eventId"], event["edge"]
    assert wait_for_upload(eve, upload(eve, race_id, event_id, sheet(0)))["status"] == "READY"
    assert _current(edge, race_id)["published"] is False  # now cached at the edge for ~2 s
    eve.post(results_url(race_id, event_id, "/publish")).raise_for_status()
    took = _wait_visible(edge, race_id, lambda p: p["version"] == 1, 5.0)
    print(f"published -> visible through the cache in {took:.2f}s")

    url = f"{edge}/api/races/{race_id}/events/{event_id}/results/1?page=2&size=10"
    first, second = requests.get(url, timeout=10), requests.get(url, timeout=10)
    assert first.status_code == 200 and first.headers["X-Cache"] in ("MISS", "HIT")
    assert second.headers["X-Cache"] == "HIT" and second.json() == first.json()
    assert "max-age=86400" in second.headers["Cache-Control"]
    assert [r["bib"] for r in second.json()["results"]] == list(range(11, 21))
    # The query string is part of the key: another page or filter is another entry.
    other = requests.get(url.replace("page=2", "page=3"), timeout=10)
    assert other.headers["X-Cache"] == "MISS" and other.json()["results"][0]["bib"] == 21
    female = requests.get(url + "&gender=F", timeout=10).json()
    assert {r["gender"] for r in female["results"]} == {"F"}
    typed = f"{edge}/api/races/{race_id}/events/{event_id}/results/1/search?q=runner1"
    assert [s["bib"] for s in requests.get(typed, timeout=10).json()["suggestions"]][:2] == [1, 10]
    assert requests.get(typed, timeout=10).headers["X-Cache"] == "HIT"
    # The pointer is short-cached; errors are never cached.
    pointer = requests.get(f"{edge}/api/races/{race_id}/results", timeout=10)
    assert pointer.headers["Cache-Control"] == "public, max-age=2"
    missing = f"{edge}/api/races/{race_id}/events/{event_id}/results/99"
    assert [requests.get(missing, timeout=10).headers["X-Cache"] for _ in range(2)] == ["MISS", "MISS"]
    # Uncached API routes go straight through.
    assert requests.get(f"{edge}/api/races/{race_id}", timeout=10).headers.get("X-Cache") is None


def test_a_new_upload_is_visible_within_5_seconds_and_no_page_mixes_versions(event: dict[str, Any]) -> None:
    eve, race_id, event_id, edge = event["director"], event["raceId"], event["eventId"], event["edge"]
    start = _current(edge, race_id)["version"] or 0
    stop = threading.Event()
    seen: dict[int, int] = {}
    problems: list[str] = []

    def reader() -> None:
        session = requests.Session()
        while not stop.is_set():
            version = session.get(f"{edge}/api/races/{race_id}/results", timeout=10).json()["events"][0]["version"]
            for page in (1, 2, 3):
                body = session.get(
                    f"{edge}/api/races/{race_id}/events/{event_id}/results/{version}?page={page}", timeout=10
                ).json()
                offsets = {seconds(r["chipTime"]) - 3600 - r["bib"] * 10 for r in body["results"]}
                expected = {0} if version <= start else {60 * (version - start)}
                if body["version"] != version or offsets != expected:
                    problems.append(f"v{version} p{page}: {body['version']} {offsets}")
                seen[version] = seen.get(version, 0) + 1

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for n in (1, 2):
            ticket = upload(eve, race_id, event_id, sheet(60 * n))
            done = wait_for_upload(eve, ticket)
            assert done["status"] == "READY" and done["version"] == start + n
            took = _wait_visible(edge, race_id, lambda p, v=done["version"]: p["version"] == v, 5.0)
            print(f"v{done['version']} installed -> visible through the cache in {took:.2f}s")
            time.sleep(1.0)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert problems == []
    assert seen.get(start, 0) > 0 and seen.get(start + 2, 0) > 0, seen


def test_site_assets_come_through_the_cache(event: dict[str, Any]) -> None:
    edge = event["edge"]
    index = requests.get(f"{edge}/", timeout=10)
    assert index.status_code == 200 and "max-age=60" in index.headers["Cache-Control"]
    import re

    asset = re.search(r'(?:src|href)="/?([\w.-]+\.[0-9a-f]{8,}\.(?:js|css))"', index.text)
    assert asset, index.text[:500]
    url = f"{edge}/{asset.group(1)}"
    requests.get(url, timeout=10)
    again = requests.get(url, timeout=10)
    assert again.headers["X-Cache"] == "HIT" and "immutable" in again.headers["Cache-Control"]
