"""The live view second by second (issue 42): 60 registrations through the API, and within 10 s
of the writer's last commit the view shows them confirmed, its per-second table (the charts'
text alternative) sums to each event's confirmed, every second in the race's zone; a reload
and a replay of the span show the same series, and the CSV's sums equal it.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

import csv
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Page, expect
from racecap.setup.models import EventDraft

import blueprint
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import accessible, open_in_tokyo
from tests.browser.test_console import signed_in_far_from_the_race
from tests.integration.admin import wait_until
from tests.integration.flows import concurrently, hold_and_register, runner, wait_confirmed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

CONSOLE = blueprint.CONSOLE_PATH


def table_sums(page: Page) -> Counter[str]:
    """The per-second table's columns summed (each cell says what it counts)."""
    sums: Counter[str] = Counter()
    for cell in page.get_by_test_id("live-seconds").locator("td").all():
        sums[cell.get_attribute("data-count") or "?"] += int(cell.inner_text())
    return sums


def test_sixty_registrations_show_second_by_second_in_the_races_zone_and_replay_and_download_the_same(
    new_page, stack, backend, demo_seed, snap
) -> None:
    assert stack.directors is not None
    page = signed_in_far_from_the_race(new_page, demo_seed)
    events = [EventDraft(name="10K", cap=100, priceCents=3000), EventDraft(name="5K", cap=100, priceCents=2000)]
    race, api, (ten, five) = open_in_tokyo(stack, backend, "Pulse 10K", events)
    page.goto(f"{CONSOLE}#/races/{race.raceId}/live")
    expect(page.get_by_test_id("big-confirmed")).to_have_text("0")

    started = datetime.now(UTC)
    jobs = [ten] * 40 + [five] * 20
    regs = concurrently(lambda e: hold_and_register(api, race.raceId, e, runner())[1], jobs, workers=10)
    wait_confirmed(api, regs, timeout=120)
    committed = time.monotonic()

    expect(page.get_by_test_id("big-confirmed")).to_have_text("60", timeout=10_000)
    wait_until(lambda: table_sums(page)["confirmed"] == 60, timeout=max(1.0, 10 - (time.monotonic() - committed)))
    live = table_sums(page)
    assert (live["confirmed"], live[f"{ten}|confirmed"], live[f"{five}|confirmed"]) == (60, 40, 20)
    assert live["holds"] == 60 and live["queued"] == 60
    first_row = page.get_by_test_id("live-seconds").locator("tr th").first.inner_text()
    assert first_row.endswith("(Asia/Tokyo)")
    shown = datetime.strptime(first_row.split(" ")[0], "%H:%M:%S").time()
    tokyo = datetime.now(ZoneInfo("Asia/Tokyo"))
    assert abs((datetime.combine(tokyo.date(), shown, tzinfo=tokyo.tzinfo) - tokyo).total_seconds()) < 120
    expect(page.get_by_test_id("live-chart").locator("canvas")).to_be_visible()
    expect(page.get_by_test_id("live-sold-chart").locator("canvas")).to_be_visible()
    accessible(page, "the live view, second by second")
    snap(page, "live")

    page.reload()  # the same seconds again, from what was stored
    expect(page.get_by_test_id("big-confirmed")).to_have_text("60")
    wait_until(lambda: table_sums(page) == live, timeout=10)

    # A replay of the span, typed in the race's zone (the browser is in Los Angeles).
    tz = ZoneInfo("Asia/Tokyo")
    page.locator("#replay-from").fill(started.astimezone(tz).strftime("%Y-%m-%dT%H:%M"))
    page.locator("#replay-to").fill(
        (datetime.now(UTC) + timedelta(minutes=1)).astimezone(tz).strftime("%Y-%m-%dT%H:%M")
    )
    page.get_by_test_id("replay-form").get_by_role("button", name="Replay").click()
    expect(page.get_by_test_id("live-mode")).to_contain_text("Replay from")
    wait_until(lambda: table_sums(page) == live, timeout=10)

    with page.expect_download() as download:
        page.get_by_test_id("live-csv").click()
    rows = list(csv.DictReader(Path(download.value.path()).read_text().splitlines()))
    from_csv: Counter[str] = Counter()
    for row in rows:
        from_csv[row["count"]] += int(row["n"])
        if row["count"] == "confirmed":
            from_csv[f"{row['eventId']}|confirmed"] += int(row["n"])
    assert {k: v for k, v in from_csv.items() if v} == {k: v for k, v in live.items() if v}
    assert "token" not in download.value.url.lower()
