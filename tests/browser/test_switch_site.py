"""Switching event and deferring to next year in real headless Chromium, on a phone and by
keyboard only (issue 41): the runner sees what each event costs or refunds before confirming,
switches to a cheaper one and sees the new bib and the refund; switches to a dearer one paying
the difference in the page (a declined card first, then a good one: the Stripe.js stand-in);
defers to the next edition and sees the personal code.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from racecap.setup.models import EventDraft

from local.stack import LocalStack
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import CARD_FRAME, accessible, console_race, focused_testid, tab_to, unique
from tests.browser.test_console import CONSOLE, signed_in
from tests.browser.test_console_refund_policy import admin_get, in_words
from tests.browser.test_transfer_site import PHONE, _mail_link
from tests.integration.admin import DirectorSession, race_body, wait_until
from tests.integration.conftest import api_session
from tests.integration.flows import hold_and_register, runner, wait_confirmed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]


def _day(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).date().isoformat()


def _race(stack: LocalStack, who: str, policy: dict[str, Any]) -> tuple[str, list[str], DirectorSession]:
    """An open race of three events (45.00, 25.00 and 60.00 EUR) under ``policy``."""
    kim = DirectorSession(stack, who)
    body = race_body((5, 5, 5))
    for event, price in zip(body["events"], (4500, 2500, 6000), strict=True):
        event["priceCents"] = price
    race = kim.post("/api/admin/races", json=body).json()
    rid = race["raceId"]
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": policy}).status_code == 200
    kim.open_now(rid)
    api = api_session(stack)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    return rid, [e["eventId"] for e in race["events"]], kim


def _registered(stack: LocalStack, rid: str, eid: str, email: str, new_page: Callable[..., Page]) -> Page:
    api = api_session(stack)
    _, reg_id = hold_and_register(api, rid, eid, runner(email))
    wait_confirmed(api, [reg_id])
    page = new_page(**PHONE)
    page.goto(_mail_link(stack, email, "confirmation", "#/my/"))
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CONFIRMED")
    return page


def _choose(page: Page, event_id: str) -> None:
    """Into the radio group by Tab (it lands on one of its choices), then arrows to the event,
    as a keyboard user picks a radio button; Space checks it."""
    for _ in range(80):
        page.keyboard.press("Tab")
        if (focused_testid(page) or "").startswith("switch-to-"):
            break
    else:
        raise AssertionError("Tab never reached the events to switch to")
    for _ in range(6):
        if focused_testid(page) == f"switch-to-{event_id}":
            break
        page.keyboard.press("ArrowDown")
    assert focused_testid(page) == f"switch-to-{event_id}"
    page.keyboard.press("Space")
    expect(page.get_by_test_id(f"switch-to-{event_id}")).to_be_checked()


def _pay_by_keyboard(page: Page, number: str) -> None:
    for _ in range(40):
        focused = page.frame_locator(CARD_FRAME).locator("#number").evaluate("(el) => el === document.activeElement")
        if focused:
            break
        page.keyboard.press("Tab")
    else:
        raise AssertionError("Tab never reached the card number in the provider's frame")
    for i, text in enumerate((number, "12 / 34", "123")):
        if i:
            page.keyboard.press("Tab")
        page.keyboard.press("Control+A")
        page.keyboard.type(text)
    tab_to(page, "switch-confirm", limit=10)  # out of the provider's frame: the next control is Pay
    page.keyboard.press("Enter")


def test_on_a_phone_by_keyboard_a_runner_sees_the_refund_first_then_switches_to_a_cheaper_event(
    new_page: Callable[..., Page], stack: LocalStack
) -> None:
    rid, (ten, five, _), _ = _race(stack, "kim-switch-site", {"switchesUntil": _day(20)})
    page = _registered(stack, rid, ten, f"ada-{rid[-6:].lower()}@example.com", new_page)
    section = page.get_by_test_id("my-switch")
    expect(section.get_by_role("heading", name="Switch to another event")).to_be_visible()
    expect(section.get_by_test_id(f"switch-note-{five}")).to_contain_text("20.00")  # said before confirming
    expect(section.get_by_test_id(f"switch-note-{five}")).to_contain_text("refunded")
    accessible(page, "the switch section")
    _choose(page, five)
    tab_to(page, "switch-confirm")
    page.keyboard.press("Enter")
    moved = page.get_by_test_id("my-moved")
    expect(moved).to_contain_text("Your new bib: 1", timeout=20_000)
    expect(moved).to_contain_text("€20.00 is refunded")
    expect(page.get_by_role("heading", level=1)).to_contain_text("Event 1")
    accessible(page, "switched")


def test_a_switch_to_a_dearer_event_is_paid_in_the_page_after_a_declined_card(
    new_page: Callable[..., Page], stack: LocalStack
) -> None:
    rid, (ten, _, half), _ = _race(stack, "kim-switch-site-pay", {"switchesUntil": _day(20)})
    page = _registered(stack, rid, ten, f"bo-{rid[-6:].lower()}@example.com", new_page)
    section = page.get_by_test_id("my-switch")
    expect(section.get_by_test_id(f"switch-note-{half}")).to_contain_text("15.00")
    _choose(page, half)
    expect(page.get_by_test_id("switch-confirm")).to_contain_text("Switch and pay €15.00")
    tab_to(page, "switch-confirm")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("switch-confirm")).to_contain_text("Pay €15.00 and switch", timeout=20_000)
    _pay_by_keyboard(page, "4000 0000 0000 0002")
    expect(page.get_by_test_id("switch-card-error")).to_contain_text("try another card", timeout=20_000)
    # A reload mid-switch: the event being switched to is chosen again (its place is still held),
    # with the way to cancel it; going on resumes the same switch, not another.
    page.reload()
    section = page.get_by_test_id("my-switch")
    expect(section.get_by_test_id(f"switch-to-{half}")).to_be_checked()
    expect(section.get_by_test_id(f"switch-to-{half}")).to_be_enabled()
    expect(section.get_by_test_id(f"switch-note-{half}")).to_contain_text("held while you finish")
    expect(section.get_by_test_id("switch-give-up")).to_be_visible()
    tab_to(page, "switch-confirm")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("switch-confirm")).to_contain_text("Pay €15.00 and switch", timeout=20_000)
    _pay_by_keyboard(page, "4242 4242 4242 4242")
    expect(page.get_by_test_id("my-moved")).to_contain_text("Your new bib: 1", timeout=30_000)
    expect(page.get_by_role("heading", level=1)).to_contain_text("Event 2")


def test_on_a_phone_by_keyboard_a_runner_defers_to_next_year_and_gets_their_code(
    new_page: Callable[..., Page], stack: LocalStack
) -> None:
    rid, (ten, _, _), kim = _race(stack, "kim-defer-site", {"deferralsUntil": _day(20), "deferralFeeCents": 500})
    assert kim.post(f"/api/admin/races/{rid}/copy", json={"name": "Next Year"}).status_code == 201
    page = _registered(stack, rid, ten, f"cy-{rid[-6:].lower()}@example.com", new_page)
    section = page.get_by_test_id("my-defer")
    expect(section.get_by_test_id("defer-note")).to_have_attribute("data-credit", "4000")
    expect(section.get_by_test_id("defer-note")).to_contain_text("organiser keeps")
    accessible(page, "the deferral section")
    tab_to(page, "defer-confirm")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("my-moved")).to_contain_text("DEFER-", timeout=20_000)
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CANCELLED")


def test_on_a_phone_the_director_lets_runners_switch_and_defer_and_it_is_kept(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, api: Any, demo_seed: str
) -> None:
    assert stack.directors is not None
    race = console_race(
        backend, stack.directors.demo_sub, name=unique("Moves 10K"), currency="EUR", race_in=timedelta(days=120),
        events=[EventDraft(name="10K", cap=50, priceCents=4500), EventDraft(name="5K", cap=50, priceCents=2500)],
    )  # fmt: skip
    until = date.fromisoformat(race.raceDate) - timedelta(days=14)
    page = signed_in(new_page, demo_seed, **PHONE)
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    section = page.get_by_test_id("policy-section")
    summary = section.get_by_test_id("policy-summary")
    expect(summary).to_contain_text("Runners may not switch event.")
    expect(summary).to_contain_text("Runners may not defer to the next edition.")
    for label in ("Runners may switch to another event until", "Runners may defer to the next edition until"):
        day_input = section.get_by_label(label)
        day_input.focus()  # a date control's segments by keyboard: month, day, year (en-US)
        page.keyboard.type(f"{until:%m%d%Y}")
        expect(day_input).to_have_value(until.isoformat())
    fee = section.get_by_label("Kept from a deferring runner's credit (EUR)")
    fee.focus()
    page.keyboard.type("5.00")
    expect(summary).to_contain_text(f"Runners may switch to another event until {in_words(until)}")
    expect(summary).to_contain_text(f"Runners may defer to the next edition until {in_words(until)}")
    expect(summary).to_contain_text("you keep 5.00 EUR")
    accessible(page, "switch and deferral policy typed")
    tab_to(page, "save-policy")
    page.keyboard.press("Enter")
    expect(section.get_by_test_id("policy-saved")).to_have_text("Runners' changes saved.")
    policy = admin_get(page, stack, api, race.raceId)["refundPolicy"]
    assert (policy["switchesUntil"], policy["deferralsUntil"], policy["deferralFeeCents"]) == (
        until.isoformat(), until.isoformat(), 500,
    )  # fmt: skip
    page.reload()
    section = page.get_by_test_id("policy-section")
    expect(section.get_by_label("Runners may defer to the next edition until")).to_have_value(until.isoformat())


def test_on_a_phone_by_keyboard_a_captain_moves_the_whole_team_answering_each_members_size(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any
) -> None:
    kim = DirectorSession(stack, "kim-team-switch-site")
    body = race_body((10, 10))
    for event, price in zip(body["events"], (2500, 2000), strict=True):
        event |= {"priceCents": price, "teamMinSize": 2, "teamMaxSize": 4}
    race = kim.post("/api/admin/races", json=body).json()
    rid, (ten, five) = race["raceId"], [e["eventId"] for e in race["events"]]
    assert kim.patch(f"/api/admin/races/{rid}", json={"refundPolicy": {"switchesUntil": _day(20)}}).status_code == 200
    shirt = {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "required": True,
             "options": [{"id": "M", "label": "Medium"}, {"id": "L", "label": "Large"}]}  # fmt: skip
    saved = kim.put(
        f"/api/admin/races/{rid}/events/{five}/questions", json={"questions": [shirt], "expectedVersion": 0}
    )
    assert saved.status_code == 200, saved.text
    kim.open_now(rid)
    api = api_session(stack)
    wait_until(lambda: api.get(f"/api/races/{rid}").json()["status"] == "OPEN", timeout=5)
    tag = rid[-6:].lower()
    members = [runner(f"owl{i}.{tag}@example.com", token=None) | {"firstName": f"Owl{i}"} for i in range(2)]
    hold = api.post(f"/api/races/{rid}/events/{ten}/teams", json={"places": 2}).json()
    paid = api.post(f"/api/holds/{hold['holdId']}/team",
                    json={"teamName": "Owls", "members": members, "paymentMethod": "pm_card_visa"})  # fmt: skip
    assert paid.status_code == 202, paid.text
    ids = backend.holds().get(hold["holdId"]).memberIds
    wait_confirmed(api, ids)

    page = new_page(**PHONE)
    page.goto(_mail_link(stack, members[0]["email"], "confirmation", "#/my/"))
    section = page.get_by_test_id("my-switch")
    expect(section.get_by_test_id(f"switch-note-{five}")).to_contain_text("2 places")  # the whole team, said first
    expect(section.get_by_test_id(f"switch-note-{five}")).to_contain_text("10.00")
    _choose(page, five)
    expect(section.get_by_test_id("switch-member")).to_have_count(2)
    expect(section.get_by_test_id("switch-member").nth(1)).to_contain_text("Owl1")
    accessible(page, "a team's switch, each member's questions")
    # Sent unanswered: the first member's size is marked and focused; the arrow key picks Medium
    # in the closed list, and again for the second member; then the team moves.
    for i in range(2):
        tab_to(page, "switch-confirm")
        page.keyboard.press("Enter")
        size = page.locator(f'[name="members.{i}.answers.shirt"]')
        expect(size).to_be_focused()
        page.keyboard.press("ArrowDown")
        expect(size).to_have_value("M")
    tab_to(page, "switch-confirm")
    page.keyboard.press("Enter")
    moved = page.get_by_test_id("my-moved")
    expect(moved).to_contain_text("Your new bib: 1", timeout=20_000)
    expect(moved).to_contain_text("€10.00 is refunded")
    regs = [backend.registrations().get(r) for r in ids]
    assert [(r.eventId, r.bib, r.answers) for r in regs] == [(five, 1, '{"shirt":"M"}'), (five, 2, '{"shirt":"M"}')]
