"""An event's ballot in real headless Chromium, on a phone and by keyboard only (issue 43): the race
page's ballot (its window in the race's zone, the commitment, no "hold"), applying with a partner
(errors beside their fields, the proof-of-work solved in the page), the emailed link that confirms
and shows the application, withdrawing, and the draw's page before and after the draw.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import requests
from playwright.sync_api import Page, expect

from local.stack import LocalStack
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import accessible, focused_testid, tab_to, unique
from tests.integration.admin import DirectorSession, race_body, wait_until
from tests.integration.conftest import api_session

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

PHONE: dict[str, Any] = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def _ballot_race(
    kim: DirectorSession, opens_in_s: float, closes_in: timedelta, draws_in: timedelta
) -> tuple[str, str, dict[str, Any]]:
    body = race_body((50,), name=unique("Ballot 10K"), timeZone="Europe/Berlin")
    body["events"][0] |= {"teamMinSize": 2, "teamMaxSize": 3}
    race = kim.post("/api/admin/races", json=body).json()
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    assert kim.patch(f"/api/admin/races/{rid}/fairness", json={"powDifficulty": 4}).status_code == 200
    now = datetime.now(UTC)
    settings = {"opensAt": (now + timedelta(seconds=opens_in_s)).isoformat(), "closesAt": (now + closes_in).isoformat(),
                "drawAt": (now + draws_in).isoformat()}  # fmt: skip
    saved = kim.put(f"/api/admin/races/{rid}/events/{eid}/ballot", json=settings)
    assert saved.status_code == 200, saved.text
    return rid, eid, saved.json()


def _link(stack: LocalStack, email: str) -> str:
    def found() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if email in m["to"] and m["tags"].get("kind") == "ballot-confirm"]

    (url,) = re.findall(r"https?://\S+/#/ballot/\S+", wait_until(found, timeout=45)[0]["text"])
    return str(url)


def test_on_a_phone_by_keyboard_a_runner_applies_with_a_partner_confirms_from_the_email_and_withdraws(
    new_page: Callable[..., Page], stack: LocalStack, snap: Any
) -> None:
    kim = DirectorSession(stack, "kim-ballot-site")
    rid, eid, saved = _ballot_race(kim, 5, timedelta(days=2), timedelta(days=3))
    pace = {"id": "pace", "kind": "SHORT_TEXT", "label": "Expected finish time", "required": True}
    assert kim.put(f"/api/admin/races/{rid}/events/{eid}/questions", json={"questions": [pace]}).status_code == 200
    api = api_session(stack)
    tag = rid[-6:].lower()
    ada, bo = f"ada-{tag}@example.com", f"bo-{tag}@example.com"

    page = new_page(**PHONE)
    page.goto(f"/#/races/{rid}")
    card = page.get_by_test_id("event")
    expect(card.get_by_test_id("ballot-commitment")).to_have_text(saved["settings"]["commitment"])
    expect(card.get_by_test_id("ballot-window")).to_contain_text("applications open")
    expect(card.get_by_test_id("hold-button")).to_be_hidden()
    expect(card.get_by_test_id("ballot-apply")).to_be_hidden()
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["events"][0]["ballot"]["phase"] == "OPEN", timeout=20)
    page.reload()
    expect(page.get_by_test_id("ballot-apply")).to_be_visible(timeout=20_000)
    accessible(page, "a ballot event on the race page")
    tab_to(page, "ballot-apply")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("bal-form")).to_be_visible()

    tab_to(page, "bal-0-firstName")
    for text in ("Ada", "Lovelace", ada):
        page.keyboard.type(text)
        page.keyboard.press("Tab")
    page.get_by_test_id("bal-0-dateOfBirth").fill("1990-05-01")  # a date field takes its picker's value
    tab_to(page, "question-pace")  # the event's question, asked at apply
    page.keyboard.type("3:59")
    tab_to(page, "bal-add-runner")
    page.keyboard.press("Enter")
    assert focused_testid(page) == "bal-1-firstName"
    page.keyboard.type("Bo")
    page.keyboard.press("Tab")
    page.keyboard.type("Lee")
    page.keyboard.press("Tab")
    page.keyboard.type("bo-at-example")
    page.get_by_test_id("bal-1-dateOfBirth").fill("1992-01-31")
    tab_to(page, "bal-apply")
    page.keyboard.press("Enter")
    # The partner's mistyped address and unanswered question are named beside their fields, and
    # the focus goes to the first.
    expect(page.get_by_test_id("bal-1-email-error")).to_contain_text("name@example.com")
    expect(page.get_by_test_id("error-partners.0.answers.pace")).to_contain_text("answer this question")
    assert focused_testid(page) == "bal-1-email"
    page.keyboard.press("Control+A")
    page.keyboard.type(bo)
    tab_to(page, "question-pace")  # the partner's (the applicant's is behind the focus)
    page.keyboard.type("4:10")
    tab_to(page, "bal-apply")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("bal-sent")).to_contain_text("Check your inbox", timeout=30_000)
    snap(page, "applied")

    # The emailed link confirms; the token leaves the address bar; the group shows.
    page.goto(_link(stack, ada).replace(stack.url, ""))
    expect(page.get_by_test_id("bal-state")).to_have_attribute("data-state", "CONFIRMED", timeout=20_000)
    assert page.url.endswith("#/ballot")
    expect(page.get_by_test_id("bal-group-size")).to_contain_text("2 runners")
    expect(page.get_by_test_id("bal-answer-pace")).to_have_text("3:59")
    accessible(page, "my ballot application")

    # Withdrawing asks first; "no" keeps it, "yes" withdraws.
    tab_to(page, "bal-withdraw-start")
    page.keyboard.press("Enter")
    assert focused_testid(page) == "bal-withdraw-yes"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    assert focused_testid(page) == "bal-withdraw-start"
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("bal-state")).to_have_attribute("data-state", "WITHDRAWN", timeout=20_000)
    figures = kim.get(f"/api/admin/races/{rid}/events/{eid}/ballot").json()
    assert (figures["confirmed"], figures["withdrawn"]) == (0, 1)

    # The draw's page before the draw: when it will be, and the commitment.
    tab_to(page, "bal-draw-link")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("bal-not-drawn")).to_contain_text("Not drawn yet")
    expect(page.get_by_test_id("bal-commitment")).to_have_text(saved["settings"]["commitment"])
    accessible(page, "the draw before it ran")
    snap(page, "withdrawn")


def test_after_the_draw_its_page_shows_the_seed_the_list_and_how_to_check_it(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    from tests.integration.test_ballot_draw import _applications

    kim = DirectorSession(stack, "kim-ballot-drawn")
    rid, eid, saved = _ballot_race(kim, 2, timedelta(seconds=3), timedelta(seconds=4))
    _applications(backend, rid, eid, [1, 2, 1, 3, 1], f"site{rid[-4:].lower()}")
    api = api_session(stack)
    wait_until(lambda: api.get(f"/api/races/{rid}/events/{eid}/ballot/draw").status_code == 200, timeout=60, every=1)
    page = new_page(**PHONE)
    page.goto(f"/#/ballot/draw/{rid}/{eid}")
    expect(page.get_by_test_id("bal-seed")).to_have_text(re.compile(r"^[0-9a-f]{64}$"), timeout=20_000)
    expect(page.get_by_test_id("bal-commitment")).to_have_text(saved["settings"]["commitment"])
    expect(page.get_by_test_id("bal-figures")).to_contain_text("8")  # applications
    expect(page.get_by_test_id("bal-verify")).to_contain_text("tools/verify_draw.py")
    listed = page.get_by_test_id("bal-list-page").first.get_attribute("href")
    assert listed and requests.get(f"{stack.url}{listed}", timeout=10).text.startswith("ticket,size\n")
    accessible(page, "the draw after it ran")
    snap(page, "drawn")
    # The race page: the seed beside the commitment it was committed by, and what the draw gave.
    seed = api.get(f"/api/races/{rid}/events/{eid}/ballot/draw").json()["seed"]
    page.goto(f"/#/races/{rid}")
    expect(page.get_by_test_id("ballot-seed")).to_have_text(seed, timeout=20_000)
    expect(page.get_by_test_id("ballot-commitment")).to_have_text(saved["settings"]["commitment"])
    expect(page.get_by_test_id("ballot-window")).to_contain_text("Drawn on")


def test_by_keyboard_a_guaranteed_entrys_code_holds_a_kept_place_after_the_draw(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    from tests.integration.test_ballot_draw import _applications

    kim = DirectorSession(stack, "kim-ballot-kept-site")
    rid, eid, _ = _ballot_race(kim, 2, timedelta(seconds=3), timedelta(seconds=4))
    kim.open_now(rid)
    code = {"code": "CHARITY-SITE", "kind": "PERCENT", "percent": 100, "maxUses": 1, "guaranteed": True}
    assert kim.post(f"/api/admin/races/{rid}/codes", json=code).status_code == 201
    _applications(backend, rid, eid, [1, 2], f"gte{rid[-4:].lower()}")
    api = api_session(stack)
    wait_until(lambda: api.get(f"/api/races/{rid}/events/{eid}/ballot/draw").status_code == 200, timeout=60, every=1)

    page = new_page(**PHONE)
    page.goto(f"/#/races/{rid}")
    expect(page.get_by_test_id("ballot-guaranteed")).to_be_visible(timeout=20_000)
    tab_to(page, "ballot-guaranteed")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("gte-code")).to_be_visible()
    tab_to(page, "gte-code")
    page.keyboard.type("SPRING-NONE")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("gte-code-error")).to_contain_text("no code SPRING-NONE")
    assert focused_testid(page) == "gte-code"
    page.keyboard.press("Control+A")
    page.keyboard.type("charity-site")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"#/holds/hold_"), timeout=20_000)
    hold_id = page.url.rsplit("/", 1)[1]
    assert api.get(f"/api/holds/{hold_id}").json()["code"] == "CHARITY-SITE"
    accessible(page, "the hold page of a guaranteed entry")
    snap(page, "guaranteed")


def test_a_director_sets_an_events_ballot_in_the_console_in_the_races_zone_and_sees_its_commitment(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, api: Any, demo_seed: str, snap: Any
) -> None:
    from tests.browser.steps import console_race
    from tests.browser.test_console import CONSOLE, signed_in

    assert stack.directors is not None
    race = console_race(backend, stack.directors.demo_sub, name=unique("Ballot Console 10K"), timeZone="Asia/Tokyo")
    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    page.goto(f"{CONSOLE}#/races/{race.raceId}/ballot")
    expect(page.get_by_test_id("bal-fig-0")).to_have_text("No ballot")
    accessible(page, "the ballot's settings")
    # A draw before the close is named beside its field; then a valid ballot saves.
    tokyo = datetime.now(ZoneInfo("Asia/Tokyo")).replace(hour=9, minute=0, second=0, microsecond=0)
    local = {k: (tokyo + timedelta(days=d, hours=h)).strftime("%Y-%m-%dT%H:%M")
             for k, d, h in (("opens", 10, 0), ("closes", 20, 12), ("early", 19, 3), ("draw", 21, 3))}  # fmt: skip
    page.get_by_label("Applications open").fill(local["opens"])
    page.get_by_label("Applications close").fill(local["closes"])
    page.get_by_label("Draw time").fill(local["early"])
    page.get_by_label("Places kept out of the draw").fill("5")
    page.get_by_test_id("bal-save").click()
    expect(page.get_by_test_id("bal-drawAt-error")).to_contain_text("at or after closesAt")
    page.get_by_label("Draw time").fill(local["draw"])
    page.get_by_test_id("bal-save").click()
    expect(page.get_by_test_id("bal-admin-status")).to_contain_text("the ballot is saved")
    expect(page.get_by_test_id("bal-fig-0")).to_have_text("Set: the window has not opened")
    expect(page.get_by_test_id("bal-fig-1")).to_have_text("45")
    expect(page.get_by_test_id("bal-fig-4")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))
    snap(page, "console")
    page.reload()
    expect(page.get_by_label("Applications open")).to_have_value(local["opens"])  # Tokyo's wall clock
    expect(page.get_by_label("Draw time")).to_have_value(local["draw"])
