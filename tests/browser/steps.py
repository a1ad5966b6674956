"""A runner's steps through the site, as a browser user does them (labels, test ids, clicks),
plus the few direct arrangements the tests need (expiring a hold, another runner's hold)."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from racecap.aws.items import to_item, values
from racecap.races.models import Race
from racecap.setup.models import EventDraft, RaceDraft

from tests.integration.conftest import Backend

# The writer confirms within ~1 s; the waiting screen (fastpoll) checks after 1, 2, 4 s...
CONFIRM_TIMEOUT_MS = 60_000
LISTING_TIMEOUT_S = 20
FIELDS = {
    "email": "Email address",
    "firstName": "First name",
    "lastName": "Last name",
    "dateOfBirth": "Date of birth",
    "code": "Discount code (optional)",
}


@dataclass
class Runner:
    email: str
    firstName: str = "Ada"
    lastName: str = "Lovelace"
    dateOfBirth: str = "1990-12-10"

    @classmethod
    def new(cls, **kw: Any) -> Runner:
        return cls(email=f"runner-{uuid.uuid4().hex[:10]}@example.com", **kw)


def unique(name: str) -> str:
    return f"{name} {uuid.uuid4().hex[:6]}"


def new_race(backend: Backend, name: str, caps: list[int], **kw: Any) -> str:
    kw.setdefault("location", "Portland, OR")
    return published(backend, backend.create_race(caps, name=name, **kw))


def published(backend: Backend, race_id: str) -> str:
    """What the admin API does after creating a race: bump the cached listing's stamp."""
    backend.catalog().invalidate(race_id, 1)
    return race_id


def console_race(
    backend: Backend,
    director: str,
    *,
    opened: bool = False,
    race_in: timedelta = timedelta(days=90),
    opens_in: timedelta | None = None,
    closes_in: timedelta = timedelta(days=30),
    **overrides: Any,
) -> Race:
    """A race as ``director`` creates it in the console (``RaceAdmin.create_race``): a draft named
    "Race …" with one 5K (50 places, $30.00), race day in 90 days, registration from tomorrow for
    30 days. ``opened``: a race runners register for now (listed, registration opened a minute ago
    and open). ``race_in``, ``opens_in`` and ``closes_in`` count from now; ``overrides`` are any
    other ``RaceDraft`` fields. A listed race needs ``published`` before the race list shows it."""
    now = datetime.now(UTC)
    if opens_in is None:
        opens_in = -timedelta(minutes=1) if opened else timedelta(days=1)
    if opened:
        overrides.setdefault("listing", "LISTED")
    overrides.setdefault("name", unique("Race"))
    overrides.setdefault("events", [EventDraft(name="5K", cap=50, priceCents=3000)])
    draft = RaceDraft(
        raceDate=(now + race_in).date().isoformat(),
        registrationOpensAt=now + opens_in,
        registrationClosesAt=now + closes_in,
        **overrides,
    )
    return backend.admin().create_race(director, draft, open_now=opened)


def scheduled_race(backend: Backend, name: str, opens_in: timedelta, cap: int = 10) -> str:
    """A published race whose registration opens later (the director scheduled it)."""
    race = console_race(
        backend,
        "director-test",
        name=name,
        location="Bend, OR",
        listing="LISTED",
        race_in=timedelta(days=60),
        opens_in=opens_in,
        closes_in=opens_in + timedelta(days=7),
        events=[EventDraft(name="Half marathon", cap=cap, priceCents=4500)],
    )
    return published(backend, race.raceId)


def field(page: Page, name: str) -> Locator:
    """A form field found by its visible label, as a screen reader user finds it."""
    return page.get_by_label(FIELDS[name], exact=True)


def open_race_list(page: Page, race_name: str) -> Locator:
    """Opens the race list and returns the named race's item. Each API environment holds the
    listing's version stamp for up to a second, so a just-created race may need a reload."""
    item = page.get_by_test_id("race-item").filter(has_text=race_name)
    deadline = time.monotonic() + LISTING_TIMEOUT_S
    while True:
        page.goto("/?fastpoll=1#/")
        expect(page.get_by_test_id("race-list")).to_be_visible()
        if item.count() or time.monotonic() > deadline:
            break
        page.wait_for_timeout(500)
    expect(item).to_be_visible()
    return item


def open_race(page: Page, race_id: str) -> None:
    page.goto(f"/?fastpoll=1#/races/{race_id}")
    expect(page.get_by_test_id("event").first).to_be_visible()


def event_card(page: Page, event_name: str | None = None) -> Locator:
    cards = page.get_by_test_id("event")
    return (
        cards.filter(has=page.get_by_test_id("event-name").filter(has_text=event_name)) if event_name else cards.first
    )


def hold_place(page: Page, event_name: str | None = None) -> str:
    """Clicks "Hold my place"; returns the hold id once the registration form shows."""
    event_card(page, event_name).get_by_test_id("hold-button").click()
    return wait_for_form(page)


def wait_for_form(page: Page) -> str:
    expect(page).to_have_url(re.compile(r"#/holds/[^/]+$"))
    expect(page.get_by_test_id("registration-form")).to_be_visible()
    return page.url.rsplit("#/holds/", 1)[1]


def fill_details(page: Page, runner: Runner) -> None:
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).fill(getattr(runner, name))
    page.get_by_test_id("continue-button").click()
    expect(page.get_by_test_id("payment-step")).to_be_visible()
    expect(page.get_by_test_id("runner-summary")).to_contain_text(runner.email.strip())


CARD_FRAME = "iframe[title='Secure payment input frame']"
CHALLENGE_FRAME = "iframe[title='3D Secure authentication']"


def type_card(page: Page, number: str = "4242 4242 4242 4242") -> None:
    """Types a card into the provider's own frame (Stripe's Payment Element; the stand-in locally)."""
    card = page.frame_locator(CARD_FRAME)
    card.locator("#number").fill(number)
    card.locator("#expiry").fill("12 / 34")
    card.locator("#cvc").fill("123")


def pay(page: Page, number: str = "4242 4242 4242 4242") -> None:
    """Types one of Stripe's test cards (the page lists them) into the card form and pays."""
    expect(page.locator(CARD_FRAME)).to_be_visible()
    type_card(page, number)
    page.get_by_test_id("submit-registration").click()


def answer_3d_secure(page: Page, approve: bool) -> None:
    expect(page.locator(CHALLENGE_FRAME)).to_be_visible()
    button = "Complete authentication" if approve else "Fail authentication"
    page.frame_locator(CHALLENGE_FRAME).get_by_role("button", name=button).click()


def expect_confirmed(page: Page, runner: Runner | None = None) -> str:
    """Waits for the confirmation page; returns the bib number."""
    bib = page.get_by_test_id("bib")
    expect(bib).to_have_text(re.compile(r"^\d+$"), timeout=CONFIRM_TIMEOUT_MS)
    expect(page.get_by_test_id("page-title")).to_have_text("You are in!")
    expect(page.get_by_test_id("registration-status")).to_have_attribute("data-status", "CONFIRMED")
    if runner:
        expect(page.get_by_test_id("confirmation-runner")).to_have_text(f"{runner.firstName} {runner.lastName}")
        expect(page.get_by_test_id("view")).to_contain_text(runner.email.strip())
    return bib.inner_text()


def focused_testid(page: Page) -> str | None:
    return page.evaluate("() => document.activeElement && document.activeElement.dataset.testid || null")


def expire_hold(backend: Backend, hold_id: str) -> None:
    """Moves a hold's expiry into the past, as if the runner had taken too long."""
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
        UpdateExpression="SET expiresAt = :t",
        ExpressionAttributeValues=values({":t": (datetime.now(UTC) - timedelta(seconds=5)).isoformat()}),
    )


def first_event_id(api: requests.Session, race_id: str) -> str:
    return str(api.get(f"/api/races/{race_id}").json()["events"][0]["eventId"])


def horizontal_overflow(page: Page) -> int:
    """How many CSS pixels the page is wider than the viewport (0 = no sideways scrolling)."""
    return int(page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth"))


# WCAG 2.x contrast of every visible text node's colour against the first opaque background
# behind it (disabled controls are exempt). Returns the failures.
CONTRAST_JS = """() => {
  const parse = (c) => {
    const m = /rgba?\\(([^)]+)\\)/.exec(c);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const lum = ({ r, g, b }) => {
    const f = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = parse(getComputedStyle(el).backgroundColor);
      if (c && c.a > 0) return c;
    }
    return { r: 255, g: 255, b: 255, a: 1 };
  };
  const failures = [];
  for (const el of document.querySelectorAll('body *')) {
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility !== 'visible' || !el.getClientRects().length || el.closest('[hidden], :disabled')) continue;
    if (el.closest('.visually-hidden')) continue;
    const fg = parse(cs.color);
    const l1 = lum(fg), l2 = lum(background(el));
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    const px = parseFloat(cs.fontSize);
    const large = px >= 24 || (Number(cs.fontWeight) >= 700 && px >= 18.66);
    if (ratio < (large ? 3 : 4.5)) {
      failures.push(`${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 40)}" ${ratio.toFixed(2)}:1`);
    }
  }
  return failures;
}"""


def contrast_failures(page: Page) -> list[str]:
    return list(page.evaluate(CONTRAST_JS))


# Every visible form control with no accessible name: no <label>, aria-label or
# aria-labelledby (inputs, selects, text areas), or no text or aria-label (buttons).
UNLABELLED_JS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('input, select, textarea, button')) {
    if (el.type === 'hidden' || !el.getClientRects().length || el.closest('[hidden]')) continue;
    const named = el.getAttribute('aria-label')?.trim() || el.getAttribute('aria-labelledby') ||
      (el.tagName === 'BUTTON' ? el.textContent.trim() : [...(el.labels || [])].some((l) => l.textContent.trim()));
    if (!named) out.push(`${el.tagName.toLowerCase()}#${el.id || ''}[name=${el.name || ''}]`);
  }
  return out;
}"""


def unlabelled_controls(page: Page) -> list[str]:
    return list(page.evaluate(UNLABELLED_JS))


def accessible(page: Page, what: str) -> None:
    """What is on ``page`` now has no contrast failure, no unlabelled control and no sideways
    scrolling (``what`` names the moment in a failure)."""
    assert contrast_failures(page) == [], what
    assert unlabelled_controls(page) == [], what
    assert horizontal_overflow(page) == 0, what


def tab_to(page: Page, testid: str, limit: int = 80) -> None:
    """Presses Tab until the element with ``testid`` has focus (as a keyboard user walks the
    page), and checks the focus is visible there."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if focused_testid(page) == testid:
            # Polled briefly, not read once: a page that re-renders around the focused control
            # (the console's tabs after a route's data arrives) restyles it a frame later.
            try:
                page.wait_for_function(
                    "(id) => document.activeElement?.dataset.testid === id"
                    " && getComputedStyle(document.activeElement).outlineStyle !== 'none'",
                    arg=testid,
                    timeout=2000,
                )
            except PlaywrightTimeoutError:
                outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
                raise AssertionError(f"{testid} has focus without a visible outline ({outline})") from None
            return
    raise AssertionError(f"{limit} presses of Tab never reached {testid} (last: {focused_testid(page)})")


def open_in_tokyo(stack: Any, backend: Backend, name: str, events: list[EventDraft]) -> tuple[Race, Any, list[str]]:
    """A race in Tokyo open to runners now, as the demo director made it: the race, a runners'
    API session on the stack, and its event ids in order (once its page says it is open)."""
    from tests.integration.admin import wait_until
    from tests.integration.conftest import api_session

    race = console_race(
        backend, stack.directors.demo_sub, opened=True, name=unique(name), location="Odaiba",
        timeZone="Asia/Tokyo", events=events,
    )  # fmt: skip
    api = api_session(stack)
    wait_until(lambda: api.get(f"/api/races/{race.raceId}").json()["status"] == "OPEN", timeout=10)
    return race, api, [e["eventId"] for e in api.get(f"/api/races/{race.raceId}").json()["events"]]
