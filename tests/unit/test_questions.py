"""Registration questions on fakes: a director's set checked as a whole, each save a new
version, runners' answers checked per kind with the field named, and old answers readable
with the version they answered."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from racecap.errors import Conflict, OptionSoldOut, ValidationFailed
from racecap.models import Director
from racecap.questions.models import (
    BuiltIns,
    ChoiceOption,
    Question,
    QuestionSetDraft,
    StoredAnswers,
)
from racecap.questions.rules import check_answers, check_set
from racecap.questions.service import Questions, QuestionsVersionNotFound

from tests.fakes.catalog import FakeAudit, open_race
from tests.fakes.questions import FakeQuestions
from tests.fakes.races import local_cache
from tests.fakes.stores import FakeTables

DANA = Director(sub="dir-1", username="dana")
RACE, (EVENT,) = open_race()


def q(qid: str, kind: str, **over: Any) -> Question:
    return Question.model_validate({"id": qid, "kind": kind, "label": qid.title(), **over})


def opts(*ids: str) -> list[dict[str, str]]:
    return [{"id": i, "label": i} for i in ids]


EVERY_KIND = [
    q("nickname", "SHORT_TEXT", maxLength=10),
    q("story", "LONG_TEXT"),
    q("shirt", "SINGLE_CHOICE", required=True, options=opts("S", "M", "L")),
    q("food", "MULTIPLE_CHOICE", options=opts("veg", "gf", "none")),
    q("member", "YES_NO", required=True),
    q("club_name", "SHORT_TEXT", required=True, showWhen={"questionId": "member", "equals": True}),
    q("pace", "NUMBER", min=3, max=15),
    q("finishes", "NUMBER", min=0, wholeNumber=True),
    q("first_race", "DATE"),
    q("nation", "COUNTRY"),
]


def make() -> tuple[Questions, FakeQuestions, FakeTables]:
    tables = FakeTables()
    store = FakeQuestions(tables)
    return Questions(store, tables.transact, FakeAudit(tables), local_cache()), store, tables


def fields(exc: pytest.ExceptionInfo[ValidationFailed]) -> dict[str, str]:
    return exc.value.fields or {}


# -- a director's set -------------------------------------------------------------------------
def test_a_set_is_checked_as_a_whole_and_every_bad_field_is_named() -> None:
    draft = QuestionSetDraft(
        questions=[
            q("shirt", "SINGLE_CHOICE"),  # no options
            q("shirt", "YES_NO"),  # the same id twice
            q("rc_mine", "SHORT_TEXT"),  # a built-in's prefix
            q("age", "NUMBER", min=10, max=5),
            q("when", "SHORT_TEXT", showWhen={"questionId": "later", "equals": True}),  # not an earlier question
            q("later", "YES_NO"),
            q("tall", "YES_NO", options=opts("x")),
        ]
    )
    with pytest.raises(ValidationFailed) as bad:
        check_set(draft)
    assert set(fields(bad)) == {
        "questions.0.options", "questions.1.id", "questions.2.id", "questions.3.max",
        "questions.4.showWhen", "questions.6.options",
    }  # fmt: skip


def test_a_condition_must_name_an_option_of_the_question_it_reads() -> None:
    draft = QuestionSetDraft(
        questions=[
            q("shirt", "SINGLE_CHOICE", options=opts("S")),
            q("x", "LONG_TEXT", showWhen={"questionId": "shirt", "equals": "XL"}),
        ]
    )
    with pytest.raises(ValidationFailed) as bad:
        check_set(draft)
    assert "XL" in fields(bad)["questions.1.showWhen"]


def test_strict_types_refuse_a_number_as_text_and_yes_as_a_string() -> None:
    with pytest.raises(ValidationError):
        Question.model_validate({"id": "a", "kind": "NUMBER", "label": "A", "min": "3"})
    with pytest.raises(ValidationError):
        Question.model_validate({"id": "a", "kind": "YES_NO", "label": "A", "required": "yes"})
    with pytest.raises(ValidationError):
        Question.model_validate({"id": "Bad-Id", "kind": "YES_NO", "label": "A"})


def test_built_ins_come_first_as_ordinary_questions_with_reserved_ids() -> None:
    draft = QuestionSetDraft(
        questions=[q("shirt", "SINGLE_CHOICE", options=opts("M"))],
        builtIns=BuiltIns(emergencyContact=True, divisions=[ChoiceOption(id="F", label="Women")], club=True),
    )
    asked = check_set(draft)
    assert [(x.id, x.kind, x.required) for x in asked] == [
        ("rc_emergency_name", "SHORT_TEXT", True), ("rc_emergency_phone", "PHONE", True),
        ("rc_division", "SINGLE_CHOICE", True), ("rc_club", "SHORT_TEXT", False), ("shirt", "SINGLE_CHOICE", False),
    ]  # fmt: skip


def test_each_save_is_a_new_version_and_old_versions_stay_readable() -> None:
    service, _, tables = make()
    first = service.save(
        DANA, RACE, EVENT, QuestionSetDraft(questions=[q("shirt", "SINGLE_CHOICE", options=opts("M"))])
    )
    second = service.save(DANA, RACE, EVENT, QuestionSetDraft(questions=[q("club", "SHORT_TEXT")], expectedVersion=1))
    assert (first.version, second.version) == (1, 2)
    assert service.view(RACE, EVENT).form[0].id == "club"
    assert service.view(RACE, EVENT, version=1).form[0].id == "shirt"
    assert service.current(RACE.raceId, EVENT.eventId)[0] == 2
    assert [(a["action"], a["version"]) for a in tables.audit] == [("questions.save", 1), ("questions.save", 2)]
    with pytest.raises(QuestionsVersionNotFound):
        service.view(RACE, EVENT, version=3)


def test_a_save_built_on_an_old_version_is_refused_and_changes_nothing() -> None:
    service, store, _ = make()
    service.save(DANA, RACE, EVENT, QuestionSetDraft(questions=[q("a", "YES_NO")]))
    with pytest.raises(Conflict):
        service.save(DANA, RACE, EVENT, QuestionSetDraft(questions=[q("b", "YES_NO")], expectedVersion=0))
    # Two saves racing from the same read: the store's condition lets one through.
    items_a = store.save_items(RACE.raceId, EVENT.eventId, 2, {"x": 1})
    items_b = store.save_items(RACE.raceId, EVENT.eventId, 2, {"x": 2})
    store.tables.transact(items_a)
    with pytest.raises(Exception):  # noqa: B017,PT011 - ConditionFailed, as DynamoDB's
        store.tables.transact(items_b)
    assert store.get(RACE.raceId, EVENT.eventId, 2) == {"x": 1}


# -- a runner's answers -------------------------------------------------------------------------
GOOD: dict[str, Any] = {
    "nickname": "  Zippy ", "story": "x" * 3000, "shirt": "M", "food": ["veg", "gf"], "member": True,
    "club_name": "Harriers", "pace": 5.5, "finishes": 12, "first_race": "2019-04-28", "nation": "NZ",
}  # fmt: skip


def test_good_answers_are_kept_trimmed() -> None:
    kept = check_answers(EVERY_KIND, GOOD)
    assert kept["nickname"] == "Zippy" and kept["food"] == ["veg", "gf"] and kept["nation"] == "NZ"


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("nickname", "x" * 11),  # over its max length
        ("shirt", "XL"),  # a choice not offered
        ("food", ["veg", "meat"]),
        ("food", ["veg", "veg"]),
        ("member", "yes"),
        ("pace", 2.9),  # out of bounds
        ("pace", 15.5),
        ("pace", True),  # a boolean is not a number
        ("finishes", 1.5),  # not whole
        ("first_race", "2019-02-30"),
        ("nation", "UK"),  # not an ISO 3166 code
        ("story", 5),
    ],
)
def test_a_bad_answer_is_refused_naming_its_field(question: str, value: Any) -> None:
    with pytest.raises(ValidationFailed) as bad:
        check_answers(EVERY_KIND, GOOD | {question: value})
    assert list(fields(bad)) == [f"answers.{question}"]


def test_missing_required_answers_and_unknown_questions_are_named() -> None:
    given = {k: v for k, v in GOOD.items() if k not in ("shirt", "club_name")} | {"shoe": "9"}
    with pytest.raises(ValidationFailed) as bad:
        check_answers(EVERY_KIND, given)
    assert set(fields(bad)) == {"answers.shirt", "answers.club_name", "answers.shoe"}


def test_a_question_shown_only_when_another_answer_matches() -> None:
    not_member = GOOD | {"member": False, "club_name": "typed before changing my mind"}
    assert "club_name" not in check_answers(EVERY_KIND, not_member)  # hidden: not required, not kept
    with pytest.raises(ValidationFailed) as bad:
        check_answers(EVERY_KIND, GOOD | {"club_name": "  "})
    assert list(fields(bad)) == ["answers.club_name"]


def test_the_emergency_phone_takes_phone_numbers_only() -> None:
    asked = check_set(QuestionSetDraft(builtIns=BuiltIns(emergencyContact=True)))
    ok = check_answers(asked, {"rc_emergency_name": "Kim", "rc_emergency_phone": "+44 20 7946 0958"})
    assert ok["rc_emergency_phone"] == "+44 20 7946 0958"
    with pytest.raises(ValidationFailed) as bad:
        check_answers(asked, {"rc_emergency_name": "Kim", "rc_emergency_phone": "call me"})
    assert list(fields(bad)) == ["answers.rc_emergency_phone"]


def test_an_event_without_questions_takes_no_answers_and_stores_nothing() -> None:
    service, _, _ = make()
    assert service.check(RACE.raceId, EVENT.eventId, None) is None
    with pytest.raises(ValidationFailed) as bad:
        service.check(RACE.raceId, EVENT.eventId, {"shirt": "M"})
    assert list(fields(bad)) == ["answers.shirt"]


def test_answers_keep_the_version_they_answered_and_read_back_after_an_edit() -> None:
    service, _, _ = make()
    service.save(DANA, RACE, EVENT, QuestionSetDraft(questions=EVERY_KIND))
    stored = service.check(RACE.raceId, EVENT.eventId, GOOD)
    assert isinstance(stored, StoredAnswers) and stored.questionsVersion == 1
    service.save(DANA, RACE, EVENT, QuestionSetDraft(questions=[q("shoe", "NUMBER", required=True)]))
    with pytest.raises(ValidationFailed):
        service.check(RACE.raceId, EVENT.eventId, GOOD)  # the new version asks something else
    read = {a.questionId: a.text for a in service.readable(RACE.raceId, EVENT.eventId, stored)}
    assert read["food"] == "veg, gf" and read["member"] == "Yes" and read["pace"] == "5.5"
    runner = service.for_runners(RACE.raceId, EVENT.eventId)
    assert runner.version == 2 and runner.countries == []


# -- answers at registration ---------------------------------------------------------------------
def _world_with_questions(questions: list[Question]) -> tuple[Any, str, str]:
    from tests.unit.core_world import World

    w = World()
    race_id = w.race(caps=(20,))
    race, (event,) = w.catalog.definition(race_id)
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=questions))
    return w, race_id, event.eventId


def _request(email: str = "ann@example.com", answers: dict[str, Any] | None = None) -> Any:
    from racecap.registration.models import RegistrationRequest

    return RegistrationRequest.model_validate(
        {"email": email, "firstName": "Ann", "lastName": "Lee", "dateOfBirth": "1990-01-01",
         "paymentMethod": "pm_card_visa", "answers": answers}
    )  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"member": True}, "answers.shirt"),
        (GOOD | {"pace": 99}, "answers.pace"),
        (GOOD | {"shirt": "XXL"}, "answers.shirt"),
    ],
)
def test_a_bad_answer_is_a_400_naming_it_and_nothing_is_claimed_or_charged(bad: dict[str, Any], field: str) -> None:
    w, race_id, event_id = _world_with_questions(EVERY_KIND)
    held = w.hold_service.hold(race_id, event_id)
    with pytest.raises(ValidationFailed) as refused:
        w.registration.register(held.holdId, _request(answers=bad))
    assert field in fields(refused)
    hold = w.holds.get(held.holdId)
    assert hold is not None and hold.status == "HELD" and hold.attempt is None
    assert w.payments.intents == [] and w.tables.emails == {}


def test_answers_ride_with_the_registration_and_stay_readable_after_ten_registrations_and_an_edit() -> None:
    w, race_id, event_id = _world_with_questions(EVERY_KIND)
    ids = []
    for i in range(10):
        held = w.hold_service.hold(race_id, event_id)
        answers = GOOD | {"finishes": i, "shirt": "SML"[i % 3]}
        ids.append(w.registration.register(held.holdId, _request(f"r{i}@example.com", answers)).registrationId)
    assert w.write_queued() == []
    race, (event,) = w.catalog.definition(race_id)
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=[q("shirt", "SINGLE_CHOICE", options=opts("XL"))]))
    for i, rid in enumerate(ids):
        reg = w.regs.get(rid)
        assert reg is not None and reg.questionsVersion == 1
        stored = StoredAnswers.of(reg.answers, reg.questionsVersion)
        assert stored is not None
        read = {a.questionId: a.text for a in w.questions.readable(race_id, event_id, stored)}
        assert read["shirt"] == "SML"[i % 3] and read["finishes"] == str(i) and read["pace"] == "5.5"


def test_a_registration_for_an_event_without_questions_stores_no_answers() -> None:
    from tests.unit.core_world import World

    w = World()
    race_id = w.race()
    held = w.hold_service.hold(race_id, "ev0")
    rid = w.registration.register(held.holdId, _request()).registrationId
    hold = w.holds.get(held.holdId)
    assert hold is not None and hold.attempt is not None and hold.attempt.answers is None
    assert w.write_queued() == []
    reg = w.regs.get(rid)
    assert reg is not None and (reg.answers, reg.questionsVersion) == (None, None)


# -- answers everywhere ----------------------------------------------------------------------------
DIVISIONS = BuiltIns(
    emergencyContact=True, divisions=[ChoiceOption(id="F", label="Women"), ChoiceOption(id="M", label="Men")]
)
CONTACT = {"rc_emergency_name": "Kim", "rc_emergency_phone": "+64 9 123 4567"}


def _registered_world() -> tuple[Any, str, str, list[str]]:
    """Three runners of an event with a division, a shirt and the emergency contact; then
    the director edits the shirt question (version 2): the answers keep version 1."""
    from racecap.registration.writer import RegistrationWriter

    from tests.unit.core_world import World

    w = World()
    w.writer = RegistrationWriter(w.regs, w.emails, pace=w.pace, answers=w.questions)
    race_id = w.race(caps=(20,))
    race, (event,) = w.catalog.definition(race_id)
    shirt = q(
        "shirt",
        "SINGLE_CHOICE",
        label="T-shirt",
        options=[{"id": "M", "label": "Medium"}, {"id": "L", "label": "Large"}],
    )
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=[shirt], builtIns=DIVISIONS))
    ids = []
    for i, (division, size) in enumerate([("F", "M"), ("M", "L"), ("F", "L")]):
        held = w.hold_service.hold(race_id, event.eventId)
        answers = CONTACT | {"rc_division": division, "shirt": size, "rc_emergency_phone": f"+1 555 010 {i:04d}"}
        ids.append(w.registration.register(held.holdId, _request(f"r{i}@example.com", answers)).registrationId)
    assert w.write_queued() == []
    renamed = q("shirt", "SINGLE_CHOICE", label="Shirt size", options=opts("XL"))
    w.questions.save(
        DANA, race, event, QuestionSetDraft(questions=[renamed, q("diet", "LONG_TEXT")], builtIns=DIVISIONS)
    )
    return w, race_id, event.eventId, ids


def test_the_export_has_one_column_per_question_formula_safe_with_the_answered_versions_words() -> None:
    import csv
    import io

    from racecap.participants.service import Participants

    w, race_id, _, _ = _registered_world()
    race, events = w.catalog.definition(race_id)
    lines = [line for line, _ in Participants(w.regs, w.questions).export_lines(race, events)]
    rows = list(csv.reader(io.StringIO("".join(lines))))
    header = rows[0]
    answer_columns = header[header.index("deferralCredit") + 1 :]  # after the fixed columns
    assert answer_columns == [
        "Emergency contact: name [rc_emergency_name]", "Emergency contact: phone [rc_emergency_phone]",
        "Division [rc_division]", "Shirt size [shirt]", "Diet [diet]",
    ]  # fmt: skip
    first = dict(zip(header, rows[1], strict=True))
    assert first["Division [rc_division]"] == "Women" and first["Shirt size [shirt]"] == "Medium"
    assert first["Emergency contact: phone [rc_emergency_phone]"] == "'+1 555 010 0000"  # not a formula
    assert first["Diet [diet]"] == ""  # asked only from version 2 on


def test_the_directors_search_shows_each_registrations_answers_as_its_version_asked_them() -> None:
    from racecap.participants.service import Participants

    w, race_id, _, ids = _registered_world()
    race, events = w.catalog.definition(race_id)
    page = Participants(w.regs, w.questions).page(race, events, q="r1@example.com")
    (row,) = page.registrations
    assert row.registrationId == ids[1] and row.questionsVersion == 1
    assert [(a.label, a.text) for a in row.answers][-2:] == [("Division", "Men"), ("T-shirt", "Large")]


def test_the_confirmation_email_lists_the_answers_escaped() -> None:
    from racecap.emails.templates import render

    w, _, _, _ = _registered_world()
    first = next(m for m in w.emails.sent if m.to == "r0@example.com")
    email = render(first)
    assert "T-shirt: Medium" in email.text and "Division: Women" in email.text
    assert "<td>Medium</td>" in email.html


def test_the_results_upload_takes_the_category_from_the_division_answer() -> None:
    from datetime import date

    from racecap.results.sheet import Entrant, SheetRules, read_sheet

    entrants = {
        1: Entrant("Ann", "Lee", date(1990, 1, 1), division="F"),
        2: Entrant("Bo", "Ng", date(1990, 1, 1), division="M"),
        3: Entrant("Cy", "Ro", date(1990, 1, 1), division="Q"),
    }
    sheet = read_sheet(b"bib,chip_time\n1,40:00\n2,41:00\n", entrants, SheetRules(), date(2027, 5, 1))
    assert [(r.bib, r.category) for r in sheet.runners] == [(1, "F"), (2, "M")]
    assert sheet.errors == []
    unknown = read_sheet(b"bib,chip_time\n3,40:00\n", entrants, SheetRules(), date(2027, 5, 1))
    assert [line for line, _ in unknown.errors] == [2]
    overridden = read_sheet(b"bib,chip_time,category\n3,40:00,X\n", entrants, SheetRules(), date(2027, 5, 1))
    assert [(r.bib, r.category) for r in overridden.runners] == [(3, "X")]  # the file's word wins


def test_the_purge_deletes_the_answers_but_the_division() -> None:
    from datetime import UTC, datetime

    from racecap.retention.service import RetentionPurge

    from tests.fakes.retention import FakeRetention

    w, _, _, ids = _registered_world()
    store = FakeRetention(w.tables, w.catalog)
    after_retention = datetime(2028, 6, 1, tzinfo=UTC)  # the race is on 2027-05-01, kept 365 days
    audit, ledger = FakeAudit(w.tables), w.ledger_store
    job = RetentionPurge(store, store, w.tables.transact, audit, ledger, clock=lambda: after_retention)  # type: ignore[arg-type]
    assert job.run(lambda: 900)["registrations"] == 3
    kept = [StoredAnswers.of(w.regs.get(rid).answers, 1) for rid in ids]  # type: ignore[union-attr]
    assert [k.answers if k else None for k in kept] == [
        {"rc_division": "F"},
        {"rc_division": "M"},
        {"rc_division": "F"},
    ]


# -- options with stock -------------------------------------------------------------------------
def _shirt_world(m: int = 3) -> tuple[Any, str, str]:
    sizes = [{"id": "M", "label": "Medium", "quantity": m}, {"id": "L", "label": "Large"}]
    return _world_with_questions([q("shirt", "SINGLE_CHOICE", required=True, options=sizes)])


def _stock(w: Any, race_id: str, event_id: str, option: str = "M") -> tuple[int, int]:
    from racecap.aws.keys import option_counter

    usage = FakeInventoryOf(w).usage(race_id, option_counter(event_id, "shirt", option))
    return usage.cap, usage.taken


def FakeInventoryOf(w: Any) -> Any:
    from tests.fakes.races import FakeInventory

    return FakeInventory(w.tables)


def test_an_option_runs_out_exactly_at_its_stock_and_a_sold_out_answer_takes_nothing() -> None:
    w, race_id, event_id = _shirt_world(m=3)
    for i in range(3):
        held = w.hold_service.hold(race_id, event_id)
        w.registration.register(held.holdId, _request(f"m{i}@example.com", {"shirt": "M"}))
    assert _stock(w, race_id, event_id) == (3, 3)
    held = w.hold_service.hold(race_id, event_id)
    paid = len(w.payments.succeeded)
    with pytest.raises(OptionSoldOut) as sold_out:
        w.registration.register(held.holdId, _request("late@example.com", {"shirt": "M"}))
    assert sold_out.value.fields == {"answers.shirt": "Medium is sold out."}
    hold = w.holds.get(held.holdId)
    # The intent came first (recorded by the begin the full shard refused): on no hold, not paid.
    assert hold is not None and hold.status == "HELD" and hold.intentId is None and len(w.payments.succeeded) == paid
    assert ("race-1", "late@example.com") not in w.tables.emails
    w.registration.register(held.holdId, _request("late@example.com", {"shirt": "L"}))  # unlimited: fine


def test_an_expired_paying_holds_unit_goes_back_and_a_retry_takes_none_twice() -> None:
    from datetime import UTC, datetime, timedelta

    w, race_id, event_id = _shirt_world(m=1)
    held = w.hold_service.hold(race_id, event_id)
    unpaid = _request("slow@example.com", {"shirt": "M"}).model_copy(update={"paymentMethod": None})
    w.registration.register(held.holdId, unpaid)
    w.registration.register(held.holdId, unpaid)  # the same attempt again (a second tab)
    assert _stock(w, race_id, event_id) == (1, 1)
    w.sweeper.sweep(datetime.now(UTC) + timedelta(hours=1))
    hold = w.holds.get(held.holdId)
    assert hold is not None and hold.status == "EXPIRED"
    assert _stock(w, race_id, event_id) == (1, 0)  # the shirt went back with the place


def test_a_cancelled_registration_gives_its_option_back() -> None:
    w, race_id, event_id = _shirt_world(m=1)
    held = w.hold_service.hold(race_id, event_id)
    rid = w.registration.register(held.holdId, _request("c@example.com", {"shirt": "M"})).registrationId
    assert w.write_queued() == []
    race, _ = w.catalog.definition(race_id)
    w.cancellations.cancel(DANA, race, rid, "asked")
    assert _stock(w, race_id, event_id) == (1, 0)


def _sizes(m: int | None) -> list[Question]:
    medium = {"id": "M", "label": "Medium"} | ({"quantity": m} if m is not None else {})
    return [q("shirt", "SINGLE_CHOICE", required=True, options=[medium, {"id": "L", "label": "Large"}])]


@pytest.mark.parametrize(("before", "after"), [(None, 5), (3, 8), (3, None)])
def test_a_resend_while_paying_is_accepted_whatever_the_director_did_to_the_options_stock(
    before: int | None, after: int | None
) -> None:
    """Medium unlimited then given a quantity (the 409 this fixes), raised, or made unlimited:
    the runner's re-send of the same details is the same attempt, with the same intent, and
    keeps the unit its first send took (none, or one that still goes back with the hold)."""
    from datetime import UTC, datetime, timedelta

    w, race_id, event_id = _world_with_questions(_sizes(before))
    held = w.hold_service.hold(race_id, event_id)
    unpaid = _request("mid@example.com", {"shirt": "M"}).model_copy(update={"paymentMethod": None})
    first = w.registration.register(held.holdId, unpaid)
    race, (event,) = w.catalog.definition(race_id)
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=_sizes(after), expectedVersion=1))
    again = w.registration.register(held.holdId, unpaid)
    assert (again.status, again.clientSecret) == ("PAYMENT_REQUIRED", first.clientSecret)
    assert len(w.payments.intents) == 1
    taken = 1 if before is not None else 0
    if after is not None:
        assert _stock(w, race_id, event_id) == (after, taken)
    hold = w.holds.get(held.holdId)
    assert hold is not None and len(hold.attempt.stock or []) == taken  # type: ignore[union-attr]
    if before is not None:  # another answer than the one that took a unit is another attempt
        with pytest.raises(Conflict):
            w.registration.register(held.holdId, _request("mid@example.com", {"shirt": "L"}))
    w.sweeper.sweep(datetime.now(UTC) + timedelta(hours=1))
    if before is not None:
        assert _stock(w, race_id, event_id)[1] == 0  # the unit went back with the hold


def test_a_send_the_providers_budget_refused_takes_nothing_and_is_sent_again_from_its_snapshot() -> None:
    """The provider's budget refused the first send (a 429 keeping the place): the intent comes
    before anything is written, so the hold is HELD with its Medium untaken, as its snapshot
    says, and the re-send goes on from the snapshot — not a 409 "already being processed" (the
    T-shirt burst's 18 of 40 in CI at 6df0eaa, when the refused send had begun the payment)."""
    from racecap.errors import Busy
    from racecap.holds.models import HoldPhase

    w, race_id, event_id = _shirt_world(m=1)
    held = w.hold_service.hold(race_id, event_id)
    unpaid = _request("mid@example.com", {"shirt": "M"}).model_copy(update={"paymentMethod": None})
    w.payments.rate_limit_next = 1
    with pytest.raises(Busy):
        w.registration.register(held.holdId, unpaid)
    hold = w.holds.get(held.holdId)
    assert hold is not None and (hold.status, hold.attempt) == (HoldPhase.HELD, None)
    assert _stock(w, race_id, event_id) == (1, 0) and w.hints.get(held.holdId) is not None
    again = w.registration.register(held.holdId, unpaid)
    assert again.status == "PAYMENT_REQUIRED" and len(w.payments.intents) == 1
    assert _stock(w, race_id, event_id) == (1, 1)


def test_a_quantity_below_what_is_taken_is_refused_naming_it_and_raising_it_adds_units() -> None:
    w, race_id, event_id = _shirt_world(m=2)
    for i in range(2):
        held = w.hold_service.hold(race_id, event_id)
        w.registration.register(held.holdId, _request(f"t{i}@example.com", {"shirt": "M"}))
    race, (event,) = w.catalog.definition(race_id)
    fewer = [q("shirt", "SINGLE_CHOICE", options=[{"id": "M", "label": "Medium", "quantity": 1}])]
    with pytest.raises(ValidationFailed) as refused:
        w.questions.save(DANA, race, event, QuestionSetDraft(questions=fewer))
    assert list(fields(refused)) == ["questions.0.options.0.quantity"]
    more = [q("shirt", "SINGLE_CHOICE", options=[{"id": "M", "label": "Medium", "quantity": 60}])]
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=more))
    assert _stock(w, race_id, event_id) == (60, 2)
    assert len(FakeInventoryOf(w).usage(race_id, "ev0#OPTION#shirt#M").shards) == 3  # sharded like a cap of 60


# -- the waiver and the guardian ---------------------------------------------------------------------
WAIVER = "I run at my own risk. The organisers are not liable for injury."


def _waiver_world() -> tuple[Any, str, str]:
    from tests.unit.core_world import World

    w = World()
    race_id = w.race(caps=(20,))  # race day 2027-05-01
    race, (event,) = w.catalog.definition(race_id)
    w.questions.save(DANA, race, event, QuestionSetDraft(waiver={"text": WAIVER}))  # type: ignore[arg-type]
    return w, race_id, event.eventId


def _born(day: str, waiver: dict[str, Any] | None, email: str = "kid@example.com") -> Any:
    from racecap.registration.models import RegistrationRequest

    body = {"email": email, "firstName": "Kit", "lastName": "Lee", "dateOfBirth": day, "paymentMethod": "pm_card_visa"}
    return RegistrationRequest.model_validate(body | ({"waiver": waiver} if waiver is not None else {}))


def test_the_waiver_must_be_accepted_and_the_registration_keeps_its_version_hash_and_time() -> None:
    import hashlib
    import json

    w, race_id, event_id = _waiver_world()
    asked = w.questions.for_runners(race_id, event_id)
    assert asked.waiver is not None and asked.waiver.text == WAIVER and asked.adultAge == 18
    held = w.hold_service.hold(race_id, event_id)
    for refused in (None, {"accepted": False}):
        with pytest.raises(ValidationFailed) as bad:
            w.registration.register(held.holdId, _born("1990-01-01", refused))
        assert list(fields(bad)) == ["waiver.accepted"]
    assert w.payments.intents == [] and w.tables.emails == {}
    rid = w.registration.register(held.holdId, _born("1990-01-01", {"accepted": True})).registrationId
    assert w.write_queued() == []
    reg = w.regs.get(rid)
    assert reg is not None and reg.waiver is not None
    record = json.loads(reg.waiver)
    assert record["version"] == 1 and record["accepted"] is True and "guardianName" not in record
    assert record["sha256"] == hashlib.sha256(WAIVER.encode()).hexdigest() and record["acceptedAt"]


def test_a_runner_17_on_race_day_needs_a_guardians_name_and_acceptance() -> None:
    import json

    w, race_id, event_id = _waiver_world()
    held = w.hold_service.hold(race_id, event_id)
    with pytest.raises(ValidationFailed) as bad:  # 17 on 2027-05-01: turns 18 the day after
        w.registration.register(held.holdId, _born("2009-05-02", {"accepted": True}))
    assert set(fields(bad)) == {"waiver.guardianName", "waiver.guardianAccepted"}
    with pytest.raises(ValidationFailed) as bad:
        w.registration.register(held.holdId, _born("2009-05-02", {"accepted": True, "guardianName": "Pat Lee"}))
    assert list(fields(bad)) == ["waiver.guardianAccepted"]
    assert w.payments.intents == []
    ok = {"accepted": True, "guardianName": "Pat Lee", "guardianAccepted": True}
    rid = w.registration.register(held.holdId, _born("2009-05-02", ok)).registrationId
    assert w.write_queued() == []
    record = json.loads(w.regs.get(rid).waiver)  # type: ignore[union-attr,arg-type]
    assert (record["guardianName"], record["guardianAccepted"]) == ("Pat Lee", True)


def test_a_runner_17_today_and_18_on_race_day_needs_no_guardian() -> None:
    w, race_id, event_id = _waiver_world()
    held = w.hold_service.hold(race_id, event_id)
    accepted = w.registration.register(held.holdId, _born("2009-05-01", {"accepted": True}))  # 18 on 2027-05-01
    assert accepted.status == "QUEUED"


def test_the_purge_keeps_which_waiver_was_accepted_but_not_the_guardians_name() -> None:
    from racecap.questions.rules import waiver_after_purge

    kept = waiver_after_purge('{"version":1,"sha256":"ab","acceptedAt":"2027-01-01T00:00:00Z","guardianName":"Pat"}')
    assert kept == '{"version":1,"sha256":"ab","acceptedAt":"2027-01-01T00:00:00Z"}'


def test_a_set_may_stock_at_most_thirty_options_so_a_save_stays_short() -> None:
    sizes = [{"id": f"s{i}", "label": f"Size {i}", "quantity": 10} for i in range(31)]
    with pytest.raises(ValidationFailed) as bad:
        check_set(QuestionSetDraft(questions=[q("shirt", "SINGLE_CHOICE", options=sizes)]))
    assert list(fields(bad)) == ["questions.0.options.30.quantity"]


# -- what is left of an option's stock --------------------------------------------------------------
def test_the_runners_form_marks_a_sold_out_option_and_the_director_sees_taken_and_left() -> None:
    w, race_id, event_id = _shirt_world(m=2)
    race, (event,) = w.catalog.definition(race_id)
    assert w.questions.for_runners(race_id, event_id).soldOut == {}
    for i in range(2):
        held = w.hold_service.hold(race_id, event_id)
        w.registration.register(held.holdId, _request(f"s{i}@example.com", {"shirt": "M"}))
    w.questions._cache.local.clear()  # the form's count is cached for a second, as the race page's
    assert w.questions.for_runners(race_id, event_id).soldOut == {"shirt": ["M"]}
    stock = w.questions.view(race, event).stock
    assert [(s.questionId, s.optionId, s.quantity, s.taken, s.left) for s in stock] == [("shirt", "M", 2, 2, 0)]
    # Two more shirts: the form offers Medium again once its count is read again.
    more = [q("shirt", "SINGLE_CHOICE", required=True, options=[{"id": "M", "label": "Medium", "quantity": 4}])]
    saved = w.questions.save(DANA, race, event, QuestionSetDraft(questions=more, expectedVersion=1))
    assert [(s.taken, s.left) for s in saved.stock] == [(2, 2)]
    assert w.questions.for_runners(race_id, event_id).soldOut == {}


# -- the waiver in the export ---------------------------------------------------------------------------
def test_the_export_has_the_waivers_version_time_and_guardian_formula_safe() -> None:
    import csv
    import io

    from racecap.participants.service import Participants
    from racecap.registration.writer import RegistrationWriter

    w, race_id, event_id = _waiver_world()
    w.writer = RegistrationWriter(w.regs, w.emails, pace=w.pace, answers=w.questions)
    guardian = {"accepted": True, "guardianName": "=Pat Lee", "guardianAccepted": True}
    w.registration.register(w.hold_service.hold(race_id, event_id).holdId, _born("2009-05-02", guardian))
    adult = _born("1990-01-01", {"accepted": True}, email="adult@example.com")
    w.registration.register(w.hold_service.hold(race_id, event_id).holdId, adult)
    assert w.write_queued() == []
    race, events = w.catalog.definition(race_id)
    lines = [line for line, _ in Participants(w.regs, w.questions).export_lines(race, events)]
    rows = list(csv.DictReader(io.StringIO("".join(lines))))
    by_email = {r["email"]: r for r in rows}
    kid, grown = by_email["kid@example.com"], by_email["adult@example.com"]
    assert (kid["waiverVersion"], kid["waiverGuardian"]) == ("1", "'=Pat Lee")  # a name, never a formula
    assert kid["waiverAcceptedAt"].startswith("20") and grown["waiverGuardian"] == ""
    assert grown["waiverVersion"] == "1" and grown["waiverAcceptedAt"]


# -- Redis down: the current version comes from DynamoDB ----------------------------------------------
class _Redis:
    """Just enough of Redis for the stamps and values the questions use, and a switch to
    take it down (every call then fails as a refused connection does)."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}
        self.expiry: dict[str, int] = {}  # the seconds a stamp was set to live
        self.down = False

    def _up(self) -> None:
        if self.down:
            import redis

            raise redis.ConnectionError("Connection refused")

    def get(self, key: str) -> str | None:
        self._up()
        return self.data.get(key)

    def set(self, key: str, value: Any, nx: bool = False, **_: Any) -> bool:
        self._up()
        if nx and key in self.data:
            return False
        self.data[key] = str(value)
        if "ex" in _:
            self.expiry[key] = int(_["ex"])
        return True

    def exists(self, key: str) -> int:
        self._up()
        return int(key in self.data)

    def delete(self, key: str) -> int:
        self._up()
        return int(self.data.pop(key, None) is not None)

    def eval(self, script: str, _n: int, key: str, *args: Any) -> int:
        self._up()
        if "tonumber(ARGV[1]) > cur" in script:  # the stamp's raise
            if int(args[0]) > int(self.data.get(key, "0")):
                self.data[key], self.expiry[key] = str(args[0]), int(args[1])
        elif self.data.get(key) == args[0]:  # a lock's release
            del self.data[key]
        return 0


def test_with_redis_down_the_registration_reads_the_current_version_from_dynamodb() -> None:
    """A save made while Redis is down cannot move the pointer there: runners' environments
    read it from DynamoDB instead (the cache's breaker), so the registration checks its
    answers against the questions the director saved, and still goes through."""
    from racecap.cache import TieredCache
    from racecap.registration.service import RegistrationService

    from tests.fakes.races import FakeInventory
    from tests.unit.core_world import World

    shared = _Redis()
    w = World()
    race_id = w.race(caps=(20,))
    race, (event,) = w.catalog.definition(race_id)
    admin, runners = (
        Questions(
            w.question_store, w.tables.transact, FakeAudit(w.tables),
            TieredCache(lambda: shared, stamp_ttl=0.05), FakeInventory(w.tables),  # type: ignore[arg-type,return-value]
        )
        for _ in range(2)
    )  # fmt: skip
    service = RegistrationService(w.catalog, w.attempts, w.regs, w.payments, w.queue, pace=w.pace, questions=runners)  # type: ignore[arg-type]
    admin.save(DANA, race, event, QuestionSetDraft(questions=[q("shirt", "SINGLE_CHOICE", options=opts("M"))]))
    event_id = event.eventId
    assert runners.current(race_id, event_id)[0] == 1
    assert shared.data["rc:stamp:questions:race-1:ev0"] == "1"  # read through Redis while it is up
    # Kept a minute only: a save that misses Redis (below) leaves it stale no longer than that.
    assert shared.expiry["rc:stamp:questions:race-1:ev0"] == 60

    shared.down = True
    admin.save(DANA, race, event, QuestionSetDraft(questions=[q("club", "SHORT_TEXT", required=True)]))
    import time

    time.sleep(0.06)  # past the in-process stamp's life
    held = w.hold_service.hold(race_id, event_id)
    with pytest.raises(ValidationFailed) as bad:  # version 1's answer: version 2 is asked now
        service.register(held.holdId, _request(answers={"shirt": "M"}))
    assert set(fields(bad)) == {"answers.shirt", "answers.club"}
    accepted = service.register(held.holdId, _request(answers={"club": "Harriers"}))
    assert accepted.status == "QUEUED"
    hold = w.holds.get(held.holdId)
    assert hold is not None and hold.attempt is not None and hold.attempt.questionsVersion == 2


@pytest.mark.parametrize(("before", "after"), [(None, 5), (3, None)])
def test_a_teams_resend_while_paying_keeps_each_members_units_whatever_the_director_did_to_the_stock(
    before: int | None, after: int | None
) -> None:
    """As a runner's, for a team: each member's answers against the units that member took."""
    from racecap.registration.models import TeamRegistrationRequest

    from tests.unit.core_world import World
    from tests.unit.test_teams import _team_race

    w = World()
    _team_race(w, [10], sizes=(2, 4))
    race, (event,) = w.catalog.definition("race-1")
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=_sizes(before)))
    held = w.hold_service.hold_team("race-1", "ev0", 2)
    team = TeamRegistrationRequest.model_validate(
        {
            "teamName": "Harbour Harriers",
            "members": [
                {"email": f"m{i}@example.com", "firstName": f"M{i}", "lastName": "Lee",
                 "dateOfBirth": "1990-01-01", "answers": {"shirt": size}}
                for i, size in enumerate(["M", "L"])
            ],
        }
    )  # fmt: skip
    first = w.registration.register_team(held.holdId, team)
    w.questions.save(DANA, race, event, QuestionSetDraft(questions=_sizes(after), expectedVersion=1))
    again = w.registration.register_team(held.holdId, team)
    assert (again.status, again.clientSecret) == ("PAYMENT_REQUIRED", first.clientSecret)
    hold = w.holds.get(held.holdId)
    assert hold is not None and hold.attempt is not None and hold.attempt.members is not None
    taken = 1 if before is not None else 0
    assert [len(m.get("stock") or []) for m in hold.attempt.members] == [taken, 0]
    if after is not None:
        assert _stock(w, "race-1", "ev0") == (after, taken)
