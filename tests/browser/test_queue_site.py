"""The opening's waiting room through the site, in headless Chromium against the local stack:
the page solves the proof-of-work, keeps its device and queue tokens, shows the position
and the estimated wait, carries the admission to the hold; a second tab gets no second
place; and a 429's Retry-After is waited out before the page asks again."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect
from racecap_cdk.constructs import edge

from local.auth import director_sub
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import event_card, first_event_id, open_race, published, unique, wait_for_form
from tests.integration.admin import DirectorSession
from tests.integration.runners import Runner

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

DIRECTOR = "kim-browser-queue"
AHEAD = 4  # runners who joined before the browser's runner
BEHIND = 8  # and after it: admitted over the 40 s that follow, so the queue stays on meanwhile
RATE = 12  # per minute: one admission every 5 s once resumed
RETRY_AFTER_S = 3


@pytest.fixture
def kim(stack: Any) -> Any:
    session = DirectorSession(stack, DIRECTOR)
    yield session
    session.close()


def queued_open_race(backend: Any, kim: Any, **settings: Any) -> str:
    race_id = published(backend, backend.create_race([50], name=unique("Queue 10K"), owner=director_sub(DIRECTOR)))
    body = {"queueEnabled": True, "powDifficulty": 10, "admissionRatePerMinute": RATE, **settings}
    resp = kim.patch(f"/api/admin/races/{race_id}/fairness", json=body)
    assert resp.status_code == 200, resp.text
    return race_id


def test_with_the_queue_on_a_runner_waits_is_admitted_and_holds_and_a_second_tab_gets_no_second_place(
    new_page: Callable[..., Page], api: Any, backend: Any, kim: Any, snap: Any
) -> None:
    race_id = queued_open_race(backend, kim)
    assert kim.post(f"/api/admin/races/{race_id}/queue/pause").status_code == 200
    ahead = [Runner(api) for _ in range(AHEAD)]
    for r in ahead:
        assert r.enter(race_id).status_code == 200

    page = new_page()
    page.goto(f"/?fastpoll=1#/races/{race_id}")  # the race page sends a runner not yet admitted to the queue
    expect(page).to_have_url(re.compile(rf"#/races/{race_id}/queue$"))
    state = page.get_by_test_id("queue-state")
    expect(state).to_have_attribute("data-state", "PAUSED", timeout=60_000)  # after the page's proof-of-work
    position = page.get_by_test_id("queue-position")
    expect(position).to_have_text(f"Your place in line: {AHEAD + 1}")
    entered = kim.get(f"/api/admin/races/{race_id}/fairness").json()["queue"]["entered"]
    assert entered == AHEAD + 1
    snap(page, "paused")

    # A second tab of the same browser (same device): the same place, not a second one.
    second = page.context.new_page()
    second.goto(f"/?fastpoll=1#/races/{race_id}/queue")
    expect(second.get_by_test_id("queue-position")).to_have_text(f"Your place in line: {AHEAD + 1}")
    assert kim.get(f"/api/admin/races/{race_id}/fairness").json()["queue"]["entered"] == entered
    second.close()

    # Runners behind this one keep the queue on (an empty queue switches itself off after 10 s).
    for r in [Runner(api) for _ in range(BEHIND)]:
        assert r.enter(race_id).status_code == 200

    # Resumed: the place counts down with an estimate, then the runner is admitted and holds.
    assert kim.post(f"/api/admin/races/{race_id}/queue/resume").status_code == 200
    expect(state).to_have_attribute("data-state", "WAITING", timeout=40_000)
    expect(page.get_by_test_id("queue-wait")).to_contain_text("Estimated wait")
    snap(page, "waiting")
    expect(page).to_have_url(re.compile(rf"#/races/{race_id}$"), timeout=90_000)
    event_card(page).get_by_test_id("hold-button").click()
    hold_id = wait_for_form(page)
    assert hold_id
    assert kim.post(f"/api/admin/races/{race_id}/queue/pause").status_code == 200  # those behind stay behind

    # Without an admission (another browser, another device), the hold is refused: back to the queue.
    stranger = new_page()
    stranger.goto(f"/?fastpoll=1#/races/{race_id}")
    expect(stranger).to_have_url(re.compile(rf"#/races/{race_id}/queue$"))
    refused = Runner(api).hold(race_id, first_event_id(api, race_id))
    assert refused.status_code == 403 and refused.json()["error"] == "QUEUE_ADMISSION_REQUIRED"


def test_a_429_is_waited_out_for_its_retry_after_before_the_page_asks_again(page: Page, api: Any, backend: Any) -> None:
    race_id = published(backend, backend.create_race([20], name=unique("Busy 5K")))
    # The WAF's rate rule answers at the edge (none locally): its 429, as CDK declares it,
    # for the first hold; the page must wait its Retry-After before asking again.
    limited: list[float] = []

    def waf(route: Route) -> None:
        if limited or route.request.method != "POST":
            route.fallback()
            return
        limited.append(time.monotonic())
        route.fulfill(
            status=429,
            headers={"Content-Type": "application/json", "Retry-After": str(RETRY_AFTER_S)},
            body=json.dumps(edge.RATE_LIMITED),
        )

    sent: list[tuple[float, str]] = []
    page.on("request", lambda req: sent.append((time.monotonic(), req.method + " " + req.url)))
    page.route(re.compile(r"/api/races/[^/]+/events/[^/]+/holds$"), waf)
    open_race(page, race_id)
    event_card(page).get_by_test_id("hold-button").click()
    status = event_card(page).get_by_test_id("hold-status")
    expect(status).to_contain_text("Busy")  # what the runner sees: busy, retrying by itself
    expect(event_card(page).get_by_test_id("hold-status-detail")).to_contain_text(re.compile(r"Attempt 2 in \d+ s"))
    wait_for_form(page)
    assert len(limited) == 1
    # Nothing went to the API in the Retry-After after the 429, from any part of the page.
    after = [(t - limited[0], what) for t, what in sent if t > limited[0] and "/api/" in what]
    assert after and after[0][0] >= RETRY_AFTER_S, after
    assert after[0][1].startswith("POST") and after[0][1].endswith("/holds")
