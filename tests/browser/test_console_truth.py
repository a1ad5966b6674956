"""The console tells the director the truth (issue 42): the registration window's phase as the
API has it (never guessed from the race), only the window actions that state allows, one
control for who can see the race with its public pages, money in the race's own currency,
what was refunded beside what was paid, settings the API has (retention, team sizes, ages and
price changes on the create form), a "Saved." that is a polite status and goes, and a search
field and button with names of their own.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Page, expect
from racecap.races.models import Race
from racecap.setup.models import EventDraft

import blueprint
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import accessible, console_race, open_in_tokyo, unique
from tests.browser.test_console import signed_in, signed_in_far_from_the_race
from tests.integration.runners import Runner

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

CONSOLE = blueprint.CONSOLE_PATH
# From the schedule's opening to the race page saying "Open": the workflow's task runs within
# seconds of its time, and the page reads the window again soon after that time.
OPENING_TIMEOUT_MS = 60_000


def open_race_page(page: Page, race: Race) -> None:
    """The race's page, once it has replaced the list (whose rows carry race states too)."""
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    expect(page.get_by_role("heading", name=race.name, exact=True, level=1)).to_be_visible()


def window_buttons(page: Page) -> dict[str, bool]:
    return {a: page.get_by_test_id(f"window-{a}").is_enabled() for a in ("schedule", "open", "close")}


def test_a_race_scheduled_ahead_shows_its_time_in_the_races_zone_then_opens_without_a_click(
    new_page, stack, backend, demo_seed, snap
) -> None:
    assert stack.directors is not None
    # The browser is in Los Angeles, the race in Tokyo: the time shown is Tokyo's.
    page = signed_in_far_from_the_race(new_page, demo_seed)
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Window 10K"),
        location="Odaiba",
        listing="LISTED",
        timeZone="Asia/Tokyo",
        opens_in=timedelta(seconds=30),
    )
    open_race_page(page, race)
    state, words = page.get_by_test_id("race-state"), page.get_by_test_id("window-state")
    # Published, and nobody scheduled it: no "scheduled" that nothing will keep.
    expect(state).to_have_text("Not scheduled")
    expect(words).to_contain_text("nothing will open registration")
    expect(page.get_by_test_id("window-workflow")).to_contain_text("No workflow")
    expect(page.get_by_test_id("window-close")).to_be_disabled()
    assert window_buttons(page) == {"schedule": True, "open": True, "close": False}

    page.get_by_test_id("window-schedule").click()
    opens = race.registrationOpensAt.astimezone(ZoneInfo("Asia/Tokyo"))
    expect(words).to_contain_text("Scheduled for")
    expect(words).to_contain_text(f"{opens:%H:%M} (Asia/Tokyo)")
    expect(page.get_by_test_id("window-workflow")).to_contain_text("running")
    expect(page.get_by_test_id("window-schedule")).to_be_disabled()
    assert window_buttons(page) == {"schedule": False, "open": True, "close": True}
    assert words.get_attribute("role") == "status"  # the change is read out, politely
    snap(page, "scheduled")

    # No click from here on: the page reads the window again as its opening time comes.
    expect(state).to_have_text("Open", timeout=OPENING_TIMEOUT_MS)
    expect(words).to_contain_text("Open until")
    expect(page.get_by_test_id("window-open")).to_be_disabled()
    assert window_buttons(page) == {"schedule": False, "open": False, "close": True}
    stored = backend.store().get_race(race.raceId)
    assert stored is not None and stored[0].registrationState == "OPEN"
    snap(page, "opened")

    # The version moved with the opening: a save right after it is no "changed meanwhile".
    page.get_by_label("Location").fill("Odaiba Seaside")
    page.get_by_test_id("save-race").click()
    expect(page.get_by_test_id("race-saved")).to_have_text("Saved.")

    page.get_by_test_id("window-close").click()
    expect(state).to_have_text("Closed")
    expect(words).to_contain_text("Closed by hand")
    assert window_buttons(page) == {"schedule": True, "open": True, "close": False}


def test_a_drafts_window_buttons_are_disabled_and_one_control_lists_it_with_its_public_pages(
    new_page, stack, backend, demo_seed, snap
) -> None:
    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Draft 5K"),
        location="Riverside",
        events=[EventDraft(name="5K", cap=20, priceCents=2000), EventDraft(name="10K", cap=20, priceCents=3000)],
    )
    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    open_race_page(page, race)
    expect(page.get_by_test_id("race-state")).to_have_text("Draft")
    expect(page.get_by_test_id("window-state")).to_have_text(
        "Draft: closed to runners. Publish the race to schedule or open registration."
    )
    for action in ("schedule", "open", "close"):
        expect(page.get_by_test_id(f"window-{action}")).to_be_disabled()
    expect(page.get_by_test_id("window-hint")).to_contain_text("publish it")

    # One control for who can see it, and the runners' pages as links.
    expect(page.get_by_test_id("listing-draft")).to_be_checked()
    expect(page.get_by_test_id("listing-apply")).to_be_disabled()
    origin = page.evaluate("() => location.origin")
    expect(page.get_by_test_id("race-link")).to_have_attribute("href", f"{origin}/#/races/{race.raceId}")
    events = backend.store().get_race(race.raceId)
    assert events is not None
    results = page.get_by_test_id("results-link")
    expect(results).to_have_count(2)
    for i, event in enumerate(events[1]):
        expect(results.nth(i)).to_have_attribute(
            "href", f"{origin}/#/races/{race.raceId}/events/{event.eventId}/results"
        )
    accessible(page, "a draft")

    page.get_by_test_id("listing-unlisted").check()
    page.get_by_test_id("listing-apply").click()
    expect(page.get_by_test_id("race-listing")).to_have_text("Unlisted: open by its link only")
    expect(page.get_by_test_id("listing-unlisted")).to_be_checked()
    expect(page.get_by_test_id("race-state")).to_have_text("Not scheduled")
    expect(page.get_by_test_id("window-schedule")).to_be_enabled()
    page.get_by_test_id("listing-listed").check()
    page.get_by_test_id("listing-apply").click()
    expect(page.get_by_test_id("race-listing")).to_have_text("Listed: on the race list")
    page.get_by_test_id("listing-draft").check()
    page.get_by_test_id("listing-apply").click()
    expect(page.get_by_test_id("race-state")).to_have_text("Draft")
    stored = backend.store().get_race(race.raceId)
    assert stored is not None and stored[0].listing == "DRAFT"
    snap(page, "listing")


def test_a_draft_whose_window_was_opened_says_so_in_one_coherent_sentence(new_page, stack, backend, demo_seed) -> None:
    assert stack.directors is not None
    race = console_race(
        backend, stack.directors.demo_sub, opened=True, listing="DRAFT", name=unique("Opened Draft"), location="Harbour"
    )
    page = signed_in(new_page, demo_seed)
    open_race_page(page, race)
    expect(page.get_by_test_id("race-state")).to_have_text("Draft")
    expect(page.get_by_test_id("window-state")).to_have_text(
        "Draft: registration is open, but runners cannot reach a draft. Publish the race, or close registration."
    )
    expect(page.get_by_test_id("race-status")).not_to_contain_text("registration open")
    # Closing is offered (registration is open); opening a draft is not.
    expect(page.get_by_test_id("window-close")).to_be_enabled()
    expect(page.get_by_test_id("window-open")).to_be_disabled()
    expect(page.get_by_test_id("window-schedule")).to_be_disabled()
    page.get_by_test_id("window-close").click()
    expect(page.get_by_test_id("window-state")).to_have_text(
        "Draft: closed to runners. Publish the race to schedule or open registration."
    )


def test_money_is_in_the_races_currency_and_a_part_refund_shows_paid_refunded_and_net(
    new_page, stack, backend, api, demo_seed, snap
) -> None:
    from tests.integration.flows import hold_and_register, runner, wait_confirmed

    assert stack.directors is not None
    euro = console_race(
        backend,
        stack.directors.demo_sub,
        opened=True,
        name=unique("Euro 5K"),
        currency="EUR",
        location="Harbour",
        events=[EventDraft(name="5K", cap=10, priceCents=2700)],
    )
    yen = console_race(
        backend,
        stack.directors.demo_sub,
        opened=True,
        name=unique("Yen 5K"),
        currency="JPY",
        location="Harbour",
        events=[EventDraft(name="5K", cap=10, priceCents=2500)],
    )
    ids = []
    for race in (euro, yen):
        event_id = api.get(f"/api/races/{race.raceId}").json()["events"][0]["eventId"]
        ids.append(hold_and_register(api, race.raceId, event_id, runner() | {"lastName": "Refunded"})[1])
    wait_confirmed(api, ids)

    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    expect(page.get_by_test_id("race-row").filter(has_text=euro.name).get_by_test_id("race-money")).to_have_text(
        "€27.00"
    )
    expect(page.get_by_test_id("race-row").filter(has_text=yen.name).get_by_test_id("race-money")).to_have_text(
        "¥2,500"
    )

    page.goto(f"{CONSOLE}#/races/{euro.raceId}/runners")
    # The search field and its button have names of their own.
    search = page.get_by_role("searchbox", name="Find a runner")
    expect(search).to_be_visible()
    expect(page.get_by_role("button", name="Search runners", exact=True)).to_be_visible()
    assert page.get_by_role("button", name="Find a runner").count() == 0
    search.fill("Refunded")
    page.get_by_role("button", name="Search runners", exact=True).click()
    row = page.get_by_test_id("runner-row")
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("runner-paid")).to_have_text("€27.00")
    expect(row.get_by_test_id("runner-net")).to_have_text("€27.00")

    row.get_by_test_id("runner-open").click()
    detail = page.get_by_test_id("runner-detail")
    detail.get_by_test_id("refund-part").click()
    detail.get_by_label("Amount to refund (EUR)").fill("7")
    detail.get_by_test_id("review-refund").click()
    detail.get_by_test_id("confirm-cancel").click()
    expect(detail.get_by_test_id("fact-refunded")).to_have_text("€7.00")
    expect(detail.get_by_test_id("fact-paid")).to_have_text("€27.00")  # what was paid stays
    expect(detail.get_by_test_id("fact-net")).to_have_text("€20.00 (paid less refunds)")
    expect(row.get_by_test_id("runner-paid")).to_have_text("€27.00")
    expect(row.get_by_test_id("runner-refunded")).to_have_text("€7.00")
    expect(row.get_by_test_id("runner-net")).to_have_text("€20.00")
    # A fresh list (GET …/registrations) says the same as the detail did.
    page.reload()
    expect(page.get_by_test_id("runner-row").get_by_test_id("runner-net")).to_have_text("€20.00")
    expect(page.get_by_test_id("runner-row").get_by_test_id("runner-refunded")).to_have_text("€7.00")
    snap(page, "net")


def test_ages_and_price_changes_on_the_create_form_retention_and_team_sizes_in_settings_and_saved_goes(
    new_page, stack, backend, demo_seed, snap
) -> None:
    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    today = datetime.now(UTC).date()
    name = unique("Set Up 10K")
    page.get_by_test_id("new-race").click()
    page.get_by_label("Race name").fill(name)
    page.get_by_label("Location").fill("Quayside")
    row = page.get_by_test_id("event-fields").first
    row.get_by_label("Event name").fill("Juniors")
    row.get_by_label("Places (cap)").fill("40")
    row.get_by_label("Price", exact=True).fill("30.00")
    row.get_by_label("Minimum age on race day").fill("10")
    row.get_by_label("Maximum age on race day").fill("16")
    row.get_by_test_id("new-add-tier").click()
    expect(row.get_by_label("Price change 1 starts")).to_be_focused()
    tier_day: date = today + timedelta(days=10)
    row.get_by_label("Price change 1 starts").fill(f"{tier_day}T00:00")
    row.get_by_label("Price change 1 price").fill("0.10")  # under the provider's minimum: the API's field error
    page.get_by_test_id("create-race").click()
    expect(row.get_by_label("Price change 1 price")).to_have_attribute("aria-invalid", "true")
    row.get_by_label("Price change 1 price").fill("40.00")
    page.get_by_test_id("create-race").click()
    expect(page.get_by_role("heading", name=name, level=1)).to_be_visible()
    race_id = page.url.rsplit("#/races/", 1)[1]
    stored = backend.store().get_race(race_id)
    assert stored is not None
    (juniors,) = stored[1]
    assert (juniors.minAge, juniors.maxAge) == (10, 16)
    assert [(t.startsAt, t.priceCents) for t in juniors.priceTiers] == [
        (datetime(tier_day.year, tier_day.month, tier_day.day, tzinfo=UTC), 4000)
    ]

    # The retention period, in the race's settings: "Saved." is a polite status that goes.
    retention = page.get_by_label("Days after the race that runners' personal data is kept")
    expect(retention).to_have_value("365")
    retention.fill("90")
    page.get_by_test_id("save-race").click()
    saved = page.get_by_test_id("race-saved")
    expect(saved).to_have_text("Saved.")
    assert saved.get_attribute("role") == "status" and saved.get_attribute("aria-live") == "polite"
    expect(page.get_by_test_id("race-alert")).to_be_hidden()
    expect(saved).to_have_text("", timeout=20_000)
    stored = backend.store().get_race(race_id)
    assert stored is not None and stored[0].retentionDays == 90

    # Team sizes, in the event's settings.
    editor = page.get_by_test_id("event-row").filter(has_text="Juniors")
    expect(editor.get_by_label("Smallest team")).to_be_disabled()
    editor.get_by_label("Team entries (a captain enters and pays for the team)").check()
    editor.get_by_label("Smallest team").fill("2")
    editor.get_by_label("Largest team").fill("4")
    editor.get_by_test_id("save-event").click()
    expect(editor.get_by_test_id("event-saved")).to_have_text("Juniors: saved.")
    stored = backend.store().get_race(race_id)
    assert stored is not None and (stored[1][0].teamMinSize, stored[1][0].teamMaxSize) == (2, 4)
    page.reload()
    editor = page.get_by_test_id("event-row").filter(has_text="Juniors")
    expect(editor.get_by_label("Largest team")).to_have_value("4")
    expect(page.get_by_label("Days after the race that runners' personal data is kept")).to_have_value("90")
    editor.get_by_label("Team entries (a captain enters and pays for the team)").uncheck()
    editor.get_by_test_id("save-event").click()
    expect(editor.get_by_test_id("event-saved")).to_have_text("Juniors: saved.")
    stored = backend.store().get_race(race_id)
    assert stored is not None and stored[1][0].teamMinSize is None
    snap(page, "settings")


def test_the_live_view_says_when_an_event_sold_out_in_the_races_zone_within_10_s_of_its_last_place(
    new_page, stack, backend, demo_seed, snap
) -> None:
    assert stack.directors is not None
    # The browser is in Los Angeles, the race in Tokyo: the moment is Tokyo's.
    page = signed_in_far_from_the_race(new_page, demo_seed)
    race, api, (eid,) = open_in_tokyo(stack, backend, "Sellout 5K", [EventDraft(name="5K", cap=20, priceCents=3000)])
    page.goto(f"{CONSOLE}#/races/{race.raceId}/live")
    cell = page.get_by_test_id(f"sold-out-{eid}")
    expect(cell).to_have_text("—")
    expect(page.get_by_test_id("live-sold-out")).to_be_hidden()

    for _ in range(20):
        held = Runner(api, device=False).hold(race.raceId, eid)
        assert held.status_code == 201, held.text
    refused = Runner(api, device=False).hold(race.raceId, eid)  # the first answer with every place taken
    assert (refused.status_code, refused.json()["error"]) == (409, "SOLD_OUT"), refused.text
    at = datetime.now(ZoneInfo("Asia/Tokyo"))

    banner = page.get_by_test_id("live-sold-out")
    expect(banner).to_contain_text("5K sold out at", timeout=10_000)
    expect(cell).to_contain_text("(Asia/Tokyo)")
    shown = datetime.strptime(cell.inner_text().split(" ")[0], "%H:%M:%S").time()
    moment = datetime.combine(at.date(), shown, tzinfo=at.tzinfo)
    assert abs((moment - at).total_seconds()) < 15, (cell.inner_text(), at)  # Tokyo's clock, not LA's
    assert banner.get_attribute("role") == "status"
    accessible(page, "the live view, sold out")
    snap(page, "sold out")
