"""A discount code as runners meet it, in real headless Chromium on a phone, keyboard only:
a wrong code is refused on its field, the right one (in any case) shows the new price
everywhere the price shows, removing it brings the held price back, and the card is charged
the discounted price."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect
from racecap.audit.service import AuditTrail
from racecap.audit.store import DynamoAudit
from racecap.codes.models import CodeDraft
from racecap.codes.service import CodesAdmin
from racecap.codes.store import DynamoCodes
from racecap.models import Director

from tests.browser.conftest import CHROMIUM
from tests.browser.steps import Runner, contrast_failures, expect_confirmed, field, fill_details, new_race, pay, unique
from tests.integration.flows import intents_for

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]


def _code(backend, race_id: str, **draft: object) -> None:
    """As the admin API makes it (the race's owner, its audit entry)."""
    codes = CodesAdmin(
        DynamoCodes(backend.dynamodb, backend.table("Races"), backend.table("Inventory")),
        backend.admin(),
        AuditTrail(DynamoAudit(backend.dynamodb, backend.table("Audit"))),
    )
    codes.create(Director(sub="director-test", username="director-test"), race_id, CodeDraft.model_validate(draft))


def test_a_runner_applies_a_code_by_keyboard_on_a_phone_and_pays_the_discounted_price(new_page, backend, stack) -> None:
    race_id = new_race(backend, unique("Spring Code 10K"), [5])  # $25.00
    _code(backend, race_id, code="SPRING", kind="PERCENT", percent=20, maxUses=5)
    phone: Page = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone.goto(f"/?fastpoll=1#/races/{race_id}")
    phone.get_by_test_id("hold-button").focus()
    phone.keyboard.press("Enter")
    expect(phone.get_by_test_id("registration-form")).to_be_visible()
    hold_id = phone.url.rsplit("#/holds/", 1)[1]
    summary = phone.get_by_test_id("hold-summary")
    expect(summary).to_contain_text("$25.00")

    phone.get_by_test_id("have-code").focus()
    phone.keyboard.press("Enter")  # loads the code's field and puts the cursor in it
    code = field(phone, "code")
    expect(code).to_be_focused()
    phone.keyboard.type("nosuch")
    phone.keyboard.press("Enter")  # applies the code; it does not send the details
    expect(phone.get_by_test_id("error-code")).to_have_text("There is no code NOSUCH for this race.")
    expect(code).to_have_attribute("aria-invalid", "true")
    expect(code).to_be_focused()
    expect(phone.get_by_test_id("details-step")).to_be_visible()

    code.fill("")
    phone.keyboard.type("spring")
    phone.keyboard.press("Enter")
    status = phone.get_by_test_id("code-status")
    expect(status).to_have_text("Code SPRING applied: $20.00 instead of $25.00.")
    expect(summary).to_contain_text("$20.00")
    expect(code).not_to_have_attribute("aria-invalid", "true")
    assert contrast_failures(phone) == []

    phone.get_by_test_id("remove-code").focus()
    phone.keyboard.press("Enter")
    expect(summary).to_contain_text("$25.00")
    expect(status).to_have_text("")
    field(phone, "code").fill("Spring")
    phone.get_by_test_id("apply-code").click()
    expect(summary).to_contain_text("$20.00")

    fill_details(phone, Runner.new())
    pay(phone)
    expect_confirmed(phone)
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert (intent["amount"], intent["status"]) == (2000, "succeeded")


def test_on_the_card_step_a_code_applied_and_removed_changes_what_the_card_pays(new_page, backend, stack) -> None:
    """The details sent, the card form shown: a code still applies (and comes off), the price shown
    and the hold's one payment follow it, and the card pays the discounted price."""
    race_id = new_race(backend, unique("Card Code 10K"), [5])  # $25.00
    _code(backend, race_id, code="LATE5", kind="AMOUNT", amountCents=500, maxUses=5)
    _code(backend, race_id, code="ALLFREE", kind="PERCENT", percent=100)
    phone: Page = new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone.goto(f"/?fastpoll=1#/races/{race_id}")
    phone.get_by_test_id("hold-button").focus()
    phone.keyboard.press("Enter")
    expect(phone.get_by_test_id("registration-form")).to_be_visible()
    hold_id = phone.url.rsplit("#/holds/", 1)[1]
    summary = phone.get_by_test_id("hold-summary")
    fill_details(phone, Runner.new())
    payment = phone.get_by_test_id("payment-step")

    payment.get_by_test_id("have-code").focus()
    phone.keyboard.press("Enter")
    code = field(phone, "code")
    expect(code).to_be_focused()
    phone.keyboard.type("late5")
    phone.keyboard.press("Enter")  # applies the code; it does not pay
    status = payment.get_by_test_id("code-status")
    expect(status).to_have_text("Code LATE5 applied: $20.00 instead of $25.00.")
    expect(summary).to_contain_text("$20.00")
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert intent["amount"] == 2000  # the same payment, its amount changed
    assert contrast_failures(phone) == []

    # A code making the place free is for the details step: refused on its field, nothing changed.
    code.fill("")
    phone.keyboard.type("allfree")
    phone.keyboard.press("Enter")
    expect(payment.get_by_test_id("error-code")).to_contain_text("only be applied before your details are sent")
    expect(code).to_be_focused()
    expect(summary).to_contain_text("$20.00")

    payment.get_by_test_id("remove-code").focus()
    phone.keyboard.press("Enter")
    expect(summary).to_contain_text("$25.00")
    expect(status).to_have_text("")
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert intent["amount"] == 2500

    field(phone, "code").fill("LATE5")
    payment.get_by_test_id("apply-code").click()
    expect(summary).to_contain_text("$20.00")
    pay(phone)
    expect_confirmed(phone)
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert (intent["amount"], intent["status"]) == (2000, "succeeded")
