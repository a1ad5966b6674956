"""Paying on the runner's site with the provider's card form (the Stripe.js stand-in's Payment
Element, an iframe from the stand-in's own origin): 3-D Secure approved and failed, a tab
closed right after paying, two tabs on one hold, and no card number ever reaching Racecap."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Page, Request, expect

from tests.browser.conftest import CHROMIUM
from tests.browser.steps import (
    CARD_FRAME,
    Runner,
    answer_3d_secure,
    expect_confirmed,
    fill_details,
    hold_place,
    new_race,
    open_race,
    pay,
    type_card,
    unique,
)
from tests.integration.flows import intents_for, standin, wait_confirmed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

CARD = "4242424242424242"


def test_3d_secure_approved_registers(page: Page, backend, snap) -> None:
    race_id = new_race(backend, unique("Summit 3DS"), [3])
    runner = Runner.new()
    open_race(page, race_id)
    hold_place(page)
    fill_details(page, runner)
    pay(page, "4000 0025 0000 3155")
    snap(page, "3ds-challenge")
    answer_3d_secure(page, approve=True)
    expect_confirmed(page, runner)


def test_3d_secure_failed_keeps_the_place_and_another_card_works(page: Page, backend, stack) -> None:
    race_id = new_race(backend, unique("Valley 3DS"), [3])
    runner = Runner.new()
    open_race(page, race_id)
    hold_id = hold_place(page)
    fill_details(page, runner)
    pay(page, "4000 0025 0000 3155")
    answer_3d_secure(page, approve=False)
    expect(page.get_by_test_id("error-card")).to_contain_text("Your place is still held")
    expect(page.get_by_test_id("payment-step")).to_be_visible()
    pay(page)
    expect_confirmed(page, runner)
    assert [i["status"] for i in intents_for(stack, hold_id=hold_id)] == ["succeeded"]


def test_a_tab_closed_right_after_paying_still_gets_the_place_the_bib_and_the_email(
    new_page, backend, stack, api
) -> None:
    page = new_page()
    race_id = new_race(backend, unique("Closed Tab 10K"), [3])
    runner = Runner.new()
    open_race(page, race_id)
    hold_id = hold_place(page)
    fill_details(page, runner)
    # The tab goes away before the site can tell Racecap: only the provider's webhook can.
    page.route(re.compile(r"/api/holds/[^/]+/payment/confirm$"), lambda route: route.abort("internetdisconnected"))
    pay(page)
    expect(page.locator(CARD_FRAME)).to_be_visible()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=form-status]') !== null", timeout=20_000
    )  # the page is still there; the payment went through at the provider
    _wait_paid(stack, hold_id)
    page.context.close()

    rid = "reg_" + hold_id.removeprefix("hold_")
    confirmed = wait_confirmed(api, [rid], timeout=60)[rid]
    assert confirmed["bib"] >= 1

    def mails() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if m["tags"].get("registrationId") == rid and m["tags"].get("kind") == "confirmation"]

    from tests.integration.admin import wait_until

    wait_until(mails, timeout=60)


def _wait_paid(stack: Any, hold_id: str) -> None:
    from tests.integration.admin import wait_until

    wait_until(lambda: [i for i in intents_for(stack, hold_id=hold_id) if i["status"] == "succeeded"], timeout=30)


def test_two_tabs_on_one_hold_make_one_intent_and_one_charge(new_page, backend, stack) -> None:
    race_id = new_race(backend, unique("Two Tabs 5K"), [3])
    runner = Runner.new()
    first = new_page()
    open_race(first, race_id)
    hold_id = hold_place(first)
    fill_details(first, runner)
    # The same hold in a second tab (the link pasted into it): a tab keeps its own context, so
    # the link resumes at the card step, and the same intent comes back.
    second = first.context.new_page()
    second.goto(first.url)
    expect(second.get_by_test_id("runner-summary")).to_have_text("The runner's details were sent from another device.")
    expect(second.locator(CARD_FRAME)).to_be_visible()
    assert len(intents_for(stack, hold_id=hold_id)) == 1

    pay(first)
    expect_confirmed(first, runner)
    type_card(second)
    second.get_by_test_id("submit-registration").click()
    # The second tab's confirmation is refused by the provider (already paid): no second charge.
    expect(second.get_by_test_id("error-card").or_(second.get_by_test_id("bib"))).to_be_visible(timeout=30_000)
    intents = intents_for(stack, hold_id=hold_id)
    assert [i["status"] for i in intents] == ["succeeded"]
    stats = standin(stack).get(f"{stack.stripe_url}/_standin/stats").json()
    assert stats["succeededCharges"] >= 1
    charges = _charges_for(stack, intents[0]["id"])
    assert charges == 1


def _charges_for(stack: Any, intent_id: str) -> int:
    events = (
        standin(stack)
        .get(f"{stack.stripe_url}/v1/events", params={"type": "charge.succeeded", "limit": 100})
        .json()["data"]
    )
    return sum(1 for e in events if e["data"]["object"].get("payment_intent") == intent_id)


def test_no_card_number_reaches_racecaps_gateway_handlers_or_logs(page: Page, backend, stack) -> None:
    race_id = new_race(backend, unique("Private Card 10K"), [3])
    runner = Runner.new()
    to_racecap: list[str] = []
    gateway = f"127.0.0.1:{stack.ports.gateway}"

    def record(request: Request) -> None:
        if gateway in request.url:
            to_racecap.append(f"{request.method} {request.url} {request.post_data or ''}")

    page.on("request", record)
    open_race(page, race_id)
    hold_place(page)
    fill_details(page, runner)
    frame = page.locator(CARD_FRAME)
    assert frame.get_attribute("src").startswith(stack.stripe_url)  # type: ignore[union-attr]
    pay(page)
    expect_confirmed(page, runner)

    assert to_racecap, "the page talked to Racecap's gateway"
    leaked = [r for r in to_racecap if CARD in r.replace(" ", "")]
    assert leaked == []
    for log in Path(stack.log_dir).rglob("*"):
        if log.is_file() and "stripe" not in log.name:
            text = log.read_text(errors="replace").replace(" ", "")
            assert CARD not in text, f"{log} holds a card number"
