"""Registration questions on the real stack: a director saves versions, runners are asked
the current one, a bad answer is refused before anything is claimed or charged, and stored
answers keep the version they answered."""

from __future__ import annotations

import csv
import io
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from racecap.aws.items import to_item, values
from racecap.questions.models import StoredAnswers

from tests.integration.admin import wait_until
from tests.integration.flows import concurrently, hold, intents_for, register, runner, wait_confirmed

pytestmark = pytest.mark.integration

QUESTIONS: list[dict[str, Any]] = [
    {"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "required": True,
     "options": [{"id": "S", "label": "Small"}, {"id": "M", "label": "Medium"}]},
    {"id": "member", "kind": "YES_NO", "label": "Member of a club?", "required": True},
    {"id": "club_name", "kind": "SHORT_TEXT", "label": "Club name", "required": True, "maxLength": 60,
     "showWhen": {"questionId": "member", "equals": True}},
    {"id": "pace", "kind": "NUMBER", "label": "Pace (min/km)", "min": 3, "max": 12},
    {"id": "nation", "kind": "COUNTRY", "label": "Nationality"},
]  # fmt: skip
GOOD = {"shirt": "M", "member": True, "club_name": "Harbour Harriers", "pace": 5.5, "nation": "NZ"}


def _race_with_questions(director: Any) -> tuple[Any, str, str]:
    dana = director("dana-questions")
    race = dana.create_race((50,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    dana.open_now(race_id)
    bad = dana.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"questions": [{"id": "x", "kind": "SINGLE_CHOICE", "label": "X"}]},
    )
    assert bad.status_code == 400 and "questions.0.options" in bad.json()["fields"], bad.text
    saved = dana.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"questions": QUESTIONS, "builtIns": {"emergencyContact": True}, "expectedVersion": 0},
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["version"] == 1
    return dana, race_id, event_id


def test_runners_are_asked_the_current_version_and_a_bad_answer_claims_and_charges_nothing(api, director, stack):
    _, race_id, event_id = _race_with_questions(director)
    asked = api.get(f"/api/races/{race_id}/events/{event_id}/questions").json()
    assert asked["version"] == 1
    assert [q["id"] for q in asked["questions"]][:3] == ["rc_emergency_name", "rc_emergency_phone", "shirt"]
    assert "NZ" in asked["countries"]

    hold_id = hold(api, race_id, event_id).json()["holdId"]
    contact = {"rc_emergency_name": "Kim", "rc_emergency_phone": "+64 9 123 4567"}
    for answers, field in [
        ({**contact, "member": False}, "answers.shirt"),  # a missing required answer
        ({**contact, **GOOD, "pace": 14}, "answers.pace"),  # a number out of bounds
        ({**contact, **GOOD, "shirt": "XL"}, "answers.shirt"),  # a choice not offered
        ({**contact, **GOOD, "pace": "5"}, "answers.pace"),  # text is not a number
    ]:
        refused = register(api, hold_id, runner() | {"answers": answers})
        assert refused.status_code == 400, refused.text
        assert field in refused.json()["fields"], refused.json()
        held = api.get(f"/api/holds/{hold_id}").json()
        assert (held["status"], held["detailsSent"]) == ("HELD", False)
    assert intents_for(stack, hold_id=hold_id) == []  # no PaymentIntent was ever created

    accepted = register(api, hold_id, runner() | {"answers": {**contact, **GOOD}})
    assert accepted.status_code == 202, accepted.text


def test_ten_registrations_keep_their_answers_readable_after_the_questions_change(api, backend, director):
    dana, race_id, event_id = _race_with_questions(director)
    contact = {"rc_emergency_name": "Kim", "rc_emergency_phone": "+64 9 123 4567"}

    def one(i: int) -> str:
        hold_id = hold(api, race_id, event_id).json()["holdId"]
        answers = {**contact, **GOOD, "shirt": "SM"[i % 2], "pace": 4 + i / 2}
        resp = register(api, hold_id, runner(f"q{i}-{race_id}@example.com") | {"answers": answers})
        assert resp.status_code == 202, resp.text
        return str(resp.json()["registrationId"])

    ids = concurrently(one, list(range(10)), workers=10)
    wait_confirmed(api, ids)

    edited = dana.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"questions": [{"id": "shirt", "kind": "SINGLE_CHOICE", "label": "Shirt size", "options": [{"id": "XL", "label": "XL"}]}]},
    )  # fmt: skip
    assert edited.status_code == 200 and edited.json()["version"] == 2
    first = dana.get(f"/api/admin/races/{race_id}/events/{event_id}/questions/1").json()
    labels = {q["id"]: q["label"] for q in first["form"]}

    regs = backend.registrations()
    for i, rid in enumerate(ids):
        reg = regs.get(rid)
        stored = StoredAnswers.of(reg.answers, reg.questionsVersion)
        assert stored is not None and stored.questionsVersion == 1
        assert stored.answers["shirt"] == "SM"[i % 2] and stored.answers["pace"] == 4 + i / 2
        assert set(stored.answers) <= set(labels)  # every answer names a question of version 1

    # The director's search and the export show them as version 1 asked them.
    found = dana.get(f"/api/admin/races/{race_id}/registrations", params={"q": f"q3-{race_id}@example.com"}).json()
    (row,) = found["registrations"]
    assert row["questionsVersion"] == 1
    assert {a["label"]: a["text"] for a in row["answers"]}["T-shirt"] == "Medium"
    export = dana.get(f"/api/admin/races/{race_id}/registrations/export")
    assert export.status_code == 200, export.text
    rows = list(csv.DictReader(io.StringIO(export.text)))
    assert len(rows) == 10
    assert {r["Shirt size [shirt]"] for r in rows} == {"Small", "Medium"}  # the newest label, the answered words
    assert {r["Emergency contact: phone [rc_emergency_phone]"] for r in rows} == {"'+64 9 123 4567"}


def test_three_hundred_runners_race_for_forty_m_shirts_exactly_forty_get_one_and_an_expired_holds_goes_back(
    api, backend, director
):
    dana = director("dana-shirts")
    race = dana.create_race((400,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    dana.open_now(race_id)
    sizes = [{"id": "M", "label": "Medium", "quantity": 40}, {"id": "L", "label": "Large"}]
    saved = dana.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"questions": [{"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "options": sizes}]},
    )
    assert saved.status_code == 200, saved.text
    counter = f"{event_id}#OPTION#shirt#M"
    assert backend.inventory().usage(race_id, counter, consistent=True).cap == 40

    def one(i: int) -> tuple[str, int, dict[str, Any]]:
        held = hold(api, race_id, event_id)
        assert held.status_code == 201, held.text
        # No card: the details step takes the shirt; the card form would come next.
        resp = register(api, held.json()["holdId"], runner(token=None) | {"answers": {"shirt": "M"}})
        return held.json()["holdId"], resp.status_code, resp.json()

    outcomes = concurrently(one, list(range(300)), workers=32)
    got = [h for h, status, _ in outcomes if status == 200]
    sold_out = [body for _, status, body in outcomes if status == 409]
    assert len(got) == 40, Counter((status, body.get("error"), body.get("message")) for _, status, body in outcomes)
    assert len(sold_out) == 260 and all(b["error"] == "OPTION_SOLD_OUT" for b in sold_out)
    assert all(b["fields"] == {"answers.shirt": "Medium is sold out."} for b in sold_out)
    assert backend.inventory().usage(race_id, counter, consistent=True).taken == 40

    # One runner with a shirt never pays: their hold expires and the sweeper gives the shirt back.
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{got[0]}", "sk": "HOLD"}),
        UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
        ExpressionAttributeValues=values({":t": past}),
    )
    wait_until(lambda: backend.inventory().usage(race_id, counter, consistent=True).taken == 39, timeout=45)
    late = hold(api, race_id, event_id).json()["holdId"]
    again = register(api, late, runner(token=None) | {"answers": {"shirt": "M"}})
    assert again.status_code == 200, again.text  # the shirt that came back
    assert backend.inventory().usage(race_id, counter, consistent=True).taken == 40


def _years_before(day: date, years: int) -> date:
    return day.replace(year=day.year - years)


def test_a_waiver_is_accepted_and_a_runner_17_on_race_day_needs_a_guardian(api, backend, director, stack):
    dana = director("dana-waiver")
    race = dana.create_race((20,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    dana.open_now(race_id)
    text = "I take part at my own risk."
    saved = dana.put(f"/api/admin/races/{race_id}/events/{event_id}/questions", json={"waiver": {"text": text}})
    assert saved.status_code == 200, saved.text
    asked = api.get(f"/api/races/{race_id}/events/{event_id}/questions").json()
    assert asked["waiver"]["text"] == text and asked["adultAge"] == 18

    race_day = date.fromisoformat(race["raceDate"])
    seventeen_on_race_day = (_years_before(race_day, 18) + timedelta(days=1)).isoformat()
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    minor = runner(token=None) | {"dateOfBirth": seventeen_on_race_day}
    refused = register(api, hold_id, minor | {"waiver": {"accepted": True}})
    assert refused.status_code == 400, refused.text
    assert set(refused.json()["fields"]) == {"waiver.guardianName", "waiver.guardianAccepted"}
    assert intents_for(stack, hold_id=hold_id) == []
    guardian = {"accepted": True, "guardianName": "Pat Lee", "guardianAccepted": True}
    assert register(api, hold_id, minor | {"waiver": guardian}).status_code == 200

    # 17 today, 18 on race day: no guardian needed.
    eighteen_on_race_day = _years_before(race_day, 18).isoformat()
    other = hold(api, race_id, event_id).json()["holdId"]
    adult = runner(token=None) | {"dateOfBirth": eighteen_on_race_day, "waiver": {"accepted": True}}
    assert register(api, other, adult).status_code == 200
    no_waiver = register(api, hold(api, race_id, event_id).json()["holdId"], runner(token=None))
    assert no_waiver.status_code == 400 and "waiver.accepted" in no_waiver.json()["fields"]


def _shirts(dana: Any, race_id: str, event_id: str, medium: int | None, expected: int) -> dict[str, Any]:
    m = {"id": "M", "label": "Medium"} | ({"quantity": medium} if medium is not None else {})
    sizes = [{"id": "S", "label": "Small"}, m]
    saved = dana.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions",
        json={"questions": [{"id": "shirt", "kind": "SINGLE_CHOICE", "label": "T-shirt", "options": sizes}],
              "expectedVersion": expected},
    )  # fmt: skip
    assert saved.status_code == 200, saved.text
    return dict(saved.json())


def test_a_sold_out_size_is_marked_on_the_form_and_the_director_sees_taken_and_left(api, director):
    dana = director("dana-sold-out")
    race = dana.create_race((20,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    dana.open_now(race_id)
    _shirts(dana, race_id, event_id, 2, 0)
    form = f"/api/races/{race_id}/events/{event_id}/questions"
    assert api.get(form).json()["soldOut"] == {}
    for _ in range(2):
        taken = register(
            api, hold(api, race_id, event_id).json()["holdId"], runner(token=None) | {"answers": {"shirt": "M"}}
        )
        assert taken.status_code == 200, taken.text
    # The form's count is cached for about two seconds, as the race page's places left.
    wait_until(lambda: api.get(form).json()["soldOut"] == {"shirt": ["M"]}, timeout=10)
    view = dana.get(f"/api/admin/races/{race_id}/events/{event_id}/questions").json()
    assert [(s["optionId"], s["quantity"], s["taken"], s["left"]) for s in view["stock"]] == [("M", 2, 2, 0)]
    late = register(
        api, hold(api, race_id, event_id).json()["holdId"], runner(token=None) | {"answers": {"shirt": "M"}}
    )
    assert late.status_code == 409 and late.json()["fields"] == {"answers.shirt": "Medium is sold out."}


def test_a_resend_while_paying_is_accepted_after_the_director_gives_the_size_a_quantity(api, director, stack):
    dana = director("dana-mid-payment")
    race = dana.create_race((20,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    dana.open_now(race_id)
    _shirts(dana, race_id, event_id, None, 0)  # Medium: no limit yet
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    details = runner(token=None) | {"answers": {"shirt": "M"}}
    first = register(api, hold_id, details)
    assert first.status_code == 200, first.text
    _shirts(dana, race_id, event_id, 30, 1)  # the director adds stock while the runner is at the card step
    again = register(api, hold_id, details)  # the runner's page re-sends the same details
    assert again.status_code == 200, again.text
    assert again.json()["clientSecret"] == first.json()["clientSecret"]
    assert len(intents_for(stack, hold_id=hold_id)) == 1


def test_with_redis_stopped_a_registration_checks_its_answers_against_the_version_saved_meanwhile(
    api, backend, director, stack
):
    dana = director("dana-no-redis")
    race = dana.create_race((20,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    dana.open_now(race_id)
    _shirts(dana, race_id, event_id, None, 0)
    assert api.get(f"/api/races/{race_id}/events/{event_id}/questions").json()["version"] == 1
    stack.stop_redis()
    try:
        saved = dana.put(
            f"/api/admin/races/{race_id}/events/{event_id}/questions",
            json={"questions": [{"id": "club", "kind": "SHORT_TEXT", "label": "Club", "required": True}],
                  "expectedVersion": 1},
        )  # fmt: skip
        assert saved.status_code == 200 and saved.json()["version"] == 2, saved.text
        hold_id = hold(api, race_id, event_id).json()["holdId"]
        stale = register(api, hold_id, runner(token=None) | {"answers": {"shirt": "M"}})
        assert stale.status_code == 400 and set(stale.json()["fields"]) == {"answers.shirt", "answers.club"}
        accepted = register(api, hold_id, runner(token=None) | {"answers": {"club": "Harriers"}})
        assert accepted.status_code == 200, accepted.text
    finally:
        stack.restart_redis()
    held = backend.holds().get(hold_id)
    assert held is not None and held.attempt is not None and held.attempt.questionsVersion == 2


def test_the_results_upload_takes_each_runners_category_from_their_division_answer(api, backend, director):
    """A file with no category column: each runner's division answer is their category."""
    from tests.integration.results import registration_item, results_url, seed_registrations, upload, wait_for_upload

    dana = director("dana-divisions")
    race = dana.create_race((20,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    divisions = [{"id": "F", "label": "Women"}, {"id": "M", "label": "Men"}]
    saved = dana.put(
        f"/api/admin/races/{race_id}/events/{event_id}/questions", json={"builtIns": {"divisions": divisions}}
    )
    assert saved.status_code == 200, saved.text
    items = []
    for bib, (first, division) in enumerate([("Ann", "F"), ("Bo", "M"), ("Cy", "F")], start=1):
        item = registration_item(race_id, event_id, bib, first, "Lee", "1990-01-01")
        item["PutRequest"]["Item"] |= {
            "answers": {"S": f'{{"rc_division":"{division}"}}'},
            "questionsVersion": {"N": "1"},
        }
        items.append(item)
    seed_registrations(backend, items)
    done = wait_for_upload(dana, upload(dana, race_id, event_id, "bib,chip_time\n1,40:00\n2,41:00\n3,42:00\n"))
    assert done["status"] == "READY", done
    assert dana.post(results_url(race_id, event_id, "/publish")).status_code == 200
    page = api.get(f"/api/races/{race_id}/events/{event_id}/results/1").json()
    assert [(r["bib"], r["gender"], r["genderPlace"]) for r in page["results"]] == [
        (1, "F", 1),
        (2, "M", 1),
        (3, "F", 2),
    ]
    assert page["genders"] == ["F", "M"]
