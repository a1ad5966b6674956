"""The registration questions on the runners' site, in real headless Chromium against the
local stack: every kind of question, the waiver and a guardian's acceptance for a runner under
18 on race day, keyboard only, on a phone's viewport, with the runner's typing kept across a
submit the server refuses."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from racecap.audit.service import AuditTrail
from racecap.audit.store import DynamoAudit
from racecap.aws.transactions import transact
from racecap.models import Director
from racecap.questions.models import QuestionSetDraft
from racecap.questions.service import Questions
from racecap.questions.store import DynamoQuestions

from tests.browser.conftest import CHROMIUM
from tests.browser.steps import (
    Runner,
    expect_confirmed,
    field,
    focused_testid,
    horizontal_overflow,
    new_race,
    open_race,
    pay,
    unique,
    wait_for_form,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: `bash local/install.sh apt` installs it"),
]

PHONE = {"width": 375, "height": 740}
WAIVER = "I take part at my own risk.\nThe organisers are not liable for injury or loss."
SET = {
    "builtIns": {"emergencyContact": True},
    "waiver": {"text": WAIVER},
    "questions": [
        {"id": "nickname", "kind": "SHORT_TEXT", "label": "Nickname on the bib", "maxLength": 12},
        {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt size", "required": True,
         "options": [{"id": "S", "label": "Small"}, {"id": "M", "label": "Medium"}]},
        {"id": "food", "kind": "MULTIPLE_CHOICE", "label": "Pasta party",
         "options": [{"id": "veg", "label": "Vegetarian"}, {"id": "gf", "label": "Gluten free"}]},
        {"id": "member", "kind": "YES_NO", "label": "Member of a club?", "required": True},
        {"id": "club_name", "kind": "SHORT_TEXT", "label": "Club name", "required": True,
         "showWhen": {"questionId": "member", "equals": True}},
        {"id": "pace", "kind": "NUMBER", "label": "Pace in minutes per km", "min": 3, "max": 12,
         "help": "Puts you in the right start wave."},
        {"id": "first_race", "kind": "DATE", "label": "Your first race"},
        {"id": "nation", "kind": "COUNTRY", "label": "Nationality"},
        {"id": "story", "kind": "LONG_TEXT", "label": "Why do you run?"},
    ],
}  # fmt: skip


def _ask(backend, race_id: str, questions: dict[str, Any] = SET) -> str:
    """The director's save (the admin API's service, on the stack's tables): returns the event id."""
    _, (event,) = backend.catalog().definition(race_id)
    race, _ = backend.store().get_race(race_id)
    service = Questions(
        DynamoQuestions(backend.dynamodb, backend.table("Races")),
        lambda items: transact(backend.dynamodb, items),
        AuditTrail(DynamoAudit(backend.dynamodb, backend.table("Audit"))),
        backend.cache(),
        backend.inventory(),
    )
    service.save(
        Director(sub="director-test", username="dana"), race, event, QuestionSetDraft.model_validate(questions)
    )
    return str(event.eventId)


def _type(page: Page, testid: str, text: str) -> None:
    page.get_by_test_id(testid).focus()
    page.keyboard.press("Control+A")
    page.keyboard.type(text)


def send(page: Page) -> None:
    page.get_by_test_id("continue-button").focus()
    page.keyboard.press("Enter")


def test_every_question_kind_the_waiver_and_a_guardian_by_keyboard_on_a_phone(page: Page, backend, snap) -> None:
    page.set_viewport_size(PHONE)
    race_id = new_race(backend, unique("Questions 10K"), [10])
    _ask(backend, race_id)
    race_day = date.fromisoformat(backend.catalog().definition(race_id)[0].raceDate)
    seventeen = (race_day.replace(year=race_day.year - 18) + timedelta(days=1)).isoformat()
    runner = Runner.new(dateOfBirth=seventeen)

    open_race(page, race_id)
    page.get_by_test_id("hold-button").first.focus()
    page.keyboard.press("Enter")
    wait_for_form(page)
    expect(page.get_by_test_id("question-nickname")).to_be_visible()
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).focus()
        page.keyboard.type(getattr(runner, name))
    expect(page.get_by_test_id("guardian-step")).to_be_visible()  # 17 on race day
    expect(page.get_by_test_id("block-club_name")).to_be_hidden()  # until "member" is yes

    # Every control is reached with Tab, in order, from the date of birth.
    seen = []
    for _ in range(30):
        page.keyboard.press("Tab")
        seen.append(focused_testid(page))
        if seen[-1] == "continue-button":
            break
    wanted = ["question-rc_emergency_name", "question-rc_emergency_phone", "question-nickname", "question-shirt",
              "question-food-veg", "question-member-true", "question-pace", "question-first_race", "question-nation",
              "question-story", "waiver-text", "field-waiver.accepted", "field-waiver.guardianName",
              "field-waiver.guardianAccepted", "continue-button"]  # fmt: skip
    assert [t for t in seen if t in wanted] == wanted, seen

    # Sent with nothing answered: each required answer is named, on this device, before any request.
    page.keyboard.press("Enter")
    summary = page.get_by_test_id("error-summary")
    expect(summary).to_be_visible()
    for name in ("answers.shirt", "answers.member", "answers.rc_emergency_name", "waiver.accepted",
                 "waiver.guardianName", "waiver.guardianAccepted"):  # fmt: skip
        expect(page.get_by_test_id(f"error-{name}")).to_be_visible()

    _type(page, "question-rc_emergency_name", "Kim Lovelace")
    _type(page, "question-rc_emergency_phone", "call my mum")  # the server's rule, not the page's
    _type(page, "question-nickname", "Ada")
    page.get_by_test_id("question-shirt").focus()
    page.keyboard.type("Medium")
    page.get_by_test_id("question-food-veg").focus()
    page.keyboard.press("Space")
    page.get_by_test_id("question-member-true").focus()
    page.keyboard.press("Space")
    expect(page.get_by_test_id("block-club_name")).to_be_visible()
    _type(page, "question-club_name", "Harbour Harriers")
    _type(page, "question-pace", "15")
    _type(page, "question-first_race", "2019/4/28")
    page.get_by_test_id("question-nation").focus()
    page.keyboard.type("New Zealand")
    _type(page, "question-story", "For the pasta.")
    page.get_by_test_id("field-waiver.accepted").focus()
    page.keyboard.press("Space")
    _type(page, "field-waiver.guardianName", "Pat Lovelace")
    page.get_by_test_id("field-waiver.guardianAccepted").focus()
    page.keyboard.press("Space")
    send(page)
    expect(page.get_by_test_id("error-answers.pace")).to_have_text("At most 12.")  # the question's own bound
    _type(page, "question-pace", "5.5")
    send(page)

    # The server refuses the phone and names it; everything typed is still there.
    expect(page.get_by_test_id("error-answers.rc_emergency_phone")).to_be_visible()
    snap(page, "refused")
    expect(page.get_by_test_id("question-club_name")).to_have_value("Harbour Harriers")
    expect(page.get_by_test_id("question-nation")).to_have_value("NZ")
    expect(page.get_by_test_id("question-first_race")).to_have_value("2019-04-28")
    expect(page.get_by_test_id("field-waiver.guardianName")).to_have_value("Pat Lovelace")
    expect(page.get_by_test_id("question-food-veg")).to_be_checked()
    page.reload()  # kept across a reload too
    expect(page.get_by_test_id("question-story")).to_have_value("For the pasta.")
    expect(page.get_by_test_id("field-waiver.accepted")).to_be_checked()

    _type(page, "question-rc_emergency_phone", "+64 9 123 4567")
    send(page)
    expect(page.get_by_test_id("payment-step")).to_be_visible()
    assert horizontal_overflow(page) == 0  # nothing wider than the phone
    pay(page)
    bib = expect_confirmed(page, runner)

    reg = next(
        r
        for r in backend.registrations().event_rows(race_id, backend.catalog().definition(race_id)[1][0].eventId)
        if r.get("bib") is not None and int(r["bib"]) == int(bib)
    )
    assert '"nation":"NZ"' in reg["answers"] and '"pace":5.5' in reg["answers"]


SIZES = {
    "questions": [
        {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt size", "required": True,
         "options": [{"id": "S", "label": "Small", "quantity": 1}, {"id": "M", "label": "Medium", "quantity": 1},
                     {"id": "L", "label": "Large"}]},
    ]
}  # fmt: skip


def _take(api, race_id: str, event_id: str, size: str) -> None:
    """Another runner sends details with that size (no card yet): the unit is theirs."""
    from tests.integration.flows import hold, register, runner

    taken = register(
        api, hold(api, race_id, event_id).json()["holdId"], runner(token=None) | {"answers": {"shirt": size}}
    )
    assert taken.status_code == 200, taken.text


def test_a_sold_out_size_is_offered_disabled_and_one_sold_meanwhile_is_named_under_the_question(
    page: Page, backend, api, snap
) -> None:
    page.set_viewport_size(PHONE)
    race_id = new_race(backend, unique("Shirts 5K"), [10])
    event_id = _ask(backend, race_id, SIZES)
    _take(api, race_id, event_id, "S")  # Small is gone before this runner arrives

    open_race(page, race_id)
    page.get_by_test_id("hold-button").first.click()
    wait_for_form(page)
    small = page.locator("[data-testid='question-shirt'] option[value='S']")
    expect(small).to_be_disabled()
    expect(small).to_have_text("Small (sold out)")
    expect(page.locator("[data-testid='question-shirt'] option[value='M']")).to_be_enabled()
    runner = Runner.new()
    for name in ("email", "firstName", "lastName", "dateOfBirth"):
        field(page, name).fill(getattr(runner, name))
    page.get_by_test_id("question-shirt").focus()
    page.keyboard.type("Medium")
    _take(api, race_id, event_id, "M")  # the last Medium goes to someone else meanwhile
    send(page)
    error = page.get_by_test_id("error-answers.shirt")
    expect(error).to_have_text("Medium is sold out.")  # the API's 409, under the question
    snap(page, "sold-out")
    page.get_by_test_id("question-shirt").select_option("L")
    send(page)
    expect(page.get_by_test_id("payment-step")).to_be_visible()
    assert horizontal_overflow(page) == 0
