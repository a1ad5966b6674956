"""What the questions API says (pydantic, so the OpenAPI document describes it).

A director sends a whole set (``QuestionSetDraft``): their own questions in order plus the
built-ins they switch on. Runners get the set as they are asked it (``RunnerQuestions``):
the built-ins expanded into ordinary questions with reserved ids (``rc_…``), so the site and
the registration check treat every question alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from annotated_types import Ge, Le, Len
from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, StringConstraints
from pydantic import Strict as StrictType

from racecap.models import WHOLE_NUMBER, Model

QUESTION_ID = r"^[a-z][a-z0-9_]{0,39}$"


# Under this age on race day a runner's waiver needs a parent or guardian (the site reads it
# from the API: ``RunnerQuestions.adultAge``).
ADULT_AGE = 18


OPTION_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$"


BUILT_IN_PREFIX = "rc_"


MAX_QUESTIONS = 40


MAX_OPTIONS = 50


MAX_TEXT = 4000


QuestionKind = Literal[
    "SHORT_TEXT", "LONG_TEXT", "SINGLE_CHOICE", "MULTIPLE_CHOICE", "YES_NO", "NUMBER", "DATE", "COUNTRY", "PHONE"
]  # fmt: skip


TEXT_KINDS = frozenset({"SHORT_TEXT", "LONG_TEXT"})


CHOICE_KINDS = frozenset({"SINGLE_CHOICE", "MULTIPLE_CHOICE"})


# One answer, as JSON carries it: text (and choices, dates, countries, phones), yes/no, a
# number, or the option ids of a multiple choice. Strict: "5" is not a number, 1 is not yes.
# Bounded here too, so no request can make a hold item too large to write (DynamoDB: 400 KB).
AnswerText = Annotated[str, StringConstraints(strict=True, max_length=MAX_TEXT)]


AnswerChoices = Annotated[list[Annotated[str, StringConstraints(strict=True, max_length=40)]], Len(0, MAX_OPTIONS)]


AnswerValue = AnswerText | StrictBool | StrictInt | StrictFloat | AnswerChoices


# Any key of a sane length: an unknown question is refused by the check, naming `answers.<key>`.
Answers = dict[Annotated[str, StringConstraints(max_length=40)], AnswerValue]


_Length = Annotated[int, StrictType(), Ge(1), Le(MAX_TEXT), WHOLE_NUMBER]


class ChoiceOption(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(pattern=OPTION_ID, description="What the answer holds; keep it when relabelling.")
    label: str = Field(min_length=1, max_length=120, pattern=r"\S")
    quantity: Annotated[int, StrictType(), Ge(0), Le(1_000_000), WHOLE_NUMBER] | None = Field(
        default=None,
        description="How many there are (T-shirts of this size): once taken, the option is sold out. "
        "None: unlimited. Taken when the runner's details are sent; back when the hold expires or "
        "the registration is cancelled.",
    )


@dataclass(frozen=True)
class StockedChoice:
    """One option with stock a runner's answers take: its counter's shards to claim from."""

    question_id: str
    option_id: str
    label: str
    shards: tuple[str, ...]


class ShowWhen(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    questionId: str = Field(pattern=QUESTION_ID, description="An earlier yes/no or choice question.")
    equals: StrictStr | StrictBool = Field(
        description="The answer that shows this question: true/false for yes/no, an option id for a choice "
        "(for a multiple choice: when that option is among the answers)."
    )


class Question(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: str = Field(pattern=QUESTION_ID, description="Names the answer (`answers.<id>`); `rc_` ids are the built-ins'.")
    kind: QuestionKind
    label: str = Field(min_length=1, max_length=200, pattern=r"\S")
    help: str = Field(default="", max_length=1000, description="Shown under the question.")
    required: StrictBool = False
    maxLength: _Length | None = Field(
        default=None, description="Text kinds: the longest answer (default 200 short, 4000 long)."
    )
    options: list[ChoiceOption] = Field(default_factory=list, max_length=MAX_OPTIONS, description="Choice kinds.")
    min: StrictFloat | None = Field(default=None, description="NUMBER: the smallest answer taken.")
    max: StrictFloat | None = Field(default=None, description="NUMBER: the largest answer taken.")
    wholeNumber: StrictBool = Field(default=False, description="NUMBER: only whole numbers.")
    showWhen: ShowWhen | None = Field(default=None, description="Asked only when another answer matches.")


class BuiltIns(Model):
    """The questions every race may ask, switched on by the director."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    emergencyContact: StrictBool = Field(default=False, description="Ask (required) a name and a phone number.")
    divisions: list[ChoiceOption] = Field(
        default_factory=list,
        max_length=20,
        description="The gender/division choices, e.g. F, M, X (required when given; the results upload's "
        "categories); empty: not asked.",
    )
    club: StrictBool = Field(default=False, description="Ask (optional) the runner's club.")


class Waiver(Model):
    """The race's liability waiver for this event: the runner must accept it."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=20_000, pattern=r"\S", description="Plain text; shown as written.")


class WaiverView(Waiver):
    version: int = Field(description="The questions version it belongs to (each save is a new version).")
    sha256: str = Field(description="SHA-256 of the text, hex: what a registration's acceptance names.")


class WaiverAcceptance(Model):
    """The runner's (and, under 18 on race day, a parent or guardian's) acceptance."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    accepted: StrictBool = Field(description="The runner accepts the waiver as shown.")
    guardianName: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"\S", description="Under 18 on race day: required."
    )
    guardianAccepted: StrictBool | None = Field(
        default=None, description="Under 18 on race day: the parent or guardian accepts it too (required)."
    )


class QuestionSetDraft(Model):
    """A new version of an event's questions: the whole set, in the order runners see it."""

    model_config = ConfigDict(extra="forbid")

    questions: list[Question] = Field(default_factory=list, max_length=MAX_QUESTIONS)
    builtIns: BuiltIns = Field(default_factory=BuiltIns)
    waiver: Waiver | None = Field(default=None, description="The waiver runners accept; none: no waiver.")
    expectedVersion: Annotated[int, StrictType(), Ge(0), WHOLE_NUMBER] | None = Field(
        default=None, description="Refuse (409) if another save came first; 0: no version yet."
    )


class OptionStock(Model):
    """One option with a quantity: how many runners took (held or paid) and how many are left."""

    questionId: str
    optionId: str
    quantity: int = Field(description="The stock as its counter holds it now.")
    taken: int = Field(description="Taken by runners paying or registered; back when a hold expires or is cancelled.")
    left: int


class QuestionSetView(Model):
    raceId: str
    eventId: str
    version: int = Field(description="0 until the first save; each save is the next version.")
    savedAt: datetime | None
    savedBy: str | None
    builtIns: BuiltIns
    questions: list[Question] = Field(description="The director's own questions, in order.")
    form: list[Question] = Field(description="What runners are asked: the built-ins expanded, then the questions.")
    waiver: WaiverView | None = None
    stock: list[OptionStock] = Field(
        default_factory=list, description="Each option with a quantity in this version: taken and left, read now."
    )


class RunnerQuestions(Model):
    """What the registration form asks for one event; send the answers as `answers`."""

    raceId: str
    eventId: str
    version: int = Field(description="The version the answers are checked against (0: no questions).")
    questions: list[Question]
    countries: list[str] = Field(
        description="ISO 3166-1 alpha-2 codes a COUNTRY question takes (empty when none is asked)."
    )
    waiver: WaiverView | None = Field(description="Accept it as `waiver` when given.")
    adultAge: int = Field(
        description="A runner younger than this on race day needs a parent or guardian's name and acceptance."
    )
    soldOut: dict[str, list[str]] = Field(
        default_factory=dict,
        description="By question id, its options with stock that have none left (up to a few seconds stale: "
        "the registration decides against the real count, 409 OPTION_SOLD_OUT naming `answers.<id>`).",
    )


class StoredAnswers(Model):
    """A registration's answers with the version of the questions they answered."""

    questionsVersion: int
    answers: dict[str, AnswerValue]

    def to_json(self) -> str:
        """The answers as the registration keeps them (``holds.models.Attempt.answers``)."""
        return json.dumps(self.answers, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def of(cls, answers: str | None, version: int | None) -> StoredAnswers | None:
        """A registration's stored answers back; None when it answered no questions."""
        if answers is None or version is None:
            return None
        return cls(questionsVersion=version, answers=json.loads(answers))


class AnswerView(Model):
    questionId: str
    label: str = Field(description="The question as it was asked (from the version answered).")
    kind: QuestionKind
    value: AnswerValue
    text: str = Field(description="The answer as words: option labels, Yes/No, the number.")


class WaiverRecord(Model):
    """What a registration keeps of its waiver: which text (version and hash), when, who."""

    version: int
    sha256: str
    acceptedAt: datetime
    accepted: bool
    guardianName: str | None = None
    guardianAccepted: bool | None = None
