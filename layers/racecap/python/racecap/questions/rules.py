"""The questions' rules, pure (no AWS): a director's set checked as a whole, the built-ins
expanded into the form runners see, and a runner's answers checked against that form.

Every problem is reported under the field it belongs to (``questions.3.options``,
``answers.tshirt``), all at once, so a form can mark every field in one round trip.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import date
from typing import Any

from racecap.errors import ValidationFailed
from racecap.questions.countries import COUNTRIES
from racecap.questions.models import (
    BUILT_IN_PREFIX,
    CHOICE_KINDS,
    MAX_TEXT,
    TEXT_KINDS,
    AnswerValue,
    BuiltIns,
    Question,
    QuestionSetDraft,
)

DEFAULT_SHORT_TEXT = 200
MAX_STOCKED_OPTIONS = 30
# Digits with the usual separators, an optional leading +: "+44 20 7946 0958", "(555) 010-0199".
PHONE_RE = re.compile(r"^\+?[0-9 ().-]{6,30}$")
MIN_PHONE_DIGITS = 6
DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

EMERGENCY_NAME = "rc_emergency_name"
EMERGENCY_PHONE = "rc_emergency_phone"
DIVISION = "rc_division"
CLUB = "rc_club"


def built_in_questions(built_ins: BuiltIns) -> list[Question]:
    """The built-ins a director switched on, as ordinary questions (asked first)."""
    asked: list[Question] = []
    if built_ins.emergencyContact:
        asked += [
            Question(
                id=EMERGENCY_NAME,
                kind="SHORT_TEXT",
                label="Emergency contact: name",
                help="Someone we can call on race day if something happens to you.",
                required=True,
                maxLength=100,
            ),
            Question(id=EMERGENCY_PHONE, kind="PHONE", label="Emergency contact: phone", required=True),
        ]
    if built_ins.divisions:
        asked.append(
            Question(id=DIVISION, kind="SINGLE_CHOICE", label="Division", required=True, options=built_ins.divisions)
        )
    if built_ins.club:
        asked.append(Question(id=CLUB, kind="SHORT_TEXT", label="Club", maxLength=100))
    return asked


def form(draft: QuestionSetDraft) -> list[Question]:
    return built_in_questions(draft.builtIns) + list(draft.questions)


def check_set(draft: QuestionSetDraft) -> list[Question]:
    """The form a draft gives runners, or ValidationFailed naming every inconsistent field."""
    errors: dict[str, str] = {}
    division_ids = [o.id for o in draft.builtIns.divisions]
    if len(set(division_ids)) != len(division_ids):
        errors["builtIns.divisions"] = "Each division needs its own id."
    seen: dict[str, Question] = {q.id: q for q in built_in_questions(draft.builtIns)}
    for i, q in enumerate(draft.questions):
        where = f"questions.{i}"
        if q.id.startswith(BUILT_IN_PREFIX):
            errors[f"{where}.id"] = f"Ids starting with {BUILT_IN_PREFIX} belong to the built-in questions."
        elif q.id in seen:
            errors[f"{where}.id"] = f"Another question already has the id {q.id}."
        errors.update(_check_shape(q, where))
        if q.showWhen is not None:
            problem = _check_condition(q, seen)
            if problem:
                errors[f"{where}.showWhen"] = problem
        seen.setdefault(q.id, q)
    stocked = [(i, j) for i, q in enumerate(draft.questions) for j, o in enumerate(q.options) if o.quantity is not None]
    stocked += [(-1, j) for j, o in enumerate(draft.builtIns.divisions) if o.quantity is not None]
    if len(stocked) > MAX_STOCKED_OPTIONS:
        # Each is a counter set in its own write when the set is saved: a bound keeps a save short.
        i, j = stocked[MAX_STOCKED_OPTIONS]
        where = f"questions.{i}.options.{j}.quantity" if i >= 0 else f"builtIns.divisions.{j}.quantity"
        errors[where] = f"At most {MAX_STOCKED_OPTIONS} options may have a quantity."
    if errors:
        raise ValidationFailed("Some questions need fixing.", fields=errors)
    return form(draft)


def _check_shape(q: Question, where: str) -> dict[str, str]:
    errors: dict[str, str] = {}
    if q.kind in CHOICE_KINDS:
        ids = [o.id for o in q.options]
        if not ids:
            errors[f"{where}.options"] = "A choice needs at least one option."
        elif len(set(ids)) != len(ids):
            errors[f"{where}.options"] = "Each option needs its own id."
    elif q.options:
        errors[f"{where}.options"] = "Only choice questions have options."
    if q.maxLength is not None and q.kind not in TEXT_KINDS:
        errors[f"{where}.maxLength"] = "Only text questions have a maximum length."
    if q.kind != "NUMBER" and (q.min is not None or q.max is not None or q.wholeNumber):
        errors[f"{where}.min"] = "Only number questions have bounds."
    if q.min is not None and q.max is not None and q.min > q.max:
        errors[f"{where}.max"] = "The largest answer must not be below the smallest."
    for name in ("min", "max"):
        bound = getattr(q, name)
        if bound is not None and not math.isfinite(bound):
            errors[f"{where}.{name}"] = "Give a finite number."
    return errors


def _check_condition(q: Question, earlier: Mapping[str, Question]) -> str | None:
    assert q.showWhen is not None
    if q.showWhen.questionId == q.id:
        return "A question cannot depend on itself."
    other = earlier.get(q.showWhen.questionId)
    if other is None:
        return f"No earlier question has the id {q.showWhen.questionId}."
    if other.kind == "YES_NO":
        return None if isinstance(q.showWhen.equals, bool) else "Compare a yes/no answer with true or false."
    if other.kind in CHOICE_KINDS:
        if q.showWhen.equals not in {o.id for o in other.options}:
            return f"{q.showWhen.equals!r} is not one of the options of {other.id}."
        return None
    return "Only a yes/no or a choice question can show another."


# -- answers -----------------------------------------------------------------------------------
def shown(q: Question, answers: Mapping[str, Any]) -> bool:
    """Whether ``q`` is asked, given the (checked) answers to the questions before it."""
    if q.showWhen is None:
        return True
    given = answers.get(q.showWhen.questionId)
    if isinstance(given, list):
        return q.showWhen.equals in given
    return given is not None and given == q.showWhen.equals and type(given) is type(q.showWhen.equals)


def check_answers(questions: list[Question], given: Mapping[str, AnswerValue]) -> dict[str, AnswerValue]:
    """The answers to keep (trimmed; those to questions not shown dropped), or ValidationFailed
    naming each bad one as ``answers.<questionId>``."""
    errors: dict[str, str] = {}
    known = {q.id for q in questions}
    for qid in given:
        if qid not in known:
            errors[f"answers.{qid}"] = "This event asks no such question."
    kept: dict[str, AnswerValue] = {}
    for q in questions:
        if not shown(q, kept):
            continue  # a hidden question's answer (typed before the runner changed their mind)
        value = _normalise(given.get(q.id))
        if value is None:
            if q.required:
                errors[f"answers.{q.id}"] = "Please answer this question."
            continue
        problem = _check_value(q, value)
        if problem:
            errors[f"answers.{q.id}"] = problem
        else:
            kept[q.id] = value
    if errors:
        first = next(iter(errors.values()))
        raise ValidationFailed(f"Check your answers: {first}", fields=errors)
    return kept


def _normalise(value: AnswerValue | None) -> AnswerValue | None:
    """Blank text and an empty selection are no answer."""
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, list):
        return value or None
    return value


def _check_value(q: Question, value: AnswerValue) -> str | None:
    kind = q.kind
    if kind in TEXT_KINDS:
        if not isinstance(value, str):
            return "Answer with text."
        limit = q.maxLength or (DEFAULT_SHORT_TEXT if kind == "SHORT_TEXT" else MAX_TEXT)
        return f"At most {limit} characters." if len(value) > limit else None
    if kind == "SINGLE_CHOICE":
        offered = {o.id for o in q.options}
        return None if isinstance(value, str) and value in offered else "Choose one of the options offered."
    if kind == "MULTIPLE_CHOICE":
        offered = {o.id for o in q.options}
        if not isinstance(value, list) or not set(value) <= offered:
            return "Choose among the options offered."
        return "Choose each option once." if len(set(value)) != len(value) else None
    if kind == "YES_NO":
        return None if isinstance(value, bool) else "Answer yes (true) or no (false)."
    if kind == "NUMBER":
        return _check_number(q, value)
    if kind == "DATE":
        return None if isinstance(value, str) and _is_date(value) else "Give a date as YYYY-MM-DD."
    if kind == "COUNTRY":
        return None if isinstance(value, str) and value in COUNTRIES else "Choose a country (ISO 3166 code, e.g. GB)."
    if kind == "PHONE":
        ok = isinstance(value, str) and PHONE_RE.match(value) and sum(c.isdigit() for c in value) >= MIN_PHONE_DIGITS
        return None if ok else "Give a phone number, e.g. +44 20 7946 0958."
    return "This question cannot be answered."  # a kind this code does not know: refuse, never keep


def _check_number(q: Question, value: AnswerValue) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "Answer with a number."
    if q.wholeNumber and value != int(value):
        return "Answer with a whole number."
    if q.min is not None and value < q.min:
        return f"At least {_plain(q.min)}."
    if q.max is not None and value > q.max:
        return f"At most {_plain(q.max)}."
    return None


def _plain(n: float) -> str:
    return str(int(n)) if n == int(n) else str(n)


def _is_date(text: str) -> bool:
    if not DATE_RE.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def answer_text(q: Question, value: AnswerValue) -> str:
    """An answer as words, for people (exports, emails, the director's detail)."""
    labels = {o.id: o.label for o in q.options}
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, list):
        return ", ".join(labels.get(v, v) for v in value)
    if isinstance(value, float):
        return _plain(value)
    return labels.get(str(value), str(value))


def division_of(answers: str | None) -> str | None:
    """A registration's answer to the built-in division question, from its stored answers
    (JSON, ``registration.models.Registration.answers``): the results upload's category for the runner."""
    if not answers:
        return None
    value = json.loads(answers).get(DIVISION)
    return value if isinstance(value, str) else None


def kept_after_purge(answers: str | None) -> str | None:
    """What the retention purge keeps of a registration's answers: the division alone (the
    results' categories, as the age on race day is kept for age groups); None: nothing."""
    division = division_of(answers)
    return None if division is None else json.dumps({DIVISION: division}, separators=(",", ":"))


def waiver_after_purge(waiver: str | None) -> str | None:
    """What the purge keeps of a waiver's acceptance: which text was accepted and when, not
    the guardian's name (personal data)."""
    if not waiver:
        return None
    kept = {k: v for k, v in json.loads(waiver).items() if k != "guardianName"}
    return json.dumps(kept, separators=(",", ":"))
