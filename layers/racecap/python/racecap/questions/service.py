"""Questions use cases: a director saves a version; runners and the registration read the
current one through the caching hierarchy.

Caching (as the race definition, ``races.catalog``): a saved version never changes,
so it is cached long under its number; which number is current is a version stamp
(``questions:<raceId>:<eventId>``), read once a second per environment and moved on by
the save. An event that never had questions has stamp 0: its registrations read nothing
more, so the registration path of an event without questions costs what it did before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from racecap.audit.service import AuditEntries
from racecap.aws.keys import option_counter
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.cache import TieredCache
from racecap.errors import Conflict, NotFound, ValidationFailed
from racecap.models import Director
from racecap.places.rules import CapBelowPlacesTaken, plan_cap_change
from racecap.places.store import Inventory
from racecap.questions import rules
from racecap.questions.countries import COUNTRY_CODES
from racecap.questions.models import (
    ADULT_AGE,
    AnswerValue,
    AnswerView,
    BuiltIns,
    OptionStock,
    Question,
    QuestionSetDraft,
    QuestionSetView,
    RunnerQuestions,
    StockedChoice,
    StoredAnswers,
    WaiverAcceptance,
    WaiverRecord,
    WaiverView,
)
from racecap.questions.store import QuestionStore
from racecap.races.models import Event, Race

STOCK_CHANGE_TRIES = 5

VERSION_TTL = 86_400.0  # a version is immutable: the TTL only bounds memory
# How long Redis keeps the current-version pointer. Redis is never the only way to it: down,
# every environment reads the pointer from DynamoDB (``TieredCache``'s breaker); a save made
# while Redis was unreachable cannot move the pointer there, so once Redis is back its old
# value is believed for at most this long. One pointer read per event a minute is cheap.
POINTER_SHARED_TTL = 60
VERSION_LOCAL_TTL = 300.0
# What is left of each option's stock, for the runners' form: as fresh as the race page's
# places left (``races.catalog``), one counter read per stocked option every two seconds at most.
LEFT_TTL = 2.0
LEFT_LOCAL_TTL = 1.0


class QuestionsVersionNotFound(NotFound):
    code = "QUESTIONS_VERSION_NOT_FOUND"


def stamp_name(race_id: str, event_id: str) -> str:
    return f"questions:{race_id}:{event_id}"


class Questions:
    def __init__(
        self,
        store: QuestionStore,
        transact: Callable[[list[TransactItem]], None],
        audit: AuditEntries,
        cache: TieredCache,
        inventory: Inventory | None = None,  # the options' stock counters (the caps' shards)
    ) -> None:
        self._store = store
        self._transact = transact
        self._audit = audit
        self._cache = cache
        self._inventory = inventory

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
        return _set_view(race.raceId, event.eventId, wanted, doc).model_copy(
            update={"stock": self._stock_now(race.raceId, event.eventId, doc.get("stock") or {})}
        )

    def _stock_now(self, race_id: str, event_id: str, stock: dict[str, list[str]]) -> list[OptionStock]:
        """Each stocked option's counter as it stands (consistent reads: a director's page)."""
        if not stock or self._inventory is None:
            return []
        out = []
        for key in stock:
            qid, oid = key.split("#", 1)
            usage = self._inventory.usage(race_id, option_counter(event_id, qid, oid), consistent=True)
            out.append(
                OptionStock(questionId=qid, optionId=oid, quantity=usage.cap, taken=usage.taken, left=usage.left)
            )
        return out

    def save(self, director: Director, race: Race, event: Event, draft: QuestionSetDraft) -> QuestionSetView:
        """The draft as the event's next version; what runners are asked from now on."""
        rules.check_set(draft)
        current = self._store.current_version(race.raceId, event.eventId)
        if draft.expectedVersion is not None and draft.expectedVersion != current:
            raise Conflict(
                f"The questions are at version {current}, not {draft.expectedVersion}: reload them and try again."
            )
        version = current + 1
        stock = self._set_stock(race, event, draft)
        doc = {
            "savedAt": datetime.now(UTC).isoformat(),
            "savedBy": director.username,
            "builtIns": draft.builtIns.model_dump(mode="json"),
            "questions": [q.model_dump(mode="json", exclude_defaults=True) for q in draft.questions],
            "stock": stock,
            "waiver": draft.waiver.text if draft.waiver else None,
        }
        audit = self._audit.item(
            director, race.raceId, "questions.save", event.eventId,
            version=version, questions=[q.id for q in rules.form(draft)],
            waiverSha256=_sha256(draft.waiver.text) if draft.waiver else None,
        )  # fmt: skip
        try:
            self._transact([*self._store.save_items(race.raceId, event.eventId, version, doc), audit])
        except ConditionFailed as exc:
            raise Conflict("Another save of these questions came first: reload them and try again.") from exc
        self._cache.bump(stamp_name(race.raceId, event.eventId), version, shared_ttl=POINTER_SHARED_TTL)
        return _set_view(race.raceId, event.eventId, version, doc).model_copy(
            update={"stock": self._stock_now(race.raceId, event.eventId, stock)}
        )

    def _set_stock(self, race: Race, event: Event, draft: QuestionSetDraft) -> dict[str, list[str]]:
        """Each option's stock counter sized to its quantity, as an event's cap is (same shards,
        same plan: never below what is taken); its shards by ``<questionId>#<optionId>``.

        Planned for every option first, so a quantity below what runners already took is
        refused (400 naming it) before anything changes; each counter then moves in its own
        transaction (a set can have more shards than one transaction takes), re-planned if a
        runner took a unit meanwhile. Counters outlive versions: a size keeps its count
        whatever else the director edits."""
        wanted = [
            (f"{options_at}.{j}.quantity", q.id, o.id, o.quantity)
            for options_at, q in _numbered(draft)
            for j, o in enumerate(q.options)
            if o.quantity is not None
        ]
        if not wanted:
            return {}
        from racecap.places.rules import shards_for

        if self._inventory is None:
            raise RuntimeError("Questions was built without the stock counters")
        inventory = self._inventory
        errors: dict[str, str] = {}
        for where, qid, oid, quantity in wanted:
            taken = inventory.usage(race.raceId, option_counter(event.eventId, qid, oid), consistent=True).taken
            if quantity < taken:
                errors[where] = f"{taken} are already taken: at least {taken}."
        if errors:
            raise ValidationFailed("A quantity is below what runners already took.", fields=errors)
        shards: dict[str, list[str]] = {}
        for where, qid, oid, quantity in wanted:
            counter = option_counter(event.eventId, qid, oid)
            for _ in range(STOCK_CHANGE_TRIES):
                usage = inventory.usage(race.raceId, counter, consistent=True)
                try:
                    plan = plan_cap_change(usage.shards, quantity, shards_for(quantity))
                except CapBelowPlacesTaken as exc:
                    raise ValidationFailed(
                        "A quantity is below what runners already took.",
                        fields={where: f"{exc.taken} are already taken: at least {exc.taken}."},
                    ) from exc
                try:
                    if plan:
                        self._transact(inventory.cap_change_items(race.raceId, counter, plan))
                except ConditionFailed:
                    continue  # a runner took one meanwhile: plan again
                shards[f"{qid}#{oid}"] = sorted({s.sk for s in usage.shards} | {c.sk for c in plan})
                break
            else:
                raise Conflict("Runners kept taking that option while we saved; please retry.")
        return shards

    # -- runners ---------------------------------------------------------------------------
    def current(self, race_id: str, event_id: str) -> tuple[int, list[Question]]:
        """The version runners are asked now and its form (built-ins expanded), cached."""
        version = self._cache.stamp(
            stamp_name(race_id, event_id),
            lambda: self._store.current_version(race_id, event_id),
            shared_ttl=POINTER_SHARED_TTL,
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
            waiver=self._waiver(race_id, event_id, version),
            adultAge=ADULT_AGE,
            soldOut=self._sold_out(race_id, event_id, version),
        )

    def _sold_out(self, race_id: str, event_id: str, version: int) -> dict[str, list[str]]:
        """The options of ``version`` with stock and none left, by question id (cached briefly:
        the form marks them, the registration's claim decides)."""
        stock = self._stock_doc(race_id, event_id, version) if version else {}
        if not stock or self._inventory is None:
            return {}
        inventory = self._inventory

        def load() -> dict[str, int]:
            return {key: inventory.usage(race_id, option_counter(event_id, *key.split("#", 1))).left for key in stock}

        left = self._cache.get_or_load(
            f"{stamp_name(race_id, event_id)}:v{version}:left", load, ttl=LEFT_TTL, local_ttl=LEFT_LOCAL_TTL
        )
        out: dict[str, list[str]] = {}
        for key, n in left.items():
            if n <= 0:
                qid, oid = key.split("#", 1)
                out.setdefault(qid, []).append(oid)
        return out

    def stocked(self, race_id: str, event_id: str, answered: StoredAnswers) -> list[StockedChoice]:
        """The options with stock these answers take, with the shards to claim them from."""
        doc = self._stock_doc(race_id, event_id, answered.questionsVersion)
        if not doc:
            return []
        asked = {q.id: q for q in self.form(race_id, event_id, answered.questionsVersion)}
        chosen: list[StockedChoice] = []
        for qid, value in answered.answers.items():
            q = asked.get(qid)
            if q is None:
                continue
            for oid in value if isinstance(value, list) else [value]:
                shards = doc.get(f"{qid}#{oid}")
                if shards:
                    label = next((o.label for o in q.options if o.id == oid), str(oid))
                    chosen.append(StockedChoice(qid, str(oid), label, tuple(shards)))
        return chosen

    def _stock_doc(self, race_id: str, event_id: str, version: int) -> dict[str, list[str]]:
        return dict(self._part(race_id, event_id, version, "stock") or {})

    def _waiver(self, race_id: str, event_id: str, version: int) -> WaiverView | None:
        text = self._part(race_id, event_id, version, "waiver") if version else None
        return None if not text else WaiverView(text=text, version=version, sha256=_sha256(text))

    def _part(self, race_id: str, event_id: str, version: int, part: str) -> Any:
        """One part of a saved version's document (immutable, so cached long)."""

        def load() -> Any:
            return (self._store.get(race_id, event_id, version) or {}).get(part)

        return self._cache.get_or_load(
            f"{stamp_name(race_id, event_id)}:v{version}:{part}", load, ttl=VERSION_TTL, local_ttl=VERSION_LOCAL_TTL
        )

    def accept_waiver(
        self, race_id: str, event_id: str, version: int | None, given: WaiverAcceptance | None, age: int, now: datetime
    ) -> str | None:
        """The runner's acceptance of the event's waiver as the registration keeps it (JSON: the
        text's version and hash, the time, the answer, and for a runner under ``ADULT_AGE`` on
        race day the guardian's name and acceptance), or ValidationFailed naming ``waiver.…``.
        None: the event has no waiver."""
        waiver = self._waiver(race_id, event_id, version) if version else None
        if waiver is None:
            if given is not None:
                raise ValidationFailed("This event has no waiver to accept.", fields={"waiver": "Not asked."})
            return None
        minor = age < ADULT_AGE
        errors: dict[str, str] = {}
        if given is None or not given.accepted:
            errors["waiver.accepted"] = "Please read and accept the waiver."
        if minor and (given is None or not given.guardianName):
            errors["waiver.guardianName"] = f"A runner under {ADULT_AGE} on race day needs a parent or guardian's name."
        if minor and (given is None or given.guardianAccepted is not True):
            errors["waiver.guardianAccepted"] = (
                f"A parent or guardian must accept the waiver for a runner under {ADULT_AGE}."
            )
        if errors:
            raise ValidationFailed(next(iter(errors.values())), fields=errors)
        assert given is not None
        record = WaiverRecord(
            version=waiver.version,
            sha256=waiver.sha256,
            acceptedAt=now,
            accepted=True,
            guardianName=given.guardianName if minor else None,
            guardianAccepted=True if minor else None,
        )
        return record.model_dump_json(exclude_none=True)

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
        """A registration's stored answers (``registration.models.Registration.answers``) as its version asked them."""
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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _numbered(draft: QuestionSetDraft) -> list[tuple[str, Question]]:
    """Every question of a draft with the path of its options (what a problem is named by)."""
    built = [("builtIns.divisions", q) for q in rules.built_in_questions(draft.builtIns) if q.options]
    return built + [(f"questions.{i}.options", q) for i, q in enumerate(draft.questions)]


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
        waiver=WaiverView(text=doc["waiver"], version=version, sha256=_sha256(doc["waiver"]))
        if doc.get("waiver")
        else None,
    )
