"""Results in real headless Chromium, through the edge cache (nginx) like a runner behind
CloudFront: the race page links to published results, pages and filters, the search box
driven by the keyboard, a runner's result with splits.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from local.stack import LocalStack
from tests.browser.conftest import CHROMIUM
from tests.integration.admin import DirectorSession
from tests.integration.results import registration_item, results_url, seed_registrations, upload, wait_for_upload

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

NAMES = [("Zoë", "Łukasiewicz"), ("Zoltan", "Kiss"), ("Zora", "Neale")] + [
    (f"Runner{i}", f"Family{i}") for i in range(22)
]


def _sheet() -> str:
    lines = ["bib,chip_time,gun_time,status,category,split_10k"]
    for bib in range(1, len(NAMES) + 1):
        t = 3000 + bib * 20
        lines.append(f"{bib},0:{t // 60:02d}:{t % 60:02d},0:{t // 60:02d}:{t % 60 + 0:02d},"
                     f"{'DNF' if bib == 25 else ''},{'FM'[bib % 2] if bib > 1 else 'F'},0:25:{bib:02d}")  # fmt: skip
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def results(stack: LocalStack, backend: Any) -> Iterator[dict[str, Any]]:
    ada = DirectorSession(stack, "ada-results")
    race = ada.post(
        "/api/admin/races",
        json={
            "name": "Results Browser Race",
            "location": "Riverside",
            "listing": "UNLISTED",  # its page links to the results; a draft has no page
            "raceDate": "2099-05-01",
            "registrationOpensAt": "2099-01-01T09:00:00Z",
            "registrationClosesAt": "2099-04-01T09:00:00Z",
            "events": [{"name": "Quarter", "cap": 100, "priceCents": 2000}],
        },
    ).json()
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    seed_registrations(
        backend,
        (registration_item(race_id, event_id, b, f, last, "1990-01-01") for b, (f, last) in enumerate(NAMES, start=1)),
    )
    assert wait_for_upload(ada, upload(ada, race_id, event_id, _sheet()))["status"] == "READY"
    ada.post(results_url(race_id, event_id, "/publish")).raise_for_status()
    yield {"raceId": race_id, "eventId": event_id, "edge": stack.edge_url}
    ada.close()


def test_results_pages_from_the_race_page_with_filters(page: Page, results: dict[str, Any]) -> None:
    edge, race_id = results["edge"], results["raceId"]
    page.goto(f"{edge}/#/races/{race_id}")
    link = page.get_by_test_id("results-link")
    expect(link).to_have_text("Results: 24 finishers", timeout=15_000)
    link.click()
    rows = page.get_by_test_id("result-row")
    expect(rows).to_have_count(10)
    expect(rows.first).to_contain_text("Zoë Łukasiewicz")
    expect(page.get_by_test_id("page-of")).to_have_text("Page 1 of 3")
    page.get_by_test_id("next-page").click()
    expect(page.get_by_test_id("page-of")).to_have_text("Page 2 of 3")
    expect(rows.first).to_have_attribute("data-bib", "11")
    page.get_by_test_id("next-page").click()
    expect(rows.last).to_contain_text("DNF")  # the runner who did not finish comes last, with no place
    page.get_by_test_id("gender-filter").select_option("F")
    expect(page.get_by_test_id("page-of")).to_have_text("Page 1 of 2")
    genders = [c.strip() for c in rows.locator("td:nth-child(4)").all_inner_texts()]
    assert genders and set(genders) == {"F"}
    expect(rows.nth(1).locator("td").nth(4)).to_have_text("2")  # second woman: gender place 2


def test_search_with_the_keyboard_opens_a_runners_result(page: Page, results: dict[str, Any]) -> None:
    edge, race_id, event_id = results["edge"], results["raceId"], results["eventId"]
    page.goto(f"{edge}/#/races/{race_id}/events/{event_id}/results")
    box = page.get_by_role("combobox", name="Find a runner")
    box.focus()
    box.press_sequentially("z")
    expect(page.get_by_test_id("suggestions")).to_be_hidden()  # one letter: nothing asked yet
    box.press_sequentially("o")  # accents need not be typed: "zo" finds Zoë
    options = page.get_by_role("listbox", name="Runners").get_by_role("option")
    expect(options).to_have_count(3)
    expect(box).to_have_attribute("aria-expanded", "true")
    box.press("ArrowDown")
    box.press("ArrowDown")
    box.press("ArrowDown")
    box.press("ArrowDown")  # wraps to the first
    box.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    expect(box).to_have_attribute("aria-activedescendant", "suggestion-1")
    box.press("ArrowUp")
    expect(options.nth(0)).to_have_attribute("aria-selected", "true")
    box.press("Escape")
    expect(page.get_by_test_id("suggestions")).to_be_hidden()
    box.press_sequentially("l")  # "zol": Zoltan only
    expect(options).to_have_count(1)
    box.press("ArrowDown")
    box.press("Enter")
    expect(page.get_by_test_id("page-title")).to_have_text("Zoltan Kiss")
    expect(page.get_by_test_id("runner-place")).to_have_text("2 of 24")


def test_a_runners_result_shows_places_and_splits(page: Page, results: dict[str, Any]) -> None:
    edge, race_id, event_id = results["edge"], results["raceId"], results["eventId"]
    page.goto(f"{edge}/#/races/{race_id}/events/{event_id}/results/1")
    expect(page.get_by_test_id("page-title")).to_have_text("Zoë Łukasiewicz")
    expect(page.get_by_test_id("runner-place")).to_have_text("1 of 24")
    expect(page.get_by_test_id("runner-gender-place")).to_have_text("1 of 13")  # bib 1 and the 12 even bibs
    expect(page.get_by_test_id("splits")).to_contain_text("0:25:01")
    page.goto(f"{edge}/#/races/{race_id}/events/{event_id}/results/999")
    expect(page.get_by_test_id("error")).to_contain_text("Bib 999 has no result")
