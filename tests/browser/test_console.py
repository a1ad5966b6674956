"""The race director's console (/admin/) in headless Chromium against the local stack: sign-in
through moto's cognito-idp exactly as on AWS (SRP, then TOTP; a first sign-in's new password
and TOTP enrolment from a QR code), sign-out ending the session for good, keyboard and contrast.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from playwright.sync_api import Page, expect
from racecap.setup.models import EventDraft
from racecap.setup.rules import _a_year_later

import blueprint
from local import directors
from local.stack import LocalStack
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import accessible, console_race, contrast_failures, horizontal_overflow, tab_to, unique
from tools.smoke_director import TOTP_STEP_S, _totp, totp_code

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

CONSOLE = blueprint.CONSOLE_PATH


@pytest.fixture(scope="module")
def cognito(stack: LocalStack) -> Any:
    return directors._clients({"env": stack.function_env()})[0]


def wrong_code(seed: str) -> str:
    """A six-digit code that is neither this step's nor a neighbour's."""
    now = int(datetime.now(UTC).timestamp())
    taken = {_totp(seed).generate(now + d).decode() for d in (-TOTP_STEP_S, 0, TOTP_STEP_S)}
    return next(c for c in (f"{n:06d}" for n in range(123456, 999999, 111111)) if c not in taken)


def sign_in(page: Page, email: str, password: str) -> None:
    page.goto(CONSOLE)
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_test_id("sign-in-submit").click()


def enter_code(page: Page, seed: str) -> None:
    page.get_by_label("Authenticator code").fill(totp_code(seed))
    page.get_by_test_id("totp-submit").click()


def test_password_then_totp_signs_in_and_a_wrong_code_is_refused(page: Page, stack, backend, demo_seed) -> None:
    name = unique("Console 5K")
    assert stack.directors is not None
    console_race(
        backend,
        stack.directors.demo_sub,
        name=name,
        location="Riverside",
        events=[EventDraft(name="5K", cap=100, priceCents=2500)],
    )
    sign_in(page, directors.DEMO_EMAIL, directors.DEMO_PASSWORD)
    expect(page.get_by_role("heading", name="Enter your code")).to_be_visible()

    page.get_by_label("Authenticator code").fill(wrong_code(demo_seed))
    page.get_by_test_id("totp-submit").click()
    expect(page.get_by_test_id("totp-alert")).to_contain_text("That code is not right")
    expect(page.get_by_test_id("nav-races")).to_be_hidden()

    enter_code(page, demo_seed)
    expect(page.get_by_role("heading", name="Your races")).to_be_visible()
    expect(page.get_by_test_id("director-email")).to_have_text(directors.DEMO_EMAIL)
    expect(page.get_by_test_id("race-row").filter(has_text=name)).to_be_visible()
    # Tokens stay out of URLs and out of localStorage; the refresh token is this tab's alone.
    assert "token" not in page.url.lower()
    assert page.evaluate("() => localStorage.length") == 0
    # A reload resumes the session from the refresh token, without asking for the code again.
    page.reload()
    expect(page.get_by_role("heading", name="Your races")).to_be_visible()


def test_a_wrong_password_is_refused(page: Page) -> None:
    # moto does not check SRP proofs (tests/unit/test_console_srp.py pins the proof against
    # pycognito's); it does refuse an account that does not exist, as Cognito does.
    sign_in(page, "nobody@racecap.localhost", directors.DEMO_PASSWORD)
    expect(page.get_by_test_id("sign-in-alert")).to_have_text("The email or password is not right.")


def test_first_sign_in_sets_a_password_enrols_totp_and_sign_out_revokes_the_refresh_token(
    new_page, stack, cognito, snap
) -> None:
    assert stack.directors is not None
    email = f"new-{uuid.uuid4().hex[:8]}@racecap.localhost"
    temporary = directors.invite(cognito, stack.directors.user_pool_id, email)
    page = new_page(viewport={"width": 768, "height": 1024})
    sign_in(page, email, temporary)

    expect(page.get_by_role("heading", name="Choose your password")).to_be_visible()
    page.get_by_label("New password", exact=True).fill("Short1!")
    page.get_by_label("New password again").fill("Short1!")
    page.get_by_test_id("new-password-submit").click()
    expect(page.get_by_test_id("new-password-alert")).to_contain_text("does not meet the policy")
    chosen = "Fresh-director-pass-9!"
    page.get_by_label("New password", exact=True).fill(chosen)
    page.get_by_label("New password again").fill(chosen)
    page.get_by_test_id("new-password-submit").click()

    expect(page.get_by_role("heading", name="Set up your authenticator app")).to_be_visible()
    qr = page.get_by_test_id("totp-qr")
    expect(qr).to_be_visible()
    assert qr.get_attribute("src", timeout=1000).startswith("data:image/gif;base64,")  # type: ignore[union-attr]
    assert page.evaluate("() => document.querySelector('[data-testid=totp-qr]').naturalWidth") > 100
    seed = page.get_by_test_id("totp-secret").inner_text()
    snap(page, "enrol")
    page.get_by_label("Code from your app").fill(wrong_code(seed))
    page.get_by_test_id("enrol-submit").click()
    expect(page.get_by_test_id("enrol-alert")).to_contain_text("That code is not right")
    page.get_by_label("Code from your app").fill(totp_code(seed))
    page.get_by_test_id("enrol-submit").click()
    expect(page.get_by_role("heading", name="Your races")).to_be_visible()
    expect(page.get_by_test_id("no-races")).to_be_visible()
    assert horizontal_overflow(page) == 0

    refresh_token = page.evaluate("() => sessionStorage.getItem('racecap.console.refresh')")
    assert refresh_token
    # Before sign-out the refresh token works …
    cognito.initiate_auth(
        ClientId=stack.directors.client_id,
        AuthFlow="REFRESH_TOKEN_AUTH",
        AuthParameters={"REFRESH_TOKEN": refresh_token},
    )
    page.get_by_test_id("sign-out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_text("You are signed out.")).to_be_visible()
    assert page.evaluate("() => sessionStorage.getItem('racecap.console.refresh')") is None
    # … after it, Cognito refuses it (GlobalSignOut), and the next sign-in asks for TOTP.
    with pytest.raises(ClientError) as refused:
        cognito.initiate_auth(
            ClientId=stack.directors.client_id,
            AuthFlow="REFRESH_TOKEN_AUTH",
            AuthParameters={"REFRESH_TOKEN": refresh_token},
        )
    assert refused.value.response["Error"]["Code"] == "NotAuthorizedException"
    sign_in(page, email, chosen)
    enter_code(page, seed)
    expect(page.get_by_role("heading", name="Your races")).to_be_visible()


def test_sign_in_by_keyboard_alone_with_labels_and_contrast(new_page, demo_seed, snap) -> None:
    page = new_page(viewport={"width": 1280, "height": 800})
    page.goto(CONSOLE)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    # The email field has focus: type, Tab to the password, type, Enter submits.
    expect(page.get_by_label("Email")).to_be_focused()
    assert contrast_failures(page) == []
    page.keyboard.type(directors.DEMO_EMAIL)
    page.keyboard.press("Tab")
    expect(page.get_by_label("Password", exact=True)).to_be_focused()
    page.keyboard.type(directors.DEMO_PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_label("Authenticator code")).to_be_focused()
    assert contrast_failures(page) == []
    page.keyboard.type(totp_code(demo_seed))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Your races")).to_be_focused()
    assert contrast_failures(page) == []
    snap(page, "signed-in")


def signed_in(new_page, seed: str, **context: Any) -> Page:
    page: Page = new_page(**context)
    sign_in(page, directors.DEMO_EMAIL, directors.DEMO_PASSWORD)
    enter_code(page, seed)
    expect(page.get_by_role("heading", name="Your races")).to_be_visible()
    return page


def signed_in_far_from_the_race(new_page, seed: str) -> Page:
    """Signed in on a desktop browser whose clock is Los Angeles's: the console's tests put the
    race in Tokyo, so a time shown in the browser's zone instead of the race's is caught."""
    return signed_in(new_page, seed, viewport={"width": 1280, "height": 900}, timezone_id="America/Los_Angeles")


def fill_event(page: Page, i: int, name: str, cap: str, price: str) -> None:
    row = page.get_by_test_id("event-fields").nth(i)
    row.get_by_label("Event name").fill(name)
    row.get_by_label("Places (cap)").fill(cap)
    row.get_by_label("Price").fill(price)


def test_a_race_with_three_events_is_created_published_and_opened(new_page, demo_seed, snap) -> None:
    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    name = unique("Lakeside Trail")
    page.get_by_test_id("new-race").click()
    expect(page.get_by_role("heading", name="New race")).to_be_focused()
    page.get_by_label("Race name").fill(name)
    page.get_by_label("Location").fill("Lakeside")
    fill_event(page, 0, "Marathon", "100", "95.00")
    page.get_by_test_id("add-event-row").click()
    fill_event(page, 1, "Half", "200", "65")
    page.get_by_test_id("add-event-row").click()
    fill_event(page, 2, "10K", "300", "")  # no price: the API's own field error, on the field
    page.get_by_test_id("create-race").click()
    price = page.get_by_test_id("event-fields").nth(2).get_by_label("Price")
    expect(price).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#f-events-2-priceCents-error")).to_be_visible()
    expect(page.get_by_label("Race name")).to_have_value(name)  # nothing typed is lost
    price.fill("35.00")
    page.get_by_test_id("create-race").click()

    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(page.get_by_test_id("race-state")).to_have_text("Draft")
    expect(page.get_by_test_id("event-row")).to_have_count(3)
    page.get_by_test_id("listing-listed").check()
    page.get_by_test_id("listing-apply").click()
    # Published, but nobody scheduled its window: the console says so (the API's window phase).
    expect(page.get_by_test_id("race-state")).to_have_text("Not scheduled")
    page.get_by_test_id("window-open").click()
    expect(page.get_by_test_id("race-state")).to_have_text("Open")
    # The opening queue: switched on with a rate, paused, resumed.
    page.get_by_label("Opening queue (a waiting room for the opening)").check()
    page.get_by_label("Runners admitted per minute").fill("120")
    page.get_by_test_id("save-fairness").click()
    figures = page.get_by_test_id("queue-figures")
    expect(figures).to_contain_text("Queue on")
    page.get_by_test_id("queue-pause").click()
    expect(figures).to_contain_text("paused")
    page.get_by_test_id("queue-resume").click()
    expect(figures).not_to_contain_text("paused")
    snap(page, "race")

    page.get_by_test_id("nav-races").click()
    row = page.get_by_test_id("race-row").filter(has_text=name)
    expect(row.get_by_test_id("race-state")).to_have_text("Open")
    expect(row.get_by_test_id("race-places")).to_contain_text("Marathon: 0 of 100")
    expect(row.get_by_test_id("race-money")).to_have_text("$0.00")


def test_two_tabs_edit_one_race_and_the_second_save_keeps_what_was_typed(new_page, stack, backend, demo_seed) -> None:
    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Two Tabs 10K"),
        location="Old Town",
        events=[EventDraft(name="10K", cap=50, priceCents=3000)],
    )
    first = signed_in(new_page, demo_seed)
    second = signed_in(new_page, demo_seed, viewport={"width": 768, "height": 1024})
    for page in (first, second):
        page.goto(f"{CONSOLE}#/races/{race.raceId}")
        expect(page.get_by_label("Race name")).to_have_value(race.name)

    renamed = race.name + " (renamed)"
    first.get_by_label("Race name").fill(renamed)
    first.get_by_test_id("save-race").click()
    expect(first.get_by_test_id("race-saved")).to_have_text("Saved.")

    second.get_by_label("Location").fill("New Town")
    second.get_by_test_id("save-race").click()
    alert = second.get_by_test_id("race-alert")
    expect(alert).to_contain_text("changed meanwhile")
    expect(alert).to_contain_text("name")
    expect(second.get_by_label("Location")).to_have_value("New Town")  # what was typed is kept
    expect(second.get_by_label("Race name")).to_have_value(renamed)  # the other tab's change shows
    second.get_by_test_id("save-race").click()
    expect(second.get_by_test_id("race-saved")).to_have_text("Saved.")
    expect(alert).to_be_hidden()
    stored = backend.store().get_race(race.raceId)
    assert stored is not None
    assert (stored[0].name, stored[0].location) == (renamed, "New Town")


def test_runners_are_found_cancelled_with_a_refund_and_exported_and_the_audit_trail_shows_it(
    new_page, stack, backend, api, demo_seed, snap
) -> None:
    from tests.integration.flows import hold_and_register, runner, wait_confirmed

    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        opened=True,  # runners register through the public API
        name=unique("Runners 10K"),
        location="Harbour",
        events=[EventDraft(name="10K", cap=50, priceCents=3000), EventDraft(name="5K", cap=50, priceCents=2000)],
    )
    events = [e["eventId"] for e in api.get(f"/api/races/{race.raceId}").json()["events"]]
    ids = []
    for i in range(20):
        body = runner(f"runner{i}.{race.raceId[-6:].lower()}@example.com") | {"lastName": f"Runner{i:02d}"}
        ids.append(hold_and_register(api, race.raceId, events[i % 2], body)[1])
    wait_confirmed(api, ids)

    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    page.goto(f"{CONSOLE}#/races/{race.raceId}/runners")
    expect(page.get_by_test_id("runner-row")).to_have_count(20)
    page.get_by_label("Find a runner").fill("Runner07")
    page.get_by_role("button", name="Search runners", exact=True).click()
    expect(page.get_by_test_id("runner-row")).to_have_count(1)
    page.get_by_test_id("runner-open").click()
    detail = page.get_by_test_id("runner-detail")
    expect(detail.get_by_test_id("fact-status")).to_have_text("CONFIRMED")
    # The detail comes from GET …/registrations/{id}: the entry payment is in its ledger.
    expect(detail.get_by_test_id("ledger-entry")).to_have_count(1)
    expect(detail.get_by_test_id("ledger-entry")).to_contain_text("Payment")
    expect(detail.get_by_test_id("ledger-summary")).to_have_text(
        "Charged $20.00 · refunded $0.00 · $20.00 left to refund"
    )
    # Part of the payment back (POST …/refunds): more than was paid is refused on the field.
    detail.get_by_test_id("refund-part").click()
    detail.get_by_label("Amount to refund (USD)").fill("25")
    detail.get_by_test_id("review-refund").click()
    expect(detail.locator("#refund-amountCents-error")).to_have_text("At most $20.00 is left to refund.")
    detail.get_by_label("Amount to refund (USD)").fill("5")
    detail.get_by_label("Reason (kept in the audit trail)").fill("Late start")
    detail.get_by_test_id("review-refund").click()
    expect(detail.get_by_test_id("refund-amount")).to_contain_text("refunded $5.00")
    detail.get_by_test_id("confirm-cancel").click()
    expect(detail.get_by_test_id("ledger-entry")).to_have_count(2)
    expect(detail.get_by_test_id("ledger-entry").nth(1)).to_contain_text("done")  # one key per dialog, settled
    expect(detail.get_by_test_id("ledger-summary")).to_have_text(
        "Charged $20.00 · refunded $5.00 · $15.00 left to refund"
    )
    expect(detail.get_by_test_id("fact-status")).to_have_text("CONFIRMED")
    # Cancel with the FULL refund: what is left. (NONE and AMOUNT need issue-25b's cancel body;
    # their browser test comes with that merge.)
    detail.get_by_test_id("cancel-registration").click()
    expect(detail.get_by_label("Refund what is left of the payment ($15.00)")).to_be_checked()
    detail.get_by_label("Reason (kept in the audit trail)").fill("Injured")
    detail.get_by_test_id("review-refund").click()
    expect(detail.get_by_test_id("refund-amount")).to_contain_text("$15.00 is refunded")
    expect(detail.get_by_test_id("confirm-cancel")).to_have_text("Cancel and refund $15.00")
    detail.get_by_test_id("confirm-cancel").click()
    expect(detail.get_by_test_id("fact-status")).to_have_text("CANCELLED")
    expect(detail.get_by_test_id("fact-refund")).to_contain_text("$15.00")
    expect(page.get_by_test_id("runner-status")).to_have_text("CANCELLED")
    snap(page, "cancelled")

    with page.expect_download() as download:
        page.get_by_test_id("export").click()
    csv_text = Path(download.value.path()).read_text()
    assert csv_text.count("\n") >= 21 and "Runner07" in csv_text
    assert "token" not in download.value.url.lower()

    page.get_by_test_id("tab-live").click()
    expect(page.get_by_test_id("live-events")).to_contain_text("10K")
    expect(page.get_by_test_id("live-chart").locator("canvas")).to_be_visible()
    expect(page.get_by_test_id("live-big")).to_contain_text("Confirmed")

    page.get_by_test_id("tab-audit").click()
    cancelled = page.locator("[data-testid=audit-entry][data-action='registration.cancel']")
    expect(cancelled).to_have_count(1)
    expect(cancelled).to_contain_text("Injured")
    expect(cancelled.get_by_test_id("audit-action")).to_contain_text("Cancelled registration")
    expect(cancelled.get_by_test_id("audit-action")).to_contain_text("refunded $15.00")
    refunded = page.locator("[data-testid=audit-entry][data-action='registration.refund']")
    expect(refunded).to_contain_text("Late start")
    expect(refunded.get_by_test_id("audit-action")).to_contain_text("Refunded $5.00 of registration")
    expect(refunded.get_by_test_id("audit-actor")).not_to_contain_text("@")  # a director by name, no address


def test_a_second_director_sees_none_of_the_first_directors_races(new_page, stack, cognito, backend, api) -> None:
    assert stack.directors is not None
    theirs = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Not Yours 5K"),
        events=[EventDraft(name="5K", cap=10, priceCents=1000)],
    )
    email = f"second-{uuid.uuid4().hex[:8]}@racecap.localhost"
    temporary = directors.invite(cognito, stack.directors.user_pool_id, email)
    page = new_page()
    sign_in(page, email, temporary)
    page.get_by_label("New password", exact=True).fill("Second-director-pass-1!")
    page.get_by_label("New password again").fill("Second-director-pass-1!")
    page.get_by_test_id("new-password-submit").click()
    seed = page.get_by_test_id("totp-secret").inner_text()
    page.get_by_label("Code from your app").fill(totp_code(seed))
    page.get_by_test_id("enrol-submit").click()
    expect(page.get_by_test_id("no-races")).to_be_visible()
    page.goto(f"{CONSOLE}#/races/{theirs.raceId}")
    expect(page.get_by_test_id("not-found")).to_be_visible()
    # Bypassing the console: the API answers the second director's own token with 404.
    refresh = page.evaluate("() => sessionStorage.getItem('racecap.console.refresh')")
    tokens = cognito.initiate_auth(
        ClientId=stack.directors.client_id, AuthFlow="REFRESH_TOKEN_AUTH", AuthParameters={"REFRESH_TOKEN": refresh}
    )["AuthenticationResult"]
    bearer = {"Authorization": f"Bearer {tokens['IdToken']}"}
    for path in ("", "/stats", "/registrations", "/audit"):
        assert api.get(f"/api/admin/races/{theirs.raceId}{path}", headers=bearer).status_code == 404, path
    assert api.patch(f"/api/admin/races/{theirs.raceId}", json={"name": "Mine now"}, headers=bearer).status_code == 404


def test_a_races_zone_price_changes_and_age_rule_are_set_in_the_races_zone_and_the_race_is_copied(
    new_page, stack, backend, demo_seed, snap
) -> None:
    # The browser runs in Los Angeles; the race is in Tokyo: its times are typed and shown in Tokyo's.
    assert stack.directors is not None
    today = datetime.now(UTC).date()
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Tokyo Bay 10K"),
        location="",  # publishing names it as missing
        events=[EventDraft(name="Kids 1K", cap=50, priceCents=1500)],
    )
    page = signed_in_far_from_the_race(new_page, demo_seed)
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    expect(page.get_by_label("Time zone")).to_have_value("UTC")

    page.get_by_label("Time zone").fill("Asia/Tokyo")
    page.get_by_label("Time zone").press("Tab")
    opens = f"{today + timedelta(days=2)}T09:00"
    page.get_by_label("Registration opens").fill(opens)
    page.get_by_test_id("save-race").click()
    expect(page.get_by_test_id("race-saved")).to_have_text("Saved.")

    editor = page.get_by_test_id("event-row").filter(has_text="Kids 1K")
    editor.get_by_label("Minimum age on race day").fill("4")
    editor.get_by_label("No maximum age").uncheck()
    editor.get_by_label("Maximum age on race day").fill("12")
    tier1, tier2 = f"{today + timedelta(days=10)}T00:00", f"{today + timedelta(days=20)}T12:30"
    editor.get_by_test_id("add-tier").click()
    editor.get_by_label("Price change 1 starts").fill(tier1)
    editor.get_by_label("Price change 1 price").fill("0.10")  # under the provider's minimum: the API's field error
    editor.get_by_test_id("add-tier").click()
    editor.get_by_label("Price change 2 starts").fill(tier2)
    editor.get_by_label("Price change 2 price").fill("25.00")
    editor.get_by_test_id("save-event").click()
    expect(editor.get_by_label("Price change 1 price")).to_have_attribute("aria-invalid", "true")
    expect(editor.locator("[data-field='priceTiers.0.priceCents'] .error")).to_be_visible()
    editor.get_by_label("Price change 1 price").fill("20.00")
    editor.get_by_test_id("save-event").click()
    expect(editor.get_by_test_id("event-saved")).to_have_text("Kids 1K: saved.")

    # Stored in UTC: 09:00 in Tokyo is 00:00 UTC; midnight in Tokyo is 15:00 UTC the day before.
    stored = backend.store().get_race(race.raceId)
    assert stored is not None
    (kids,) = stored[1]
    assert stored[0].timeZone == "Asia/Tokyo"
    assert stored[0].registrationOpensAt == datetime.fromisoformat(f"{today + timedelta(days=2)}T00:00+00:00")
    assert (kids.minAge, kids.maxAge) == (4, 12)
    assert [(t.startsAt.isoformat(), t.priceCents) for t in kids.priceTiers] == [
        (f"{today + timedelta(days=9)}T15:00:00+00:00", 2000),
        (f"{today + timedelta(days=20)}T03:30:00+00:00", 2500),
    ]

    page.reload()
    expect(page.get_by_label("Time zone")).to_have_value("Asia/Tokyo")
    expect(page.get_by_label("Registration opens")).to_have_value(opens)
    editor = page.get_by_test_id("event-row").filter(has_text="Kids 1K")
    expect(editor.get_by_label("Minimum age on race day")).to_have_value("4")
    expect(editor.get_by_label("Maximum age on race day")).to_have_value("12")
    expect(editor.get_by_label("No maximum age")).not_to_be_checked()
    expect(editor.get_by_label("Price change 1 starts")).to_have_value(tier1)
    expect(editor.get_by_label("Price change 1 price")).to_have_value("20.00")
    expect(editor.get_by_label("Price change 2 starts")).to_have_value(tier2)
    snap(page, "zone-tiers-ages")

    # Publishing an incomplete race names what is missing, on its field.
    page.get_by_test_id("listing-listed").check()
    page.get_by_test_id("listing-apply").click()
    expect(page.get_by_test_id("missing")).to_contain_text("Location")
    expect(page.get_by_label("Location")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_test_id("race-state")).to_have_text("Draft")
    page.get_by_label("Location").fill("Odaiba")
    page.get_by_test_id("save-race").click()
    expect(page.get_by_test_id("race-saved")).to_have_text("Saved.")
    page.get_by_test_id("listing-unlisted").check()  # published by its link only
    page.get_by_test_id("listing-apply").click()
    expect(page.get_by_test_id("race-listing")).to_have_text("Unlisted: open by its link only")

    # Next year's edition: a new draft, its dates and price changes a year later, in Tokyo.
    page.get_by_test_id("copy-race").click()
    expect(page).not_to_have_url(re.compile(re.escape(race.raceId)))
    expect(page.get_by_role("heading", name=race.name)).to_be_visible()
    expect(page.get_by_test_id("race-state")).to_have_text("Draft")
    expect(page.get_by_label("Time zone")).to_have_value("Asia/Tokyo")
    expect(page.get_by_label("Race date", exact=True)).to_have_value(
        _a_year_later(date.fromisoformat(race.raceDate)).isoformat()
    )
    copied = page.get_by_test_id("event-row").filter(has_text="Kids 1K")
    expect(copied.get_by_label("Maximum age on race day")).to_have_value("12")
    expect(copied.get_by_label("Price change 1 price")).to_have_value("20.00")
    copy_id = page.url.rsplit("#/races/", 1)[1]
    copy = backend.store().get_race(copy_id)
    assert copy is not None and copy[0].listing == "DRAFT"
    shift = datetime.fromisoformat(copy[0].raceDate) - datetime.fromisoformat(stored[0].raceDate)
    assert copy[1][0].priceTiers[0].startsAt == kids.priceTiers[0].startsAt + shift


def test_two_tabs_edit_the_fairness_settings_and_the_second_save_keeps_what_was_typed(
    new_page, stack, backend, demo_seed
) -> None:
    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Fair Tabs 5K"),
    )
    first = signed_in(new_page, demo_seed)
    second = signed_in(new_page, demo_seed, viewport={"width": 768, "height": 1024})
    for page in (first, second):
        page.goto(f"{CONSOLE}#/races/{race.raceId}")
        expect(page.get_by_test_id("queue-figures")).to_contain_text("Queue off")

    first.get_by_label("Runners admitted per minute").fill("120")
    first.get_by_test_id("save-fairness").click()
    expect(first.get_by_test_id("fairness-saved")).to_have_text("Fairness settings saved.")

    second.get_by_label("Places one device may hold at once").fill("3")
    second.get_by_test_id("save-fairness").click()
    alert = second.get_by_test_id("fairness-alert")
    expect(alert).to_contain_text("changed meanwhile")
    expect(alert).to_contain_text("runners admitted per minute")
    expect(second.get_by_label("Places one device may hold at once")).to_have_value("3")  # what was typed is kept
    expect(second.get_by_label("Runners admitted per minute")).to_have_value("120")  # the other tab's change shows
    second.get_by_test_id("save-fairness").click()
    expect(second.get_by_test_id("fairness-saved")).to_have_text("Fairness settings saved.")
    first.reload()  # both changes are stored
    expect(first.get_by_label("Runners admitted per minute")).to_have_value("120")
    expect(first.get_by_label("Places one device may hold at once")).to_have_value("3")


def test_a_results_csv_uploads_with_progress_shows_row_errors_and_publishes(
    new_page, stack, backend, api, demo_seed, tmp_path
) -> None:
    from tests.integration.results import registration_item, seed_registrations

    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Results 5K"),
        location="Riverside",
        listing="UNLISTED",  # published: its results page is public
        race_in=timedelta(days=20),
        opens_in=-timedelta(days=1),
        closes_in=timedelta(days=10),
        events=[EventDraft(name="5K", cap=50, priceCents=1500)],
    )
    (event,) = api.get(f"/api/races/{race.raceId}").json()["events"]
    names = [("Ida", "Fast"), ("Joe", "Steady"), ("Kim", "Finish")]
    seed_registrations(
        backend,
        (
            registration_item(race.raceId, event["eventId"], b, f, last, "1990-01-01")
            for b, (f, last) in enumerate(names, 1)
        ),
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("bib,chip_time,gun_time,status,category\n1,0:20:00,0:20:05,,F\n99,0:21:00,0:21:09,,M\n")
    good = tmp_path / "results.csv"
    good.write_text(
        "bib,chip_time,gun_time,status,category\n"
        + "".join(f"{b},0:2{b}:00,0:2{b}:05,,{'FMF'[b - 1]}\n" for b in range(1, 4))
        + "\n" * 20_000  # padding, so the upload takes a moment and reports progress
    )

    page = signed_in(new_page, demo_seed, viewport={"width": 768, "height": 1024})
    page.goto(f"{CONSOLE}#/races/{race.raceId}/results")
    panel = page.get_by_test_id("results-event")
    expect(panel.get_by_test_id("results-state")).to_have_text("No results yet.")
    page.get_by_label("Results file (CSV)").set_input_files(str(bad))
    panel.get_by_test_id("results-upload").click()
    expect(panel.get_by_test_id("upload-status")).to_contain_text("Rejected", timeout=60_000)
    expect(panel.get_by_test_id("row-errors")).to_contain_text("Line 3")

    page.get_by_label("Results file (CSV)").set_input_files(str(good))
    panel.get_by_test_id("results-upload").click()
    progress = panel.get_by_test_id("upload-progress")
    expect(progress).to_be_visible()
    expect(progress).to_have_attribute("value", "100")
    expect(panel.get_by_test_id("upload-status")).to_contain_text("Ready", timeout=60_000)
    expect(panel.get_by_test_id("results-state")).to_contain_text("3 runners · not published")
    panel.get_by_test_id("results-publish").click()
    expect(panel.get_by_test_id("results-state")).to_contain_text("published")
    expect(panel.get_by_test_id("results-state")).not_to_contain_text("not published")
    pointer = api.get(f"/api/races/{race.raceId}/results").json()
    assert pointer["events"][0]["published"] is True


@pytest.mark.parametrize("width", [1280, 768])
def test_the_console_pages_by_keyboard_alone_with_labels_and_contrast(
    new_page, stack, backend, api, demo_seed, snap, width
) -> None:
    from tests.integration.flows import hold_and_register, runner, wait_confirmed

    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        opened=True,
        name=unique("Keys 10K"),
        location="Quayside",
        events=[EventDraft(name="10K", cap=20, priceCents=3000, minAge=16, maxAge=80)],
    )
    event_id = api.get(f"/api/races/{race.raceId}").json()["events"][0]["eventId"]
    wait_confirmed(api, [hold_and_register(api, race.raceId, event_id, runner() | {"lastName": "Keys"})[1]])

    page = signed_in(new_page, demo_seed, viewport={"width": width, "height": 900})
    accessible(page, "races")
    # The race list → the race, by Tab and Enter; each page's heading takes focus.
    link = page.get_by_role("link", name=race.name)
    for _ in range(40):
        page.keyboard.press("Tab")
        if link.evaluate("(el) => el === document.activeElement"):
            break
    expect(link).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=race.name, level=1)).to_be_focused()
    expect(page.get_by_test_id("event-row")).to_have_count(1)
    accessible(page, "race")
    for tab, heading in (("runners", "Runners"), ("results", "Results"), ("audit", "Audit trail")):
        page.goto(f"{CONSOLE}#/races/{race.raceId}")  # the first time, already there
        # Exactly the race's heading: "Results · <race>" contains its name too, and the walk
        # below must start on the race page, not on the tab left a moment before.
        expect(page.get_by_role("heading", name=race.name, exact=True, level=1)).to_be_focused()
        tab_to(page, f"tab-{tab}")
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", level=1)).to_contain_text(heading)
        expect(page.get_by_role("heading", level=1)).to_be_focused()
        if tab == "runners":
            expect(page.get_by_test_id("runner-row")).to_have_count(1)
        accessible(page, tab)
        if tab == "runners":
            # The runner's detail and the cancel dialog, by keyboard: focus goes to each heading.
            tab_to(page, "runner-open")
            page.keyboard.press("Enter")
            expect(page.locator("#runner-heading")).to_be_focused()
            expect(page.get_by_test_id("ledger-entry")).to_have_count(1)
            accessible(page, "runner detail")
            tab_to(page, "cancel-registration")
            page.keyboard.press("Enter")
            expect(page.locator("#runner-heading")).to_be_focused()
            tab_to(page, "review-refund")
            page.keyboard.press("Enter")
            expect(page.get_by_test_id("confirm-cancel")).to_have_text("Cancel and refund $30.00")
            accessible(page, "cancel confirmation")
            snap(page, f"cancel-{width}")

    # Back on the race: an event's price change added with the keyboard alone.
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    expect(page.get_by_role("heading", name=race.name, exact=True, level=1)).to_be_focused()
    tab_to(page, "add-tier")
    page.keyboard.press("Enter")
    expect(page.get_by_label("Price change 1 starts")).to_be_focused()
    accessible(page, "race with a price change row")
    snap(page, f"race-{width}")


def test_an_events_questions_stock_and_waiver_are_set_and_a_runners_answers_are_read(
    new_page, stack, backend, api, demo_seed, snap
) -> None:
    """The race's "Questions and waiver" page: questions added by keyboard, the API's field
    errors on the fields, a reorder, the built-ins and the waiver saved as versions with
    expectedVersion (a save made meanwhile is a 409 that keeps what was typed), each option's
    stock taken and left; then a runner's answers and waiver acceptance in the runner's detail."""
    from racecap.audit.service import AuditTrail
    from racecap.audit.store import DynamoAudit
    from racecap.aws.transactions import transact
    from racecap.models import Director
    from racecap.questions.models import QuestionSetDraft, Waiver
    from racecap.questions.service import Questions
    from racecap.questions.store import DynamoQuestions

    from tests.integration.flows import hold_and_register, runner, wait_confirmed

    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        opened=True,
        name=unique("Questions 10K"),
        location="Harbour",
        events=[EventDraft(name="10K", cap=20, priceCents=3000)],
    )
    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    expect(page.get_by_role("heading", name=race.name, level=1)).to_be_focused()
    tab_to(page, "tab-questions")
    page.keyboard.press("Enter")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_have_text(f"Questions and waiver · {race.name}")
    expect(heading).to_be_focused()
    expect(page.get_by_test_id("questions-version")).to_contain_text("asks no questions yet (version 0)")

    rows = page.get_by_test_id("question-row")

    def add_question(label: str, kind: str) -> Any:
        row = rows.nth(rows.count())  # the one this adds
        page.get_by_test_id("add-question").focus()
        page.keyboard.press("Enter")
        expect(row.get_by_label("Question", exact=True)).to_be_focused()  # the new question's first field
        page.keyboard.type(label)
        row.get_by_label("Kind of answer").select_option(kind)
        return row

    shirt = add_question("T-shirt size", "SINGLE_CHOICE")
    expect(shirt.get_by_label("Id in the export")).to_have_value("t_shirt_size")  # from the label
    shirt.get_by_label("Required", exact=True).check()
    for i, (size, quantity) in enumerate([("Small", ""), ("Medium", "1"), ("Large", "")], start=1):
        shirt.get_by_test_id("add-option").click()
        expect(shirt.get_by_label(f"Option {i}", exact=True)).to_be_focused()
        page.keyboard.type(size)
        if quantity:
            shirt.get_by_label(f"Option {i}: how many there are").fill(quantity)
    pace = add_question("Pace in minutes per km", "NUMBER")
    pace.get_by_label("Smallest answer (optional)").fill("12")
    pace.get_by_label("Largest answer (optional)").fill("3")  # below the smallest: the API's field error
    pace.get_by_label("Help text (optional)").fill("Puts you in the right start wave.")
    member = add_question("Member of a club?", "YES_NO")
    member.get_by_label("Required", exact=True).check()
    club = add_question("Club name", "SHORT_TEXT")
    club.get_by_label("Shown").select_option("member_of_a_club")
    expect(club.get_by_label("… with the answer")).to_have_value("true")
    club.get_by_label("Longest answer (characters)").fill("60")
    page.get_by_label("Emergency contact: a name and a phone number (required)").check()
    page.get_by_label("Runners must accept a waiver", exact=False).check()
    page.get_by_label("Waiver text").fill("I take part at my own risk.")
    accessible(page, "questions being written")

    page.get_by_test_id("save-questions").click()
    largest = pace.get_by_label("Largest answer (optional)")
    expect(largest).to_have_attribute("aria-invalid", "true")
    expect(page.locator("[data-field='questions.1.max'] > .error")).to_be_visible()
    expect(shirt.get_by_label("Option 2", exact=True)).to_have_value("Medium")  # nothing typed is lost
    pace.get_by_label("Smallest answer (optional)").fill("3")
    largest.fill("12")
    page.get_by_test_id("save-questions").click()
    expect(page.get_by_test_id("questions-alert")).to_have_text("Saved as version 1. Runners are asked it from now on.")
    expect(page.get_by_test_id("questions-version")).to_contain_text("version 1")
    expect(page.get_by_test_id("waiver-version")).to_contain_text("Runners now accept version 1")
    expect(shirt.locator("[data-field='questions.0.options.1.quantity'] .hint")).to_have_text("0 taken · 1 left of 1.")

    # The pace question moved below "Member of a club?", by keyboard: focus stays on its button.
    rows.nth(1).get_by_test_id("move-down").focus()
    page.keyboard.press("Enter")
    expect(rows.nth(2).get_by_test_id("move-down")).to_be_focused()
    expect(rows.nth(2).get_by_label("Question", exact=True)).to_have_value("Pace in minutes per km")

    # Meanwhile another tab (the same API) saves a new waiver: this save is a 409 that keeps the move.
    _, (event,) = backend.catalog().definition(race.raceId)
    stored, _ = backend.store().get_race(race.raceId)
    other = Questions(
        DynamoQuestions(backend.dynamodb, backend.table("Races")),
        lambda items: transact(backend.dynamodb, items),
        AuditTrail(DynamoAudit(backend.dynamodb, backend.table("Audit"))),
        backend.cache(),
        backend.inventory(),
    )
    theirs = other.view(stored, event)
    draft = QuestionSetDraft(
        questions=theirs.questions, builtIns=theirs.builtIns, waiver=Waiver(text="Revised waiver.")
    )
    other.save(Director(sub="other-tab", username="lee"), stored, event, draft)
    page.get_by_test_id("save-questions").click()
    alert = page.get_by_test_id("questions-alert")
    expect(alert).to_contain_text("saved meanwhile (now version 2, at ")
    expect(rows.nth(2).get_by_label("Question", exact=True)).to_have_value("Pace in minutes per km")
    page.get_by_test_id("save-questions").click()
    expect(alert).to_have_text("Saved as version 3. Runners are asked it from now on.")
    expect(rows).to_have_count(4)
    assert [rows.nth(i).get_attribute("data-question-id") for i in range(4)] == [
        "t_shirt_size", "member_of_a_club", "pace_in_minutes_per_km", "club_name"
    ]  # fmt: skip

    # A runner registers with a Medium: the page shows it taken, and the runner's detail their answers.
    answers = {"rc_emergency_name": "Kim Lee", "rc_emergency_phone": "+64 9 123 4567", "t_shirt_size": "Medium",
               "member_of_a_club": True, "club_name": "Harbour Harriers", "pace_in_minutes_per_km": 5.5}  # fmt: skip
    _, rid = hold_and_register(
        api, race.raceId, event.eventId,
        runner() | {"lastName": "Answers", "answers": answers, "waiver": {"accepted": True}},
    )  # fmt: skip
    wait_confirmed(api, [rid])
    page.reload()
    expect(heading).to_be_focused()
    expect(rows.first.locator("[data-field='questions.0.options.1.quantity'] .hint")).to_have_text(
        "1 taken · 0 left of 1."
    )
    accessible(page, "questions")
    page.set_viewport_size({"width": 768, "height": 1024})
    accessible(page, "questions at 768 px")
    snap(page, "questions")

    page.goto(f"{CONSOLE}#/races/{race.raceId}/runners")
    page.get_by_test_id("runner-open").click()
    shown = page.get_by_test_id("runner-answers")
    expect(shown.get_by_test_id("answer-t_shirt_size")).to_have_text("Medium")
    expect(shown.get_by_test_id("answer-club_name")).to_have_text("Harbour Harriers")
    expect(shown.get_by_test_id("answer-waiver")).to_contain_text("Accepted version 3")
    accessible(page, "runner detail with answers")
