"""The runners' site in real headless Chromium against the local stack: find a race, hold a
place, register, pay, wait, confirmed -- and every way that can go wrong for a runner.

Each test leaves ``test-artifacts/browser/<test>.png`` (some also ``<test>--<step>.png``)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page, Route, expect

from tests.browser.conftest import CHROMIUM
from tests.browser.steps import (
    CARD_FRAME,
    Runner,
    contrast_failures,
    event_card,
    expect_confirmed,
    expire_hold,
    field,
    fill_details,
    first_event_id,
    focused_testid,
    hold_place,
    horizontal_overflow,
    new_race,
    open_race,
    open_race_list,
    pay,
    scheduled_race,
    type_card,
    unique,
    wait_for_form,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

# Records, on the page's own clock, when the waiting screen asks for the registration's status.
RECORD_POLLS = """(() => {
  const original = window.fetch;
  window.__polls = [];
  window.fetch = function (url, options) {
    if (/\\/registrations\\//.test(String(url)) && (!options || (options.method || 'GET') === 'GET')) {
      window.__polls.push(Date.now());
    }
    return original.apply(this, arguments);
  };
})()"""


def test_a_runner_goes_from_the_race_list_to_a_bib(page: Page, backend, snap) -> None:
    name = unique("Harbor 10K")
    new_race(backend, name, [10], location="Portland, OR")
    runner = Runner.new()
    page.add_init_script(RECORD_POLLS)
    # The first status answer is "still queued, come back in 20 s", as in a burst.
    queued_once: list[str] = []

    def first_answer_queued(route: Route) -> None:
        if queued_once:
            route.fallback()
            return
        queued_once.append(route.request.url)
        route.fulfill(
            status=200,
            headers={"Content-Type": "application/json", "Retry-After": "20"},
            body=json.dumps({"registrationId": route.request.url.rsplit("/", 1)[1], "status": "QUEUED"}),
        )

    page.route(re.compile(r"/api/registrations/[^/?]+$"), first_answer_queued)

    item = open_race_list(page, name)
    expect(item.get_by_test_id("race-status")).to_have_text("Registration open")
    expect(item).to_contain_text("Portland, OR")
    expect(item).to_contain_text(re.compile(r"\d{4}"))  # the race day
    snap(page, "race-list")
    item.get_by_test_id("race-link").click()

    expect(page.get_by_test_id("page-title")).to_have_text(name)
    expect(page.get_by_test_id("page-title")).to_be_focused()  # focus follows navigation
    expect(page.get_by_test_id("race-status")).to_have_text("Registration open")
    card = event_card(page)
    expect(card.get_by_test_id("event-price")).to_have_text("$25.00")
    expect(card.get_by_test_id("spots-left")).to_have_text("10 places left of 10")
    snap(page, "race-page")

    hold_place(page)
    expect(page.get_by_test_id("hold-summary")).to_contain_text(name)
    expect(page.get_by_test_id("hold-countdown")).to_have_text(re.compile(r"Your place is held for 9:[0-5]\d\."))
    fill_details(page, runner)
    expect(page.get_by_test_id("test-cards")).to_contain_text("4000 0000 0000 0002")
    snap(page, "payment")
    pay(page)

    expect(page.get_by_test_id("page-title")).to_have_text("Confirming your registration")
    expect(page.get_by_test_id("poll-countdown")).to_have_text(re.compile(r"Checking again in \d s\."))
    snap(page, "waiting")
    bib = expect_confirmed(page, runner)
    expect(page.get_by_test_id("confirmation-race")).to_have_text(name)
    assert bib == "1"

    polls = page.evaluate("() => window.__polls")
    assert queued_once and len(polls) >= 2, polls
    # fastpoll divides waits by 10: the server's Retry-After: 20 means 2 s here.
    assert polls[1] - polls[0] >= 1900, polls


def test_on_a_quiet_day_the_bib_shows_within_three_seconds_of_paying(page: Page, backend) -> None:
    # No fastpoll: the waiting screen waits what the server's Retry-After says, which follows
    # the writer's real backlog (1 s when it is idle), not the paper's fixed first 10 s.
    name = unique("Quiet Day 5K")
    race_id = new_race(backend, name, [10])
    page.add_init_script(RECORD_POLLS)
    page.goto(f"/#/races/{race_id}")
    expect(event_card(page)).to_be_visible()
    hold_place(page)
    fill_details(page, Runner.new())
    expect(page.locator(CARD_FRAME)).to_be_visible()
    type_card(page)
    paid_at = page.evaluate("() => Date.now()")
    page.get_by_test_id("submit-registration").click()
    expect(page.get_by_test_id("page-title")).to_have_text("You are in!", timeout=15_000)
    in_at = page.evaluate("() => Date.now()")
    polls = page.evaluate("() => window.__polls")
    assert in_at - paid_at <= 3000, f"{in_at - paid_at} ms from paying to the bib; status checks at {polls}"


def test_the_last_place_goes_while_the_runner_looks_then_the_page_says_sold_out(page: Page, backend, api, snap) -> None:
    race_id = new_race(backend, unique("Summit Mile"), [1])
    open_race(page, race_id)
    card = event_card(page)
    expect(card.get_by_test_id("spots-left")).to_have_text("1 place left of 1")

    other = api.post(f"/api/races/{race_id}/events/{first_event_id(api, race_id)}/holds")  # another runner
    assert other.status_code == 201, other.text
    card.get_by_test_id("hold-button").click()

    expect(card.get_by_test_id("hold-status")).to_have_text("Sorry, this event has just sold out.")
    expect(card.get_by_test_id("event-status")).to_have_text("Sold out")
    expect(card.get_by_test_id("hold-button")).to_be_hidden()
    expect(page).to_have_url(re.compile(r"#/races/"))  # no hold, no form
    snap(page, "just-sold-out")

    page.reload()  # a fresh look (places left are cached for a couple of seconds)
    expect(page.get_by_test_id("race-status")).to_have_text("Sold out", timeout=40_000)
    expect(event_card(page).get_by_test_id("spots-left")).to_have_text("No places left")
    expect(event_card(page).get_by_test_id("hold-button")).to_be_hidden()
    expect(page.get_by_test_id("race-countdown")).to_contain_text("Places come back when holds expire")


def test_a_race_not_yet_open_shows_a_countdown_and_no_hold_button(page: Page, backend) -> None:
    name = unique("Dawn Half")
    race_id = scheduled_race(backend, name, opens_in=timedelta(hours=2))

    item = open_race_list(page, name)
    expect(item.get_by_test_id("race-status")).to_have_text("Not open yet")
    open_race(page, race_id)

    expect(page.get_by_test_id("race-status")).to_have_text("Not open yet")
    expect(page.get_by_test_id("race-countdown")).to_have_text(re.compile(r"Registration opens in 1:5\d:\d\d \(.+\)\."))
    expect(event_card(page).get_by_test_id("hold-button")).to_be_hidden()
    expect(event_card(page).get_by_test_id("event-status")).to_have_text("Not open yet")


def test_an_email_already_registered_is_shown_on_the_email_field_and_nothing_typed_is_lost(
    page: Page, backend, api, snap
) -> None:
    race_id = new_race(backend, unique("River Run"), [5])
    first = Runner.new()
    event_id = first_event_id(api, race_id)
    hold_id = api.post(f"/api/races/{race_id}/events/{event_id}/holds").json()["holdId"]
    taken = api.post(
        f"/api/holds/{hold_id}/registration",
        json={**first.__dict__, "paymentMethod": "pm_card_visa"},
    )
    assert taken.status_code == 202, taken.text

    open_race(page, race_id)
    hold_place(page)
    # The same address, as people type it: other case, stray spaces.
    again = Runner(email=f"  {first.email.upper()} ", firstName="Grace", lastName="Hopper")
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).fill(getattr(again, name))
    page.get_by_test_id("continue-button").click()  # the email is claimed before any card is asked for

    error = page.get_by_test_id("error-email")
    expect(error).to_contain_text("is already registered for")
    expect(page.get_by_test_id("details-step")).to_be_visible()
    email = field(page, "email")
    expect(email).to_be_focused()
    expect(email).to_have_attribute("aria-invalid", "true")
    expect(email).to_have_accessible_description(re.compile("already registered"))
    expect(field(page, "firstName")).to_have_value("Grace")
    expect(field(page, "lastName")).to_have_value("Hopper")
    expect(field(page, "dateOfBirth")).to_have_value(again.dateOfBirth)
    expect(page).to_have_url(re.compile(r"#/holds/"))  # the place is still held
    snap(page, "email-taken")

    fresh = Runner.new(firstName="Grace", lastName="Hopper")
    email.fill(fresh.email)
    expect(error).to_be_hidden()
    page.get_by_test_id("continue-button").click()
    pay(page)
    expect_confirmed(page, fresh)


def test_a_declined_card_keeps_the_place_and_another_card_works(page: Page, backend, snap) -> None:
    race_id = new_race(backend, unique("Lakeside 5K"), [3])
    runner = Runner.new()

    open_race(page, race_id)
    hold_place(page)
    fill_details(page, runner)
    pay(page, "4000 0000 0000 0002")

    error = page.get_by_test_id("error-card")
    expect(error).to_have_text("Your card was declined. Your place is still held: try another card.")
    expect(page.get_by_test_id("payment-step")).to_be_visible()
    expect(page.get_by_test_id("runner-summary")).to_contain_text(runner.email)
    expect(page.get_by_test_id("hold-countdown")).to_contain_text("Your place is held for")
    snap(page, "declined")

    pay(page)
    expect_confirmed(page, runner)


def test_an_expired_hold_says_so_and_the_next_hold_starts_from_what_was_typed(page: Page, backend, snap) -> None:
    race_id = new_race(backend, unique("Ridge Trail"), [4], holdMinutes=1)
    runner = Runner.new(firstName="Katherine", lastName="Johnson", dateOfBirth="1968-08-26")

    open_race(page, race_id)
    hold_id = hold_place(page)
    expect(page.get_by_test_id("hold-countdown")).to_have_text(re.compile(r"Your place is held for 0:[0-5]\d\."))
    expire_hold(backend, hold_id)
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).fill(getattr(runner, name))
    page.get_by_test_id("continue-button").click()

    expired = page.get_by_test_id("hold-expired")
    expect(expired).to_contain_text("Your hold expired before we received your registration.")
    expect(expired).to_contain_text("Your details are saved")
    expect(expired).to_be_focused()
    expect(page.get_by_test_id("hold-countdown")).to_have_text("Your hold has expired.")
    expect(page.get_by_test_id("continue-button")).to_be_disabled()
    snap(page, "expired")

    page.get_by_role("link", name="Back to the race").click()
    expect(page.get_by_test_id("continue-hold")).to_have_count(0)  # the expired hold is not offered
    new_hold = hold_place(page)
    assert new_hold != hold_id
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        expect(field(page, name)).to_have_value(getattr(runner, name))
    page.get_by_test_id("continue-button").click()
    pay(page)
    expect_confirmed(page, runner)


def test_a_network_failure_keeps_everything_typed_and_try_again_registers_once(page: Page, backend, snap) -> None:
    race_id = new_race(backend, unique("Canal 10K"), [3])
    runner = Runner.new()
    registration = re.compile(r"/api/holds/[^/]+/registration$")

    open_race(page, race_id)
    hold_place(page)
    page.route(registration, lambda route: route.abort("internetdisconnected"))
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).fill(getattr(runner, name))
    page.get_by_test_id("continue-button").click()

    error = page.get_by_test_id("form-error").get_by_test_id("error")
    expect(error).to_contain_text("We could not reach Racecap")
    expect(error).to_contain_text("Your details are saved.")
    snap(page, "offline")

    page.reload()  # even a reload keeps the details and the unfinished attempt
    wait_for_form(page)
    expect(field(page, "email")).to_have_value(runner.email)
    expect(page.get_by_test_id("form-error")).to_contain_text("Your last attempt did not finish")

    page.unroute(registration)
    page.get_by_test_id("retry").click()
    pay(page)
    expect_confirmed(page, runner)


def test_a_narrow_mobile_screen_gets_the_whole_flow_without_sideways_scrolling(new_page, backend, snap) -> None:
    page = new_page(viewport={"width": 360, "height": 740}, device_scale_factor=2, is_mobile=True, has_touch=True)
    name = unique("Coastal Marathon With A Rather Long Name")
    new_race(backend, name, [20, 50])
    runner = Runner.new(firstName="Florence", lastName="Griffith-Joyner")

    item = open_race_list(page, name)
    assert horizontal_overflow(page) == 0
    snap(page, "race-list")
    item.get_by_test_id("race-link").tap()
    expect(page.get_by_test_id("page-title")).to_have_text(name)
    button = event_card(page).get_by_test_id("hold-button")
    expect(button).to_be_visible()
    snap(page, "race-page")
    assert horizontal_overflow(page) == 0
    box, card = button.bounding_box(), event_card(page).bounding_box()
    assert box and card
    assert box["height"] >= 44  # a thumb-sized target
    assert box["width"] >= card["width"] - 40  # full width on a phone

    button.tap()
    wait_for_form(page)
    assert horizontal_overflow(page) == 0
    font_px = field(page, "email").evaluate("el => parseFloat(getComputedStyle(el).fontSize)")
    assert font_px >= 16  # smaller inputs make mobile browsers zoom in on focus
    expect(field(page, "dateOfBirth")).to_have_attribute("inputmode", "numeric")
    expect(field(page, "email")).to_have_attribute("type", "email")
    snap(page, "form")
    # A numeric keypad has no dash: 19900423 is accepted and shown back as 1990-04-23.
    fill_details(
        page,
        Runner(email=runner.email, firstName=runner.firstName, lastName=runner.lastName, dateOfBirth="19900423"),
    )
    snap(page, "payment")
    assert horizontal_overflow(page) == 0
    type_card(page)
    page.get_by_test_id("submit-registration").tap()
    expect_confirmed(page, runner)
    assert horizontal_overflow(page) == 0


def test_keyboard_only_labels_focus_order_and_contrast(page: Page, backend, snap) -> None:
    race_id = new_race(backend, unique("Keyboard 5K"), [5])
    runner = Runner.new(firstName="Ada", lastName="Byron")

    open_race(page, race_id)
    assert contrast_failures(page) == []
    page.keyboard.press("Tab")
    assert focused_testid(page) == "home-link"
    page.keyboard.press("Tab")
    assert focused_testid(page) == "hold-button"
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # focus is visible
    page.keyboard.press("Enter")
    wait_for_form(page)
    expect(page.get_by_test_id("page-title")).to_be_focused()

    # Every field has a label; Tab walks them in reading order, then the buttons.
    order = []
    for _ in range(7):
        page.keyboard.press("Tab")
        order.append(focused_testid(page))
    assert order == [
        "field-email",
        "field-firstName",
        "field-lastName",
        "field-dateOfBirth",
        "have-code",  # a discount code's field, opened on demand
        "continue-button",
        "release-hold",
    ]
    for name, label in (("email", "Email address"), ("dateOfBirth", "Date of birth")):
        expect(field(page, name)).to_have_accessible_name(label)
    expect(field(page, "dateOfBirth")).to_have_accessible_description(re.compile("for example 1990-04-23"))

    # Enter in an empty form: errors inline and in a summary that takes focus.
    field(page, "email").focus()
    page.keyboard.press("Enter")
    summary = page.get_by_test_id("error-summary")
    expect(summary).to_be_focused()
    expect(summary).to_contain_text("Enter your email address.")
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        expect(field(page, name)).to_have_attribute("aria-invalid", "true")
    expect(field(page, "email")).to_have_accessible_description(re.compile("Enter your email address"))
    assert contrast_failures(page) == []
    snap(page, "errors")

    # The summary's first link leads to the field; type everything, Enter submits each step.
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(field(page, "email")).to_be_focused()
    page.keyboard.type(runner.email)
    for value in (runner.firstName, runner.lastName, "1990-12-10"):
        page.keyboard.press("Tab")
        page.keyboard.type(value)
    expect(page.get_by_test_id("error-email")).to_be_hidden()  # errors clear as the runner fixes them
    page.keyboard.press("Enter")
    # The card form is the provider's frame: focus moves into it, the number typed there.
    expect(page.locator(CARD_FRAME)).to_be_focused()
    assert contrast_failures(page) == []
    type_card(page)
    page.get_by_test_id("submit-registration").focus()
    page.keyboard.press("Enter")

    expect_confirmed(page, runner)
    expect(page.get_by_test_id("page-title")).to_be_focused()
    assert contrast_failures(page) == []


def test_without_javascript_the_page_says_what_it_needs(new_page) -> None:
    page = new_page(java_script_enabled=False)
    page.goto("/")
    expect(page.get_by_test_id("noscript")).to_be_visible()
    expect(page.get_by_test_id("noscript")).to_contain_text("needs JavaScript")
    expect(page.get_by_test_id("view")).to_be_hidden()


def test_when_the_app_code_does_not_arrive_the_page_says_so(page: Page) -> None:
    page.route(re.compile(r"/app(\.[0-9a-f]{8})?\.js$"), lambda route: route.abort("timedout"))
    page.goto("/")

    expect(page.get_by_test_id("loading")).to_be_visible()
    # After 8 s without the app, a plain sentence replaces the silent spinner.
    expect(page.get_by_text("Still loading.")).to_be_visible(timeout=30_000)
    expect(page.get_by_text("reload the page")).to_be_visible()
