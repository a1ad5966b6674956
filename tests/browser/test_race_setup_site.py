"""A race's set-up as runners meet it, in real headless Chromium: an event's age rule on race
day, checked by the site and the API from one rule (the site's message is the API's); a hold
link that resumes on another device."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from playwright.sync_api import Page, expect
from racecap.setup.models import EventDraft

from tests.browser.conftest import CHROMIUM
from tests.browser.steps import (
    CARD_FRAME,
    Runner,
    console_race,
    event_card,
    expect_confirmed,
    field,
    fill_details,
    hold_place,
    new_race,
    pay,
    published,
    unique,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]


def _years_before(day: date, years: int, days: int) -> date:
    return day.replace(year=day.year - years) - timedelta(days=days)


def _kids_and_marathon(backend) -> tuple[str, date]:
    race = console_race(
        backend,
        "director-test",
        opened=True,
        name=unique("Family Day"),
        location="Riverside Park",
        race_in=timedelta(days=60),
        events=[
            EventDraft(name="Kids 1K", cap=10, priceCents=500, minAge=4, maxAge=12),
            EventDraft(name="Marathon", cap=10, priceCents=9000, minAge=18),
        ],
    )
    return published(backend, race.raceId), date.fromisoformat(race.raceDate)


def _details(page: Page, born: date) -> None:
    runner = Runner.new(dateOfBirth=born.isoformat())
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).fill(getattr(runner, name))
    page.get_by_test_id("continue-button").click()


def test_the_age_rule_is_measured_on_race_day_and_the_site_and_the_api_answer_alike(page: Page, backend, api) -> None:
    race_id, race_day = _kids_and_marathon(backend)
    thirteen_on_race_day = _years_before(race_day, 13, 30)  # 12 today, 13 on race day
    eighteen_on_race_day = _years_before(race_day, 18, 30)  # 17 today, 18 on race day
    assert (date.today() - thirteen_on_race_day).days < 13 * 365.25 < (race_day - thirteen_on_race_day).days

    page.goto(f"/?fastpoll=1#/races/{race_id}")
    expect(event_card(page, "Kids 1K")).to_be_visible()
    hold_place(page, "Kids 1K")
    expect(page.get_by_test_id("registration-form")).to_contain_text("Kids 1K is for ages 4 to 12 on race day")
    _details(page, thirteen_on_race_day)
    error = page.get_by_test_id("error-dateOfBirth")
    expect(error).to_be_visible()
    site_says = error.inner_text()
    expect(page.get_by_test_id("payment-step")).to_be_hidden()

    # The API, asked directly with the same details, refuses with the same words.
    kids = next(e for e in api.get(f"/api/races/{race_id}").json()["events"] if e["name"] == "Kids 1K")
    held = api.post(f"/api/races/{race_id}/events/{kids['eventId']}/holds").json()["holdId"]
    body = {
        "email": "kid@example.com",
        "firstName": "Kim",
        "lastName": "Lee",
        "dateOfBirth": thirteen_on_race_day.isoformat(),
    }
    refused = api.post(f"/api/holds/{held}/registration", json=body)
    assert refused.status_code == 400, refused.text
    assert refused.json()["fields"]["dateOfBirth"] == site_says
    assert "will be 13" in site_says

    # 17 today and 18 on race day: the marathon takes them, on the site and in the API.
    page.goto(f"/?fastpoll=1#/races/{race_id}")
    hold_place(page, "Marathon")
    _details(page, eighteen_on_race_day)
    expect(page.get_by_test_id("payment-step")).to_be_visible()
    marathon = next(e for e in api.get(f"/api/races/{race_id}").json()["events"] if e["name"] == "Marathon")
    held = api.post(f"/api/races/{race_id}/events/{marathon['eventId']}/holds").json()["holdId"]
    accepted = api.post(
        f"/api/holds/{held}/registration", json=body | {"dateOfBirth": eighteen_on_race_day.isoformat()}
    )
    assert accepted.status_code == 200, accepted.text  # the card step


def test_a_hold_link_opened_in_another_browser_resumes_at_the_card_step_and_pays(new_page, backend) -> None:
    race_id = new_race(backend, unique("Two Devices 10K"), [5])
    laptop = new_page()
    laptop.goto(f"/?fastpoll=1#/races/{race_id}")
    hold_id = hold_place(laptop)
    fill_details(laptop, Runner.new())
    expect(laptop.locator(CARD_FRAME)).to_be_visible()
    link = laptop.url

    phone = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone.goto(link.replace("/#/", "/?fastpoll=1#/"))
    expect(phone.get_by_test_id("hold-summary")).to_contain_text("$25.00")
    expect(phone.get_by_test_id("hold-countdown")).to_have_text(re.compile(r"Your place is held for \d+:\d\d\."))
    expect(phone.get_by_test_id("runner-summary")).to_have_text("The runner's details were sent from another device.")
    expect(phone.locator(CARD_FRAME)).to_be_visible()
    assert phone.url.endswith(f"#/holds/{hold_id}")
    pay(phone)
    expect_confirmed(phone)


def test_a_hold_link_opened_elsewhere_before_the_details_shows_the_form_with_the_event(new_page, backend) -> None:
    race_id = new_race(backend, unique("Link First 5K"), [5])
    first = new_page()
    first.goto(f"/?fastpoll=1#/races/{race_id}")
    hold_id = hold_place(first)
    other = new_page()
    other.goto(f"/?fastpoll=1#/holds/{hold_id}")
    expect(other.get_by_test_id("registration-form")).to_be_visible()
    expect(other.get_by_test_id("hold-summary")).to_contain_text("Event 0")
    expect(other.get_by_test_id("field-email")).to_be_visible()


def test_a_races_times_are_shown_in_its_own_time_zone_whatever_the_runners(page: Page, backend) -> None:
    race = console_race(
        backend,
        "director-test",
        name=unique("Auckland Harbour Run"),
        location="Auckland",
        listing="LISTED",
        timeZone="Pacific/Auckland",
        race_in=timedelta(days=60),
        opens_in=timedelta(days=2),
        events=[EventDraft(name="10K", cap=10, priceCents=3000)],
    )
    race_id = published(backend, race.raceId)
    page.goto(f"/#/races/{race_id}")  # the browser is in UTC here
    countdown = page.get_by_test_id("race-countdown")
    expect(countdown).to_contain_text("Registration opens in")
    expect(countdown).to_have_text(re.compile(r"(NZ[DS]T|GMT\+1[23])"))


def test_keyboard_only_on_a_phone_the_age_rule_is_described_on_the_field_and_its_refusal_is_announced(
    new_page, backend
) -> None:
    from tests.browser.steps import contrast_failures, focused_testid

    race_id, race_day = _kids_and_marathon(backend)
    phone = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone.goto(f"/?fastpoll=1#/races/{race_id}")
    expect(event_card(phone, "Kids 1K")).to_be_visible()
    phone.keyboard.press("Tab")
    phone.keyboard.press("Tab")
    assert focused_testid(phone) == "hold-button"  # the first event's: Kids 1K
    phone.keyboard.press("Enter")
    expect(phone.get_by_test_id("registration-form")).to_be_visible()
    # The rule is part of the date field's description, for a screen reader too.
    expect(field(phone, "dateOfBirth")).to_have_accessible_description(re.compile("Kids 1K is for ages 4 to 12"))
    too_old = _years_before(race_day, 13, 30).isoformat()
    for name, value in (
        ("email", "kid@example.com"),
        ("firstName", "Kim"),
        ("lastName", "Lee"),
        ("dateOfBirth", too_old),
    ):
        field(phone, name).focus()
        phone.keyboard.type(value)
    phone.keyboard.press("Enter")
    summary = phone.get_by_test_id("error-summary")
    expect(summary).to_be_focused()
    expect(summary).to_contain_text("Kids 1K is for ages 4 to 12 on race day")
    expect(field(phone, "dateOfBirth")).to_have_attribute("aria-invalid", "true")
    assert contrast_failures(phone) == []
