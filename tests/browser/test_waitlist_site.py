"""An event's waitlist in real headless Chromium, on a phone and by keyboard only (issue 40,
slice 1): the sold-out event's "join the waitlist", the form (its errors beside its fields, the
proof-of-work solved in the page), the emailed link that confirms and shows the place, and
leaving.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from playwright.sync_api import Page, expect

from local.auth import director_sub
from local.stack import LocalStack
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import accessible, focused_testid, new_race, tab_to, unique
from tests.integration.admin import DirectorSession, wait_until
from tests.integration.conftest import api_session
from tests.integration.flows import event_ids, hold

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

PHONE: dict[str, Any] = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def _link(stack: LocalStack, email: str) -> str:
    """The site's link in the waitlist's confirmation email to ``email``."""

    def found() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if email in m["to"] and m["tags"].get("kind") == "waitlist-confirm"]

    (url,) = re.findall(r"https?://\S+/#/waitlist/\S+", wait_until(found, timeout=45)[0]["text"])
    return str(url)


def test_on_a_phone_by_keyboard_a_runner_joins_a_sold_out_events_waitlist_confirms_from_the_email_and_leaves(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    kim = DirectorSession(stack, "kim-waitlist-site")
    race_id = new_race(backend, unique("Waitlist 10K"), [1], owner=director_sub("kim-waitlist-site"))
    api = api_session(stack)
    (event_id,) = event_ids(api, race_id)
    on = kim.patch(f"/api/admin/races/{race_id}/events/{event_id}", json={"waitlist": {"enabled": True}})
    assert on.status_code == 200, on.text
    assert kim.patch(f"/api/admin/races/{race_id}/fairness", json={"powDifficulty": 4}).status_code == 200
    assert hold(api, race_id, event_id).status_code == 201  # the one place is held: sold out
    wait_until(lambda: api.get(f"/api/races/{race_id}").json()["events"][0]["status"] == "SOLD_OUT", timeout=10)
    email = f"wait-{race_id[-6:].lower()}@example.com"

    page = new_page(**PHONE)
    page.goto(f"/#/races/{race_id}")
    tab_to(page, "waitlist-link")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("wl-form")).to_be_visible()
    accessible(page, "the waitlist's form")

    # A mistyped address is named beside its field, and the focus goes there.
    tab_to(page, "wl-firstName")
    page.keyboard.type("Ada")
    page.keyboard.press("Tab")
    page.keyboard.type("Lovelace")
    page.keyboard.press("Tab")
    page.keyboard.type("ada-at-example")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("wl-email-error")).to_contain_text("name@example.com")
    assert focused_testid(page) == "wl-email"
    page.keyboard.press("Control+A")
    page.keyboard.type(email)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("wl-sent")).to_contain_text("Check your inbox", timeout=20_000)
    snap(page, "asked")

    # The emailed link confirms the address; the token leaves the address bar; the place shows.
    page.goto(_link(stack, email).replace(stack.url, ""))
    expect(page.get_by_test_id("wl-state")).to_have_attribute("data-state", "WAITING", timeout=20_000)
    assert page.url.endswith("#/waitlist")
    expect(page.get_by_test_id("wl-position")).to_have_text("1")
    accessible(page, "my place on the waitlist")
    snap(page, "waiting")

    # Leaving asks first; "no" keeps the place, "yes" leaves.
    tab_to(page, "wl-leave-start")
    page.keyboard.press("Enter")
    assert focused_testid(page) == "wl-leave-yes"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # "No, keep my place"
    assert focused_testid(page) == "wl-leave-start"
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # "Yes, leave the waitlist"
    expect(page.get_by_test_id("wl-state")).to_have_attribute("data-state", "LEFT", timeout=20_000)
    listed = kim.get(f"/api/admin/races/{race_id}/events/{event_id}/waitlist").json()
    assert [(e["state"], e["email"]) for e in listed["entries"]] == [("LEFT", "")]
    accessible(page, "left")
    snap(page, "left")


def test_a_director_switches_an_events_waitlist_on_in_the_console_with_a_cap_and_it_is_kept(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, api: Any, demo_seed: str, snap: Any
) -> None:
    from racecap.setup.models import EventDraft

    from tests.browser.steps import console_race
    from tests.browser.test_console import CONSOLE, signed_in
    from tests.browser.test_console_refund_policy import admin_get

    assert stack.directors is not None
    race = console_race(
        backend, stack.directors.demo_sub, name=unique("Waitlist Console 5K"),
        events=[EventDraft(name="5K", cap=20, priceCents=3000)],
    )  # fmt: skip
    page = signed_in(new_page, demo_seed, viewport={"width": 1280, "height": 900})
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    editor = page.get_by_test_id("event-waitlist")
    expect(editor.get_by_label("A waitlist once sold out")).not_to_be_checked()
    expect(editor.get_by_label("Hours to take an offered place")).to_have_value("48")
    editor.get_by_label("A waitlist once sold out").check()
    editor.get_by_label("Most runners on the list").fill("200")
    row = page.get_by_test_id("event-row")
    row.get_by_test_id("save-event").click()
    expect(row.get_by_test_id("event-saved")).to_contain_text("saved.")
    accessible(page, "the event's waitlist setting")
    snap(page, "console")
    stored = admin_get(page, stack, api, race.raceId)["events"][0]["waitlist"]
    assert stored == {"enabled": True, "offerWindowHours": 48, "maxLength": 200}
    page.reload()
    expect(page.get_by_test_id("event-waitlist").get_by_label("A waitlist once sold out")).to_be_checked()
    expect(page.get_by_test_id("event-waitlist").get_by_label("Most runners on the list")).to_have_value("200")


def test_on_a_phone_by_keyboard_a_runner_claims_the_place_offered_from_the_waitlist_and_lands_on_the_form(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    from racecap.aws.keys import waitlist_entry_id
    from racecap.waitlist.models import WaitlistEntry
    from racecap.waitlist.rules import iso
    from racecap.waitlist.store import DynamoWaitlist

    kim = DirectorSession(stack, "kim-offer-site")
    race_id = new_race(backend, unique("Offer 10K"), [1], owner=director_sub("kim-offer-site"))
    api = api_session(stack)
    (event_id,) = event_ids(api, race_id)
    on = kim.patch(f"/api/admin/races/{race_id}/events/{event_id}", json={"waitlist": {"enabled": True}})
    assert on.status_code == 200, on.text
    held = hold(api, race_id, event_id)
    assert held.status_code == 201
    # One runner in line (slice 1's join and confirm, through the store: the first test walks them).
    email = f"offer-{race_id[-6:].lower()}@example.com"
    store = DynamoWaitlist(backend.dynamodb, backend.table("Inventory"))
    now = iso(time.time())
    entry = WaitlistEntry(
        entryId=waitlist_entry_id(race_id, event_id, email), raceId=race_id, eventId=event_id, state="PENDING",
        email=email, firstName="Ada", lastName="Lovelace", joinedAt=now, ttl=int(time.time()) + 3600,
    )  # fmt: skip
    assert store.put_pending(entry, int(time.time()))
    store.confirm(entry, store.line(race_id, event_id), None, now)
    # The held place is given back: it goes to the line, and the sweeper offers it.
    assert api.delete(f"/api/holds/{held.json()['holdId']}").status_code == 204

    def offered() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if email in m["to"] and m["tags"].get("kind") == "waitlist-offer"]

    (url,) = re.findall(r"https?://\S+/#/waitlist/offer/\S+", wait_until(offered, timeout=45)[0]["text"])

    page = new_page(**PHONE)
    page.goto(url.replace(stack.url, ""))
    expect(page.get_by_test_id("wl-offer-state")).to_have_attribute("data-state", "OFFERED", timeout=20_000)
    assert page.url.endswith("#/waitlist/offer")  # the token left the address bar
    expect(page.get_by_test_id("wl-offer-price")).to_contain_text("25")
    accessible(page, "the offered place")
    snap(page, "offered")

    # Passing it on asks first; "no" keeps the offer; claiming leads to the usual form.
    tab_to(page, "wl-offer-decline")
    page.keyboard.press("Enter")
    assert focused_testid(page) == "wl-offer-decline-yes"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # "No, keep the offer"
    assert focused_testid(page) == "wl-offer-decline"
    tab_to(page, "wl-offer-claim")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*#/holds/hold_[^/]+$"), timeout=20_000)
    expect(page.get_by_test_id("page-title")).to_be_visible()
    accessible(page, "the claimed place's form")
    snap(page, "claimed")
    listed = kim.get(f"/api/admin/races/{race_id}/events/{event_id}/waitlist").json()
    assert (listed["accepted"], listed["offersOut"], listed["pooled"]) == (1, 0, 0)


def test_on_a_phone_by_keyboard_a_director_sees_the_list_removes_a_runner_releases_a_place_and_closes_the_list(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, api: Any, demo_seed: str, snap: Any
) -> None:
    """The console's waitlist page (issue 40, directors): the list with places and states, the
    figures, removing someone and releasing places (each by keyboard, with its confirmation or its
    field error), the CSV of every list, and closing, after which the one runner still waiting gets
    exactly one "the list has closed" email."""
    import csv

    from racecap.setup.models import EventDraft, WaitlistFields

    from tests.browser.steps import console_race, published
    from tests.browser.test_console import CONSOLE, signed_in
    from tests.browser.test_console_refund_policy import admin_get

    assert stack.directors is not None
    race = console_race(
        backend, stack.directors.demo_sub, opened=True, name=unique("Waitlist Director 5K"), location="Lakeside",
        events=[EventDraft(name="5K", cap=1, priceCents=3000, waitlist=WaitlistFields(enabled=True))],
    )  # fmt: skip
    rid = published(backend, race.raceId)
    (eid,) = event_ids(api, rid)
    assert hold(api, rid, eid).status_code == 201  # the one place is held: sold out
    emails = _in_line(backend, rid, eid, 3)

    page = signed_in(new_page, demo_seed, **PHONE)
    page.goto(f"{CONSOLE}#/races/{rid}/waitlist")
    entries = page.get_by_test_id("wl-entry")
    expect(entries).to_have_count(3)
    expect(page.get_by_test_id("wl-entry-position")).to_have_text(["1", "2", "3"])
    expect(page.get_by_test_id("wl-fig-waiting")).to_have_text("3")
    accessible(page, "the director's waitlist")
    # On a phone, Chromium widens the layout to fit what overflows (so innerWidth grows with it):
    # the page's width against the phone's own is what shows sideways scrolling.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["viewport"]["width"]
    snap(page, "list")

    # Remove the second runner: "no" first keeps them (the focus back on the button), then "yes".
    second = entries.nth(1).get_attribute("data-entry-id")
    _tab_to_in_row(page, "wl-remove", second)
    page.keyboard.press("Enter")
    assert focused_testid(page) == "wl-remove-yes"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # "No"
    assert focused_testid(page) == "wl-remove"
    expect(entries.nth(1)).to_have_attribute("data-state", "WAITING")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # "Yes, remove"
    expect(page.get_by_test_id("wl-admin-status")).to_contain_text("removed from the list")
    expect(page.locator(f'[data-entry-id="{second}"]')).to_have_attribute("data-state", "REMOVED")
    expect(page.get_by_test_id("wl-fig-waiting")).to_have_text("2")
    trail = [e for e in admin_get(page, stack, api, rid, "/audit")["entries"] if e["action"] == "waitlist.entry.remove"]
    assert [e["target"] for e in trail] == [second] and "@" not in repr(trail)

    # Release a place: a mistyped number is named beside its field; 1 place goes to runner 1.
    tab_to(page, "wl-release-places")
    page.keyboard.type("0")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("wl-release-places-error")).to_contain_text("1 to 10,000")
    assert page.evaluate("() => document.activeElement.id") == "wl-release-places"
    page.keyboard.press("Control+A")
    page.keyboard.type("1")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("wl-admin-status")).to_contain_text("1 place released")
    assert admin_get(page, stack, api, rid)["events"][0]["cap"] == 2
    wait_until(lambda: _mailed(stack, "waitlist-offer", emails) == emails[:1], timeout=45)

    # Close the list: asked first; then the offer ends, and the runner waiting and the one whose
    # offer ended each hear once (the removed runner does not).
    tab_to(page, "wl-close")
    page.keyboard.press("Enter")
    assert focused_testid(page) == "wl-close-yes"
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("wl-admin-status")).to_contain_text("The list is closed")
    expect(page.get_by_test_id("wl-fig-the-list")).to_have_text("Closed")
    expect(page.get_by_test_id("wl-close")).to_be_disabled()
    accessible(page, "the closed waitlist")
    snap(page, "closed")
    told = [emails[0], emails[2]]
    wait_until(lambda: _mailed(stack, "waitlist-closed", emails) == told, timeout=45)
    time.sleep(3)  # a second email, were one coming, would be on its way by now
    assert _mailed(stack, "waitlist-closed", emails, each=True) == told

    # The CSV of every list: each entry with its place, state and offer.
    tab_to(page, "wl-export")
    with page.expect_download() as got:
        page.keyboard.press("Enter")
    with open(got.value.path(), newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["email"], r["state"]) for r in rows] == [
        (emails[0], "OFFERED"), (emails[1], "REMOVED"), (emails[2], "WAITING"),
    ]  # fmt: skip
    assert (rows[0]["offerState"], rows[2]["position"]) == ("CLOSED", "2")  # the close ended the offer


def _in_line(backend: Any, race_id: str, event_id: str, n: int) -> list[str]:
    """``n`` runners confirmed in line, in order, through the waitlist's store (joining through
    the site is the first test's); their addresses."""
    from racecap.aws.keys import waitlist_entry_id
    from racecap.waitlist.models import WaitlistEntry
    from racecap.waitlist.rules import iso
    from racecap.waitlist.store import DynamoWaitlist

    store = DynamoWaitlist(backend.dynamodb, backend.table("Inventory"))
    emails = [f"line{i}-{race_id[-6:].lower()}@example.com" for i in range(1, n + 1)]
    for i, email in enumerate(emails):
        now = iso(time.time())
        entry = WaitlistEntry(
            entryId=waitlist_entry_id(race_id, event_id, email), raceId=race_id, eventId=event_id, state="PENDING",
            email=email, firstName=f"Runner{i + 1}", lastName="Inline", joinedAt=now, ttl=int(time.time()) + 3600,
        )  # fmt: skip
        assert store.put_pending(entry, int(time.time()))
        store.confirm(entry, store.line(race_id, event_id), None, now)
    return emails


def _mailed(stack: LocalStack, kind: str, emails: list[str], each: bool = False) -> list[str]:
    """Which of ``emails`` got an email of ``kind``; ``each``: only those that got exactly one."""
    mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
    to = [t for m in mail if m["tags"].get("kind") == kind for t in m["to"]]
    counts = {e: sum(1 for t in to if e in t) for e in emails}
    return [e for e in emails if (counts[e] == 1 if each else counts[e] > 0)]


def _tab_to_in_row(page: Page, testid: str, entry_id: str | None, limit: int = 80) -> None:
    """Tab (as a keyboard user) to the ``testid`` control of the list's row for ``entry_id``."""
    for _ in range(limit):
        tab_to(page, testid, limit)
        if page.evaluate("() => document.activeElement.closest('tr')?.dataset.entryId") == entry_id:
            return
    raise AssertionError(f"never reached {testid} in the row of {entry_id}")
