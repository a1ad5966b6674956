"""A runner's own entry in real headless Chromium, on a phone and by keyboard only (issue 39):
find my registration on the race's page, open the emailed link, see the registration, and
cancel it with the refund shown before confirming.

Each test leaves ``test-artifacts/browser/<test>.png``."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
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
from tests.integration.flows import event_ids, hold_and_register, runner, wait_confirmed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

PHONE: dict[str, Any] = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}


def _registered(stack: LocalStack, backend: Any, policy: dict[str, Any]) -> tuple[str, str, str]:
    """A race with ``policy`` and one confirmed runner: (race id, registration id, email)."""
    kim = DirectorSession(stack, "kim-own-site")
    race_id = new_race(backend, unique("Own Entry 10K"), [5], owner=director_sub("kim-own-site"))
    patched = kim.patch(f"/api/admin/races/{race_id}", json={"refundPolicy": policy})
    assert patched.status_code == 200, patched.text
    api = api_session(stack)
    (event_id,) = event_ids(api, race_id)
    email = f"own-{race_id[-6:].lower()}@example.com"
    _, reg_id = hold_and_register(api, race_id, event_id, runner(email))
    wait_confirmed(api, [reg_id])
    return race_id, reg_id, email


def _link(stack: LocalStack, email: str, kind: str) -> str:
    return _link_at(stack, email, kind, "#/my/")


def _link_at(stack: LocalStack, email: str, kind: str, route: str) -> str:
    """The link to the site's ``route`` in the newest email of ``kind`` to ``email``."""

    def found() -> list[dict[str, Any]]:
        mail = requests.get(f"{stack.mailbox_url}/messages.json", timeout=10).json()["messages"]
        return [m for m in mail if email in m["to"] and m["tags"].get("kind") == kind]

    (url,) = re.findall(rf"https?://\S+/{re.escape(route)}\S+", wait_until(found, timeout=45)[0]["text"])
    return str(url)


def test_on_a_phone_by_keyboard_a_runner_opens_the_emailed_link_and_cancels_with_the_refund_shown_first(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    until = (datetime.now(UTC) + timedelta(days=20)).date().isoformat()
    policy = {"runnersMayCancel": True, "tiers": [{"until": until, "percent": 50}], "feeCents": 100, "editUntil": until}
    _, reg_id, email = _registered(stack, backend, policy)
    page = new_page(**PHONE)
    page.goto(_link(stack, email, "confirmation").replace(stack.url, ""))

    # The token leaves the address bar; the page shows the registration.
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CONFIRMED")
    assert page.url.endswith("#/my")
    expect(page.get_by_test_id("my-paid")).to_contain_text("25.00")
    expect(page.get_by_test_id("my-email")).to_have_text(email)
    accessible(page, "my registration")

    # A typo in the last name, corrected by keyboard; a malformed date is named next to its field.
    tab_to(page, "edit-lastName")
    page.keyboard.press("Control+A")
    page.keyboard.type("Lovelace-Byron")
    tab_to(page, "edit-dateOfBirth")
    page.keyboard.press("Control+A")
    page.keyboard.type("10/12/1990")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("edit-dateOfBirth-error")).to_contain_text("YYYY-MM-DD")
    assert focused_testid(page) == "edit-dateOfBirth"
    page.keyboard.press("Control+A")
    page.keyboard.type("1990-12-10")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("my-runner")).to_have_text("Ada Lovelace-Byron")
    assert backend.registrations().get(reg_id).lastName == "Lovelace-Byron"

    # 50 % of 25.00, less a 1.00 fee: 11.50, said before anything happens.
    tab_to(page, "cancel-start")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("cancel-quote")).to_have_attribute("data-amount", "1150")
    expect(page.get_by_test_id("cancel-quote")).to_contain_text("11.50")
    assert focused_testid(page) == "cancel-confirm"
    snap(page, "quote")
    accessible(page, "the quote")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CANCELLED", timeout=20_000)
    expect(page.get_by_test_id("cancel-done")).to_contain_text("11.50")
    expect(page.get_by_test_id("my-refunded")).to_contain_text("11.50")
    assert backend.registrations().get(reg_id).status == "CANCELLED"
    accessible(page, "cancelled")
    snap(page, "cancelled")


def test_find_my_registration_from_the_race_page_by_keyboard_then_the_link_it_emails_opens_it(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    race_id, reg_id, email = _registered(stack, backend, {"runnersMayCancel": False})
    page = new_page(**PHONE)
    page.goto(f"/#/races/{race_id}")
    tab_to(page, "find-link")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("find-form")).to_be_visible()
    # A mistyped address is caught on the page, next to the field.
    tab_to(page, "find-email")
    page.keyboard.type("not an address")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("find-email-error")).to_contain_text("name@example.com")
    assert focused_testid(page) == "find-email"
    page.keyboard.press("Control+A")
    page.keyboard.type(email)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("find-status")).to_contain_text("If this address is registered")
    accessible(page, "find my registration")

    page.goto(_link(stack, email, "registration-link").replace(stack.url, ""))
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CONFIRMED")
    expect(page.get_by_test_id("my-cancel-unavailable")).to_be_visible()  # this race's runners may not cancel
    assert backend.registrations().get(reg_id).status == "CONFIRMED"
    snap(page, "opened")


def test_on_a_phone_by_keyboard_a_runner_corrects_their_answers_and_moves_to_a_new_address(
    new_page: Callable[..., Page], stack: LocalStack, backend: Any, snap: Any
) -> None:
    until = (datetime.now(UTC) + timedelta(days=20)).date().isoformat()
    kim = DirectorSession(stack, "kim-own-answers")
    race_id = new_race(backend, unique("Own Answers 10K"), [5], owner=director_sub("kim-own-answers"))
    policy = {"runnersMayCancel": False, "editUntil": until}
    assert kim.patch(f"/api/admin/races/{race_id}", json={"refundPolicy": policy}).status_code == 200
    api = api_session(stack)
    (event_id,) = event_ids(api, race_id)
    sizes = [{"id": "S", "label": "Small", "quantity": 1}, {"id": "M", "label": "Medium", "quantity": 3}]
    saved = kim.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"builtIns": {"emergencyContact": True}, "expectedVersion": 0,
              "questions": [{"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "options": sizes}]},
    )  # fmt: skip
    assert saved.status_code == 200, saved.text
    tag = race_id[-6:].lower()
    email, small = f"answers-{tag}@example.com", f"small-{tag}@example.com"
    answers = {"shirt": "M", "rc_emergency_name": "Bo Peep", "rc_emergency_phone": "+44 20 7946 0000"}
    _, reg_id = hold_and_register(api, race_id, event_id, runner(email) | {"answers": answers})
    _, other = hold_and_register(api, race_id, event_id, runner(small) | {"answers": answers | {"shirt": "S"}})
    wait_confirmed(api, [reg_id, other])

    page = new_page(**PHONE)
    page.goto(_link(stack, email, "confirmation").replace(stack.url, ""))
    expect(page.get_by_test_id("my-status")).to_have_attribute("data-status", "CONFIRMED")
    # The form asks the event's questions with this runner's answers; Small is sold out to others.
    expect(page.get_by_test_id("question-shirt")).to_have_value("M")
    expect(page.get_by_test_id("question-rc_emergency_name")).to_have_value("Bo Peep")
    assert page.get_by_test_id("question-shirt").locator("option[value=S]").is_disabled()
    tab_to(page, "question-rc_emergency_name")
    page.keyboard.press("Control+A")
    page.keyboard.type("Little Bo Peep")
    tab_to(page, "edit-save")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("edit-status")).to_have_text("Your details are saved.")
    expect(page.get_by_test_id("my-details")).to_contain_text("Little Bo Peep")
    stored = backend.registrations().get(reg_id)
    assert '"rc_emergency_name":"Little Bo Peep"' in stored.answers and '"shirt":"M"' in stored.answers
    accessible(page, "answers corrected")

    # A new address: a link goes to it first; opening it moves the registration there.
    moved = f"answers-new-{tag}@example.com"
    tab_to(page, "new-email")
    page.keyboard.type(moved)
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("new-email-status")).to_contain_text("on its way")
    assert backend.registrations().get(reg_id).email == email  # nothing moves before the new address confirms
    confirm = new_page(**PHONE)
    confirm.goto(_link_at(stack, moved, "email-change", "#/my/email/").replace(stack.url, ""))
    expect(confirm.get_by_test_id("email-confirm-status")).to_contain_text("is changed")
    tab_to(confirm, "email-confirm-open")
    confirm.keyboard.press("Enter")
    expect(confirm.get_by_test_id("my-email")).to_have_text(moved)
    assert backend.registrations().get(reg_id).email == moved
    accessible(confirm, "address moved")
    snap(confirm, "moved")
    # The first tab's link was revoked by the move: it says so instead of showing the entry.
    page.reload()
    expect(page.get_by_test_id("my-status")).to_have_count(0)
    expect(page.locator("body")).to_contain_text("new link")
