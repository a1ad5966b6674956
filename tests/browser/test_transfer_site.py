"""Handing a place to someone else in real headless Chromium, on a phone and by keyboard only
(issue 41, transfers): the runner offers their place from their link (a mistyped address named
beside its field, an offer withdrawn and its link refused), the new runner takes it over from the
emailed link answering the event's questions and waiver, and lands on their own registration;
with a transfer fee, a declined card and then a good one in the page (the Stripe.js stand-in);
the director sets the transfer policy in the console and it is kept.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
import requests
from playwright.sync_api import Page, expect
from racecap.setup.models import EventDraft

from local.auth import director_sub
from local.stack import LocalStack
from tests.browser.conftest import CHROMIUM
from tests.browser.steps import CARD_FRAME, accessible, console_race, focused_testid, new_race, tab_to, unique
from tests.browser.test_console import CONSOLE, signed_in
from tests.browser.test_console_refund_policy import admin_get, in_words
from tests.integration.admin import DirectorSession, wait_until
from tests.integration.conftest import api_session
from tests.integration.flows import event_ids, hold_and_register, runner, wait_confirmed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

PHONE: dict[str, Any] = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
WAIVER = "I take part at my own risk."
SIZES = [{"id": "M", "label": "Medium", "quantity": 1}, {"id": "L", "label": "Large"}]


def _day(days: int) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).date().isoformat()


def _mail_link(stack: LocalStack, email: str, kind: str, route: str) -> str:
    """The site's ``route`` link (path and hash only) in the newest email of ``kind`` to ``email``."""

    def found() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if email in m["to"] and m["tags"].get("kind") == kind]

    (url,) = set(re.findall(rf"https?://\S+/{re.escape(route)}\S+", wait_until(found, timeout=45)[0]["text"]))
    return str(url).replace(stack.url, "")


def _race(stack: LocalStack, backend: Any, who: str, policy: dict[str, Any]) -> tuple[str, str, DirectorSession]:
    """A race (one event at 25.00 USD, race day in 30 days: after the cut-off) under ``policy``."""
    kim = DirectorSession(stack, who)
    race_id = new_race(backend, unique("Transfer 10K"), [5], owner=director_sub(who))
    patched = kim.patch(f"/api/admin/races/{race_id}", json={"refundPolicy": policy})
    assert patched.status_code == 200, patched.text
    (event_id,) = event_ids(api_session(stack), race_id)
    return race_id, event_id, kim


def _offer(page: Page, email: str) -> None:
    """On "my registration": the new runner's address typed into the section's form, sent by Enter."""
    tab_to(page, "transfer-email")
    page.keyboard.press("Control+A")
    page.keyboard.type(email)
    page.keyboard.press("Enter")


def _masked(email: str) -> str:
    name, domain = email.split("@")
    return f"{name[0]}***@{domain}"


def _details_by_keyboard(page: Page) -> None:
    tab_to(page, "field-firstName")
    page.keyboard.type("Grace")
    page.keyboard.press("Tab")
    page.keyboard.type("Hopper")
    page.keyboard.press("Tab")
    page.keyboard.type("1992/12/9")  # a phone's keypad: normalised to 1992-12-09


def _card_number_focused(page: Page) -> bool:
    return bool(page.frame_locator(CARD_FRAME).locator("#number").evaluate("(el) => el === document.activeElement"))


def _card_by_keyboard(page: Page, number: str) -> None:
    """Tab into the provider's frame (its card number), type a test card, Tab out to pay, Enter."""
    for _ in range(40):
        if _card_number_focused(page):
            break
        page.keyboard.press("Tab")
    else:
        raise AssertionError("Tab never reached the card number in the provider's frame")
    page.keyboard.press("Control+A")
    page.keyboard.type(number)
    page.keyboard.press("Tab")
    page.keyboard.press("Control+A")
    page.keyboard.type("12 / 34")
    page.keyboard.press("Tab")
    page.keyboard.press("Control+A")
    page.keyboard.type("123")
    tab_to(page, "transfer-pay", limit=10)
    page.keyboard.press("Enter")


def test_on_a_phone_by_keyboard_a_runner_hands_their_place_over_and_the_new_runner_takes_it_answering_the_questions(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    race_id, event_id, kim = _race(stack, backend, "kim-transfer-site", {"transfersUntil": _day(20)})
    saved = kim.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"expectedVersion": 0, "waiver": {"text": WAIVER},
              "questions": [{"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "required": True,
                             "options": SIZES}]},
    )  # fmt: skip
    assert saved.status_code == 200, saved.text
    tag = race_id[-6:].lower()
    ada, first, grace = f"ada-{tag}@example.com", f"first-{tag}@example.com", f"grace-{tag}@example.com"
    api = api_session(stack)
    body = runner(ada) | {"answers": {"shirt": "M"}, "waiver": {"accepted": True}}
    _, reg_id = hold_and_register(api, race_id, event_id, body)
    bib = wait_confirmed(api, [reg_id])[reg_id]["bib"]

    page = new_page(**PHONE)
    page.goto(_mail_link(stack, ada, "confirmation", "#/my/"))
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CONFIRMED")
    section = page.get_by_test_id("my-transfer")
    expect(section.get_by_role("heading", name="Hand my place to someone else")).to_be_visible()
    expect(section.get_by_test_id("transfer-terms")).to_have_attribute("data-fee", "0")
    expect(section.get_by_test_id("transfer-note")).to_contain_text("There is no transfer fee.")
    cut_off = date.fromisoformat(_day(20))
    expect(section.get_by_test_id("transfer-terms")).to_contain_text(f"{cut_off:%b} {cut_off.day}, {cut_off.year}")
    expect(section.get_by_test_id("transfer-note")).to_contain_text("your link stops working")
    accessible(page, "the transfer section")

    # A mistyped address is named beside its field, which keeps the focus.
    _offer(page, "grace-at-example")
    expect(page.get_by_test_id("transfer-email-error")).to_contain_text("name@example.com")
    assert focused_testid(page) == "transfer-email"
    # Its own address is no one to hand it to: the API's refusal, beside the field.
    page.keyboard.press("Control+A")
    page.keyboard.type(ada)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("transfer-email-error")).to_contain_text("own address")

    # A first offer, withdrawn: its link stops working and says so.
    page.keyboard.press("Control+A")
    page.keyboard.type(first)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("transfer-pending-to")).to_have_text(_masked(first))
    expect(page.get_by_test_id("transfer-status")).to_contain_text("on its way")
    withdrawn_link = _mail_link(stack, first, "transfer-offer", "#/transfer/")
    tab_to(page, "transfer-withdraw")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("transfer-status")).to_contain_text("Offer withdrawn")
    expect(page.get_by_test_id("transfer-pending")).to_have_count(0)
    assert focused_testid(page) == "transfer-email"
    late = new_page(**PHONE)
    late.goto(withdrawn_link)
    expect(late.get_by_test_id("transfer-error")).to_have_attribute("data-code", "OFFER_GONE")
    expect(late.get_by_test_id("transfer-error")).to_contain_text("new link")
    accessible(late, "a withdrawn offer")

    page.keyboard.type(grace)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("transfer-pending-to")).to_have_text(_masked(grace))
    accessible(page, "offer pending")
    snap(page, "offered")
    assert backend.registrations().get(reg_id).email == ada  # nothing moves before they accept

    # The new runner opens the emailed link: the token leaves the address bar; the offer shows.
    new = new_page(**PHONE)
    new.goto(_mail_link(stack, grace, "transfer-offer", "#/transfer/"))
    expect(new.get_by_test_id("offer-from")).to_have_text("Ada")
    assert new.url.endswith("#/transfer")
    expect(new.get_by_test_id("offer-email")).to_have_text(grace)
    expect(new.get_by_test_id("offer-fee")).to_have_text("None")
    expect(new.get_by_test_id("offer-event")).to_have_text("Event 0")
    expect(new.get_by_test_id("question-shirt")).to_be_visible()
    # Medium's one unit is Ada's: offered disabled, as the registration form offers it.
    assert new.get_by_test_id("question-shirt").locator("option[value=M]").is_disabled()
    accessible(new, "the offer")

    # Sent without the shirt and the waiver: each is named beside its field, the first focused.
    _details_by_keyboard(new)
    tab_to(new, "transfer-accept")
    new.keyboard.press("Enter")
    expect(new.get_by_test_id("error-answers.shirt")).to_contain_text("Please answer")
    expect(new.get_by_test_id("error-waiver.accepted")).to_contain_text("accept the waiver")
    assert focused_testid(new) == "question-shirt"
    expect(new.get_by_test_id("field-dateOfBirth")).to_have_value("1992-12-09")
    new.keyboard.type("Large")
    tab_to(new, "field-waiver.accepted")
    new.keyboard.press("Space")
    tab_to(new, "transfer-accept")
    new.keyboard.press("Enter")

    expect(new.get_by_test_id("transfer-done")).to_contain_text("The place is yours", timeout=30_000)
    expect(new.get_by_test_id("transfer-bib")).to_have_text(str(bib))
    assert focused_testid(new) == "transfer-open-mine"
    accessible(new, "taken over")
    snap(new, "taken-over")
    new.keyboard.press("Enter")
    expect(new.get_by_test_id("my-status")).to_have_attribute("data-status", "CONFIRMED")
    assert new.url.endswith("#/my")
    expect(new.get_by_test_id("my-runner")).to_have_text("Grace Hopper")
    expect(new.get_by_test_id("my-email")).to_have_text(grace)
    expect(new.get_by_test_id("my-bib")).to_have_text(str(bib))
    expect(new.get_by_test_id("my-details")).to_contain_text("Large")
    reg = backend.registrations().get(reg_id)
    assert (reg.email, reg.firstName, reg.dateOfBirth, reg.transfers) == (grace, "Grace", "1992-12-09", 1)

    # Ada's link was revoked by the move: her page says so instead of showing the entry.
    page.reload()
    expect(page.get_by_test_id("my-status")).to_have_count(0)
    expect(page.locator("body")).to_contain_text("new link")


def test_with_a_transfer_fee_the_new_runner_pays_by_card_in_the_page_after_a_decline_and_the_place_moves(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    race_id, _, kim = _race(
        stack, backend, "kim-transfer-fee-site", {"transfersUntil": _day(20), "transferFeeCents": 800}
    )
    tag = race_id[-6:].lower()
    ada, grace = f"ada-fee-{tag}@example.com", f"grace-fee-{tag}@example.com"
    api = api_session(stack)
    (event_id,) = event_ids(api, race_id)
    _, reg_id = hold_and_register(api, race_id, event_id, runner(ada))
    bib = wait_confirmed(api, [reg_id])[reg_id]["bib"]

    page = new_page(**PHONE)
    page.goto(_mail_link(stack, ada, "confirmation", "#/my/"))
    terms = page.get_by_test_id("transfer-terms")
    expect(terms).to_have_attribute("data-fee", "800")
    expect(page.get_by_test_id("transfer-note")).to_contain_text("The new runner pays a 8.00 USD transfer fee.")
    _offer(page, grace)
    expect(page.get_by_test_id("transfer-pending-to")).to_have_text(_masked(grace))

    new = new_page(**PHONE)
    new.goto(_mail_link(stack, grace, "transfer-offer", "#/transfer/"))
    expect(new.get_by_test_id("offer-fee")).to_have_text("$8.00")
    expect(new.get_by_test_id("offer-note")).to_contain_text("transfer fee")
    expect(new.get_by_test_id("transfer-accept")).to_have_text("Continue to payment")
    _details_by_keyboard(new)
    new.keyboard.press("Enter")  # from the date of birth: the form's own submit
    expect(new.get_by_test_id("transfer-payment")).to_be_visible()
    expect(new.locator(CARD_FRAME)).to_be_visible()
    expect(new.get_by_test_id("transfer-pay")).to_contain_text("$8.00")
    accessible(new, "the fee's card step")
    assert backend.registrations().get(reg_id).email == ada  # nothing moves before the fee is paid

    # A declined card: said on the card step; nothing moved; another card goes through.
    _card_by_keyboard(new, "4000 0000 0000 0002")
    expect(new.get_by_test_id("error-card")).to_contain_text("try another card")
    assert backend.registrations().get(reg_id).email == ada
    snap(new, "declined")
    _card_by_keyboard(new, "4242 4242 4242 4242")
    expect(new.get_by_test_id("transfer-done")).to_contain_text("The place is yours", timeout=30_000)
    expect(new.get_by_test_id("transfer-bib")).to_have_text(str(bib))
    accessible(new, "paid and taken over")
    new.keyboard.press("Enter")
    expect(new.get_by_test_id("my-runner")).to_have_text("Grace Hopper")
    expect(new.get_by_test_id("my-email")).to_have_text(grace)

    reg = backend.registrations().get(reg_id)
    assert (reg.email, reg.transfers) == (grace, 1)
    statement = kim.get(f"/api/admin/races/{race_id}/registrations/{reg_id}").json()["ledger"]
    payments = [(e["reason"], e["amountCents"]) for e in statement["entries"] if e["kind"] == "payment"]
    assert payments == [("entry", 2500), ("transfer_fee", 800)]


def test_on_a_phone_by_keyboard_the_director_sets_the_transfer_policy_and_it_is_kept(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, api: Any, demo_seed: str, snap: Any
) -> None:
    assert stack.directors is not None
    race = console_race(
        backend,
        stack.directors.demo_sub,
        name=unique("Transfers 10K"),
        currency="EUR",
        race_in=timedelta(days=120),
        events=[EventDraft(name="10K", cap=50, priceCents=4500)],
    )
    until = date.fromisoformat(race.raceDate) - timedelta(days=14)
    page = signed_in(new_page, demo_seed, **PHONE)
    page.goto(f"{CONSOLE}#/races/{race.raceId}")
    section = page.get_by_test_id("policy-section")
    summary = section.get_by_test_id("policy-summary")
    expect(summary).to_contain_text("Runners may not hand their place to someone else.")
    expect(section.get_by_label("A place taken over may still be refunded by the tiers")).to_be_checked()

    day_input = section.get_by_label("Runners may hand their place to someone else until")
    day_input.focus()  # a date control's segments by keyboard: month, day, year (en-US)
    page.keyboard.type(f"{until:%m%d%Y}")
    expect(day_input).to_have_value(until.isoformat())
    page.keyboard.press("Tab")  # the date control's own last stop (its calendar button) …
    page.keyboard.press("Tab")  # … then the fee, the next field in reading order
    expect(section.get_by_label("Transfer fee the new runner pays (EUR)")).to_be_focused()
    page.keyboard.type("5.00")
    page.keyboard.press("Tab")
    expect(section.get_by_label("A place taken over may still be refunded by the tiers")).to_be_focused()
    page.keyboard.press("Space")
    said = (
        f"Runners may hand their place to someone else until {in_words(until)}; the new runner pays a 5.00 EUR fee; "
        "a place taken over is not refunded."
    )
    expect(summary).to_contain_text(said)
    accessible(page, "transfer policy typed")
    tab_to(page, "save-policy")
    page.keyboard.press("Enter")
    expect(section.get_by_test_id("policy-saved")).to_have_text("Runners' changes saved.")
    snap(page, "saved")
    policy = admin_get(page, stack, api, race.raceId)["refundPolicy"]
    assert (policy["transfersUntil"], policy["transferFeeCents"], policy["transferredRefundable"]) == (
        until.isoformat(),
        500,
        False,
    )

    page.reload()
    section = page.get_by_test_id("policy-section")
    expect(section.get_by_label("Runners may hand their place to someone else until")).to_have_value(until.isoformat())
    expect(section.get_by_label("Transfer fee the new runner pays (EUR)")).to_have_value("5.00")
    expect(section.get_by_label("A place taken over may still be refunded by the tiers")).not_to_be_checked()
    expect(section.get_by_test_id("policy-summary")).to_contain_text(said)

    # A fee under the provider's minimum is refused beside the fee, which takes focus.
    fee = section.get_by_label("Transfer fee the new runner pays (EUR)")
    fee.focus()
    page.keyboard.press("Control+A")
    page.keyboard.type("0.10")
    tab_to(page, "save-policy")
    page.keyboard.press("Enter")
    expect(fee).to_have_attribute("aria-invalid", "true")
    expect(fee).to_be_focused()
    expect(section.locator("[data-field='refundPolicy.transferFeeCents'] .error")).to_contain_text("At least")
    accessible(page, "fee refused")
    assert admin_get(page, stack, api, race.raceId)["refundPolicy"]["transferFeeCents"] == 500
