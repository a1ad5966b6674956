"""A team captain on a phone: holds the team's places from the race page, fills in every
member, pays once, and the team is registered — each member a registration with a bib."""

from __future__ import annotations

import re
from datetime import timedelta

from playwright.sync_api import expect
from racecap.setup.models import EventDraft

from tests.browser.steps import (
    console_race,
    event_card,
    expect_confirmed,
    horizontal_overflow,
    published,
    type_card,
    unique,
    unlabelled_controls,
)


def _team_race(backend, name: str) -> str:
    race = console_race(
        backend,
        "director-test",
        opened=True,
        name=name,
        location="Harbour",
        race_in=timedelta(days=30),
        closes_in=timedelta(days=1),
        events=[EventDraft(name="Relay 4x5K", cap=20, priceCents=2000, teamMinSize=2, teamMaxSize=4)],
    )
    return published(backend, race.raceId)


def test_a_captain_on_a_phone_registers_a_team_of_three_with_one_payment(new_page, backend, snap) -> None:
    page = new_page(viewport={"width": 360, "height": 740}, device_scale_factor=2, is_mobile=True, has_touch=True)
    race_id = _team_race(backend, unique("Relay Day"))
    page.goto(f"/?fastpoll=1#/races/{race_id}")
    card = event_card(page)
    card.get_by_test_id("enter-team").tap()
    size = card.get_by_label(re.compile(r"^Runners in the team \(2 to 4\)$"))
    size.fill("3")
    card.get_by_test_id("hold-team").tap()
    expect(page).to_have_url(re.compile(r"#/holds/[^/]+$"))
    hold_id = page.url.rsplit("#/holds/", 1)[1]

    form = page.get_by_test_id("team-form")
    expect(form).to_be_visible()
    members = page.get_by_test_id("team-member")
    expect(members).to_have_count(3)
    expect(page.get_by_test_id("hold-summary")).to_contain_text("3 places · $60.00")
    assert horizontal_overflow(page) == 0
    assert unlabelled_controls(page) == []
    snap(page, "team-form")

    page.get_by_label("Team name").fill("Harbour Harriers")
    tag = race_id[-6:].lower()
    people = [("Ann", "Lee"), ("Ben", "Okafor"), ("Cy", "Nakamura")]
    for i, (first, last) in enumerate(people):
        member = members.nth(i)
        member.get_by_label("Email address").fill(f"{first.lower()}.{tag}@example.com")
        member.get_by_label("First name").fill(first)
        member.get_by_label("Last name").fill(last)
        member.get_by_label("Date of birth").fill("19900423")
    # The same email twice is caught on the phone, on that runner's field, before anything is sent.
    members.nth(2).get_by_label("Email address").fill(f"ann.{tag}@example.com")
    page.get_by_test_id("continue-button").tap()
    expect(page.get_by_test_id("error-members.2.email")).to_have_text("The same email as runner 1.")
    members.nth(2).get_by_label("Email address").fill(f"cy.{tag}@example.com")
    page.get_by_test_id("continue-button").tap()

    expect(page.get_by_test_id("submit-registration")).to_have_text("Pay $60.00 for the team")
    type_card(page)
    snap(page, "team-payment")
    page.get_by_test_id("submit-registration").tap()
    expect_confirmed(page)

    hold = backend.holds().get(hold_id)
    assert hold is not None and hold.places == 3
    regs = [backend.registrations().get(r) for r in hold.memberIds]
    assert [(r.firstName, r.teamName, r.amountCents) for r in regs if r] == [
        (first, "Harbour Harriers", 2000) for first, _ in people
    ]
    assert len({r.bib for r in regs if r}) == 3


def test_each_member_answers_the_events_questions_and_a_minors_guardian_accepts_the_waiver(new_page, backend) -> None:
    from tests.browser.test_questions_site import _ask

    page = new_page(viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True)
    race_id = _team_race(backend, unique("Family Relay"))
    _ask(
        backend,
        race_id,
        {
            "waiver": {"text": "I take part at my own risk."},
            "questions": [
                {
                    "id": "shirt",
                    "kind": "SINGLE_CHOICE",
                    "label": "T-shirt size",
                    "required": True,
                    "options": [{"id": "S", "label": "Small"}, {"id": "M", "label": "Medium"}],
                },
            ],
        },
    )
    page.goto(f"/?fastpoll=1#/races/{race_id}")
    card = event_card(page)
    card.get_by_test_id("enter-team").tap()
    card.get_by_label(re.compile(r"^Runners in the team")).fill("2")
    card.get_by_test_id("hold-team").tap()
    expect(page).to_have_url(re.compile(r"#/holds/[^/]+$"))
    hold_id = page.url.rsplit("#/holds/", 1)[1]
    members = page.get_by_test_id("team-member")
    expect(members.nth(1).get_by_test_id("question-shirt")).to_be_visible()

    page.get_by_label("Team name").fill("The Parkers")
    tag = race_id[-6:].lower()
    for i, (first, born) in enumerate((("Pat", "19800101"), ("Kim", "20150601"))):  # Kim is 11
        member = members.nth(i)
        member.get_by_label("Email address").fill(f"{first.lower()}.{tag}@example.com")
        member.get_by_label("First name").fill(first)
        member.get_by_label("Last name").fill("Parker")
        member.get_by_label("Date of birth").fill(born)
        member.get_by_test_id("question-shirt").select_option("M" if i == 0 else "S")
        member.get_by_test_id(f"field-members.{i}.waiver.accepted").check()
    # Nothing is sent until the minor's parent or guardian has accepted too, named on that member.
    page.get_by_test_id("continue-button").tap()
    expect(page.get_by_test_id("error-members.1.waiver.guardianName")).to_be_visible()
    assert unlabelled_controls(page) == []
    kid = members.nth(1)
    kid.get_by_test_id("field-members.1.waiver.guardianName").fill("Pat Parker")
    kid.get_by_test_id("field-members.1.waiver.guardianAccepted").check()
    page.get_by_test_id("continue-button").tap()
    expect(page.get_by_test_id("submit-registration")).to_be_visible()
    type_card(page)
    page.get_by_test_id("submit-registration").tap()
    expect_confirmed(page)

    hold = backend.holds().get(hold_id)
    regs = [backend.registrations().get(r) for r in hold.memberIds]
    assert [(r.firstName, r.answers) for r in regs if r] == [("Pat", '{"shirt":"M"}'), ("Kim", '{"shirt":"S"}')]
    kim = regs[1]
    assert kim is not None and kim.waiver is not None and "Pat Parker" in kim.waiver
