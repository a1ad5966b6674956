"""Questions use cases: a director saves a version; runners and the registration read the
current one through the caching hierarchy.

Caching (as the race definition, ``racecap.logic.races``): a saved version never changes,
so it is cached long under its number; which number is current is a version stamp
(``questions:<raceId>:<eventId>``), read once a second per environment and moved on by
the save. An event that never had questions has stamp 0: its registrations read nothing
more, so the registration path of an event without questions costs what it did before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from racecap.cache import TieredCache
from racecap.dal.transactions import ConditionFailed, TransactItem
from racecap.errors import Conflict, NotFound, ValidationFailed
from racecap.models import Director, Event, Race
from racecap.questions import rules
from racecap.questions.countries import COUNTRY_CODES
from racecap.questions.models import (
    AnswerValue,
    AnswerView,
    BuiltIns,
    Question,
    QuestionSetDraft,
    QuestionSetView,
    RunnerQuestions,
    StoredAnswers,
)
from racecap.questions.store import QuestionStore

VERSION_TTL = 86_400.0  # a version is immutable: the TTL only bounds memory
VERSION_LOCAL_TTL = 300.0


class QuestionsVersionNotFound(NotFound):
    code = "QUESTIONS_VERSION_NOT_FOUND"


def stamp_name(race_id: str, event_id: str) -> str:
    return f"questions:{race_id}:{event_id}"


class Questions:
    def __init__(
        self,
        store: QuestionStore,
        transact: Callable[[list[TransactItem]], None],
        audit: Any,  # racecap.logic.audit.AuditTrail
        cache: TieredCache,
    ) -> None:
        self._store = store
        self._transact = transact
        self._audit = audit
        self._cache = cache

    # -- directors -------------------------------------------------------------------------
    def view(self, race: Race, event: Event, version: int | None = None) -> QuestionSetView:
        """The current set (``version`` None) or one saved version of it."""
        current = self._store.current_version(race.raceId, event.eventId)
        wanted = current if version is None else version
        if wanted == 0:
            return QuestionSetView(
                raceId=race.raceId, eventId=event.eventId, version=0, savedAt=None, savedBy=None,
                builtIns=BuiltIns(), questions=[], form=[],
            )  # fmt: skip
        doc = self._store.get(race.raceId, event.eventId, wanted) if 0 < wanted <= current else None
        if doc is None:
            raise QuestionsVersionNotFound(f"{event.name} has no questions version {wanted}.")
        return _set_view(race.raceId, event.eventId, wanted, doc)

    def save(self, director: Director, race: Race, event: Event, draft: QuestionSetDraft) -> QuestionSetView:
        """The draft as the event's next version; what runners are asked from now on."""
        rules.check_set(draft)
        current = self._store.current_version(race.raceId, event.eventId)
        if draft.expectedVersion is not None and draft.expectedVersion != current:
            raise Conflict(
                f"The questions are at version {current}, not {draft.expectedVersion}: reload them and try again."
            )
        version = current + 1
        doc = {
            "savedAt": datetime.now(UTC).isoformat(),
            "savedBy": director.username,
            "builtIns": draft.builtIns.model_dump(mode="json"),
            "questions": [q.model_dump(mode="json", exclude_defaults=True) for q in draft.questions],
        }
        audit = self._audit.item(
            director, race.raceId, "questions.save", event.eventId,
            version=version, questions=[q.id for q in rules.form(draft)],
        )  # fmt: skip
        try:
            self._transact([*self._store.save_items(race.raceId, event.eventId, version, doc), audit])
        except ConditionFailed as exc:
            raise Conflict("Another save of these questions came first: reload them and try again.") from exc
        self._cache.bump(stamp_name(race.raceId, event.eventId), version)
        return _set_view(race.raceId, event.eventId, version, doc)

    # -- runners ---------------------------------------------------------------------------
    def current(self, race_id: str, event_id: str) -> tuple[int, list[Question]]:
        """The version runners are asked now and its form (built-ins expanded), cached."""
        version = self._cache.stamp(
            stamp_name(race_id, event_id), lambda: self._store.current_version(race_id, event_id)
        )
        return version, self.form(race_id, event_id, version)

    def form(self, race_id: str, event_id: str, version: int) -> list[Question]:
        """The form of one version (immutable, so cached long); [] for version 0."""
        if version == 0:
            return []

        def load() -> list[dict[str, Any]] | None:
            doc = self._store.get(race_id, event_id, version)
            return None if doc is None else [q.model_dump(mode="json") for q in _form_of(doc)]

        found = self._cache.get_or_load(
            f"{stamp_name(race_id, event_id)}:v{version}", load, ttl=VERSION_TTL, local_ttl=VERSION_LOCAL_TTL
        )
        if found is None:
            raise QuestionsVersionNotFound(f"No questions version {version}.")
        return [Question.model_validate(q) for q in found]

    def for_runners(self, race_id: str, event_id: str) -> RunnerQuestions:
        version, questions = self.current(race_id, event_id)
        asks_country = any(q.kind == "COUNTRY" for q in questions)
        return RunnerQuestions(
            raceId=race_id,
            eventId=event_id,
            version=version,
            questions=questions,
            countries=list(COUNTRY_CODES) if asks_country else [],
        )

    def check(self, race_id: str, event_id: str, answers: Mapping[str, AnswerValue] | None) -> StoredAnswers | None:
        """A runner's answers checked against the questions as they stand (ValidationFailed
        naming ``answers.<id>`` otherwise); None for an event without questions."""
        version, questions = self.current(race_id, event_id)
        if version == 0:
            if answers:
                raise ValidationFailed(
                    "This event asks no questions.",
                    fields={f"answers.{qid}": "This event asks no such question." for qid in answers},
                )
            return None
        return StoredAnswers(questionsVersion=version, answers=rules.check_answers(questions, answers or {}))

    # -- what directors read of the answers -----------------------------------------------------
    def described(self, race_id: str, event_id: str, answers: str | None, version: int | None) -> list[AnswerView]:
        """A registration's stored answers (``domain.Registration.answers``) as its version asked them."""
        stored = StoredAnswers.of(answers, version)
        return [] if stored is None else self.readable(race_id, event_id, stored)

    def columns(self, race_id: str, event_ids: Sequence[str]) -> list[tuple[str, str]]:
        """One (id, label) per question any version of these events asked: the export's
        answer columns, in the newest order, the label from the newest version asking it."""
        found: dict[str, str] = {}
        for event_id in event_ids:
            newest = self._store.current_version(race_id, event_id)
            for version in range(newest, 0, -1):
                for q in self.form(race_id, event_id, version):
                    found.setdefault(q.id, q.label)
        return list(found.items())

    def cells(
        self, race_id: str, event_id: str, answers: str | None, version: int | None, ids: Sequence[str]
    ) -> list[str]:
        """A registration's answers as text under the export's columns ("" where none)."""
        stored = StoredAnswers.of(answers, version)
        if stored is None:
            return [""] * len(ids)
        asked = {q.id: q for q in self.form(race_id, event_id, stored.questionsVersion)}
        return [
            rules.answer_text(asked[qid], stored.answers[qid]) if qid in stored.answers and qid in asked else ""
            for qid in ids
        ]

    def readable(self, race_id: str, event_id: str, stored: StoredAnswers) -> list[AnswerView]:
        """Stored answers as the questions of the version they answered put them."""
        asked = {q.id: q for q in self.form(race_id, event_id, stored.questionsVersion)}
        return [
            AnswerView(questionId=qid, label=q.label, kind=q.kind, value=value, text=rules.answer_text(q, value))
            for qid, value in stored.answers.items()
            if (q := asked.get(qid)) is not None
        ]


def _form_of(doc: dict[str, Any]) -> list[Question]:
    return rules.form(
        QuestionSetDraft(
            builtIns=BuiltIns.model_validate(doc["builtIns"]),
            questions=[Question.model_validate(q) for q in doc["questions"]],
        )
    )


def _set_view(race_id: str, event_id: str, version: int, doc: dict[str, Any]) -> QuestionSetView:
    return QuestionSetView(
        raceId=race_id,
        eventId=event_id,
        version=version,
        savedAt=datetime.fromisoformat(doc["savedAt"]),
        savedBy=doc.get("savedBy"),
        builtIns=BuiltIns.model_validate(doc["builtIns"]),
        questions=[Question.model_validate(q) for q in doc["questions"]],
        form=_form_of(doc),
    )
