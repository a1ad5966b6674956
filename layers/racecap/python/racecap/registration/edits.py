"""A runner corrects their own registration until the director's edit cut-off (issue 39): their
name, date of birth and answers (an emergency contact is one of the event's questions).

* **Until when**: the race's ``refundPolicy.editUntil``, a day in the race's time zone; a race
  without one lets no runner edit (the director decides).
* **The event's rules hold as at registration**: a new date of birth is checked against the
  event's age rule on race day; answers against the event's questions as they stand now
  (``questions.check``), and the registration keeps the version they answered.
* **Options with stock** (a T-shirt size): a new choice takes a unit from a shard with room,
  the old choice's unit goes back, and the hold's attempt records the units now taken, so a
  later cancellation returns the right ones (``ledger.cancel_store``). One transaction with
  the registration's new answers: no unit is ever taken twice or lost; a sold-out option is a
  409 OPTION_SOLD_OUT naming the answer, and nothing changed. A team member's stocked option is the captain's
  to change with the director (the team's attempt holds every member's units together).
* **Concurrent edits**: the write is conditional on the answers the edit read, so two tabs
  cannot both swap the same unit; the second is asked to reload.

The trail records which fields changed (their names, never their values).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol

from racecap.audit.service import AuditTrail
from racecap.aws.keys import hold_key, reg_key, stock_entry, stock_key
from racecap.aws.transactions import ConditionFailed, TransactItem, update_item
from racecap.errors import Conflict, Forbidden, OptionSoldOut
from racecap.holds.models import Hold
from racecap.models import Actor
from racecap.questions.models import StockedChoice, StoredAnswers
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event, Race
from racecap.races.rules import check_age, today_in
from racecap.registration.links import RegistrationLinks
from racecap.registration.models import Registration, RegistrationPhase
from racecap.registration.own_models import DetailsEdit
from racecap.registration.status import StatusSnapshots

# The stock shards a new choice tries, one after another when full, before it is sold out.
MAX_TRIES = 6


class EditNotAllowed(Forbidden):
    code = "EDIT_NOT_ALLOWED"


class EditAnswers(Protocol):
    def check(self, race_id: str, event_id: str, answers: Any) -> StoredAnswers | None: ...

    def stocked(self, race_id: str, event_id: str, answered: StoredAnswers) -> list[StockedChoice]: ...


class EditHolds(Protocol):
    def get(self, hold_id: str) -> Hold | None: ...


class EditRegistrations(Protocol):
    def get(self, registration_id: str, consistent: bool = True) -> Registration | None: ...


def edit_deadline(race: Race) -> str | None:
    return race.refundPolicy.editUntil


def may_edit(race: Race, today: date) -> str | None:
    """Why the runner may not edit now, or None."""
    until = edit_deadline(race)
    if until is None:
        return "The organiser does not let runners edit their details: contact them to correct something."
    if today > date.fromisoformat(until):
        return f"Details could be edited until {until}; contact the organiser to correct something."
    return None


class DetailsEdits:
    def __init__(
        self,
        links: RegistrationLinks,
        registrations: EditRegistrations,
        holds: EditHolds,
        catalog: RaceDefinitions,
        answers: EditAnswers,
        audit: AuditTrail,
        transact: Callable[[list[TransactItem]], None],
        tables: tuple[str, str],  # (Registrations, Inventory)
        statuses: StatusSnapshots | None = None,
    ) -> None:
        self._statuses = statuses  # the waiting screen's snapshot names the runner: forgotten on an edit
        self._links = links
        self._regs = registrations
        self._holds = holds
        self._catalog = catalog
        self._answers = answers
        self._audit = audit
        self._transact = transact
        self._regs_table, self._inv = tables

    def edit(self, token: str | None, change: DetailsEdit) -> Registration:
        reg = self._links.registration(token, self._regs.get)
        if reg.status != RegistrationPhase.CONFIRMED:
            raise Conflict("This registration is cancelled: there is nothing to correct.")
        race, events = self._catalog.definition(reg.raceId)
        why = may_edit(race, today_in(race.timeZone))
        if why is not None:
            raise EditNotAllowed(why)
        event = next((e for e in events if e.eventId == reg.eventId), None)
        if event is None:
            raise Conflict("The registration's event no longer exists; contact the organiser.")
        sets: dict[str, Any] = {}
        if change.firstName is not None and change.firstName != reg.firstName:
            sets["firstName"] = change.firstName
        if change.lastName is not None and change.lastName != reg.lastName:
            sets["lastName"] = change.lastName
        if change.dateOfBirth is not None and change.dateOfBirth.isoformat() != reg.dateOfBirth:
            check_age(race, event, change.dateOfBirth)
            sets["dateOfBirth"] = change.dateOfBirth.isoformat()
        stored: StoredAnswers | None = None
        if change.answers is not None:
            stored = self._answers.check(reg.raceId, reg.eventId, change.answers)
            if stored is not None and stored.to_json() != reg.answers:
                sets["answers"], sets["questionsVersion"] = stored.to_json(), stored.questionsVersion
        if not sets:
            return reg
        full: set[str] = set()
        for _ in range(MAX_TRIES):
            plan = self._stock_moves(reg, race, event, stored, full) if "answers" in sets and stored else _Plan()
            try:
                self._write(reg, sets, plan)
                if self._statuses is not None:
                    self._statuses.forget(reg.registrationId)
                return self._regs.get(reg.registrationId) or reg
            except ShardFull as exc:
                full.add(exc.entry)  # nothing was written: the option's other shards next
        raise Conflict("The options kept filling up while we changed yours; please try again.")

    def _stock_moves(self, reg: Registration, race: Race, event: Event, stored: StoredAnswers, full: set[str]) -> _Plan:
        """The units to take and give back, and the hold's new record of them."""
        hold = self._holds.get(reg.holdId)
        if hold is None or hold.attempt is None:
            raise Conflict("This registration's payment record is gone; contact the organiser.")
        return plan_stock(self._inv, hold, reg, self._answers.stocked(reg.raceId, reg.eventId, stored), full)

    def _write(self, reg: Registration, sets: dict[str, Any], plan: _Plan) -> None:
        names = {f"#f{i}": k for i, k in enumerate(sets)}
        vals: dict[str, Any] = {f":v{i}": v for i, v in enumerate(sets.values())}
        condition = "#s = :confirmed AND " + (
            "answers = :was" if reg.answers is not None else "attribute_not_exists(answers)"
        )
        vals.update({":confirmed": RegistrationPhase.CONFIRMED, **({":was": reg.answers} if reg.answers else {})})
        update = update_item(
            self._regs_table,
            reg_key(reg.registrationId),
            "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(sets))),
            condition=condition,
            names={**names, "#s": "status"},
            vals=vals,
        )
        fields = sorted({"answers" if k in ("answers", "questionsVersion") else k for k in sets})
        audit = self._audit.item(
            Actor.runner(reg.registrationId), reg.raceId, "registration.details.changed", reg.registrationId,
            eventId=reg.eventId, bib=reg.bib, fields=fields,
        )  # fmt: skip
        try:
            self._transact([update, audit, *plan.stock, *plan.record])
        except ConditionFailed as exc:
            full = [i - 2 for i in exc.indexes if 2 <= i < 2 + len(plan.taken)]
            if full:
                raise ShardFull(plan.taken[full[0]]) from exc
            raise Conflict("Your registration changed meanwhile (another tab?); reload it and try again.") from exc


def pick_unit(choice: StockedChoice, full: set[str], whose: str = "") -> str:
    """A unit of the option from one of its stock shards with room (not in ``full``), at random
    (runners spread over the shards); ``OptionSoldOut`` naming the answer when none has any.
    ``whose``: the runner it is for, said in the message (a captain answering for a member)."""
    room = [s for s in choice.shards if stock_entry(choice.question_id, choice.option_id, s) not in full]
    if not room:
        raise OptionSoldOut(
            f"{choice.label} is sold out; please choose another{whose}.",
            fields={f"answers.{choice.question_id}": f"{choice.label} is sold out."},
        )
    return stock_entry(choice.question_id, choice.option_id, random.choice(room))


def plan_stock(
    inventory: str,
    hold: Hold,
    reg: Registration,
    chosen: list[StockedChoice],
    full: set[str],
    person: dict[str, Any] | None = None,
    *,
    to_event: str | None = None,
    moved: dict[str, Any] | None = None,
) -> _Plan:
    """A runner's options with stock as ``chosen`` now: the units to take (a shard with room,
    not in ``full``) and give back, and the hold's new record of them (an edit, a transfer).
    ``person``: the runner's details the hold's record of the attempt keeps, replaced too (a
    transfer), so the record is written even when no unit moves. ``to_event``: the choices are
    another event's (a switch: every unit held goes back, each chosen one is taken there), and
    ``moved`` the hold's own attributes that follow the place (its event, its shard).
    ``OptionSoldOut`` when a new choice has no shard left."""
    if hold.attempt is None:
        raise Conflict("This registration's payment record is gone; contact the organiser.")
    # Where the hold records this runner's units: the attempt's own, or in a team's, their
    # member's entry (the captain's card paid; each member's units are theirs alone).
    prefix, owner, held = "attempt.", "registrationId", list(hold.attempt.stock or [])
    if hold.is_team:
        members = hold.attempt.team()
        index = next((i for i, m in enumerate(members) if m.registrationId == reg.registrationId), None)
        if index is None:
            raise Conflict("This registration is not in its team's record; contact the organiser.")
        prefix, owner = f"attempt.members[{index}].", f"attempt.members[{index}].registrationId"
        held = list(members[index].stock or [])
    event = to_event or reg.eventId
    kept = [] if event != reg.eventId else [
        e for e in held if any(e.startswith(f"{c.question_id}#{c.option_id}#") for c in chosen)
    ]  # fmt: skip
    wanted = [c for c in chosen if not any(e.startswith(f"{c.question_id}#{c.option_id}#") for e in kept)]
    released = [e for e in held if e not in kept]
    if not wanted and not released and person is None:
        return _Plan()
    taken = [pick_unit(c, full) for c in wanted]
    items = [
        *(
            update_item(inventory, stock_key(reg.raceId, event, e), "SET taken = taken + :one",
                        condition="taken < cap", vals={":one": 1})
            for e in taken
        ),
        *(
            update_item(inventory, stock_key(reg.raceId, reg.eventId, e), "SET taken = taken - :one",
                        condition="taken >= :one", vals={":one": 1})
            for e in released
        ),
    ]  # fmt: skip
    sets = {"stock": [*kept, *taken], **{k: v for k, v in (person or {}).items() if v is not None}}
    gone = [k for k, v in (person or {}).items() if v is None]
    names = {f"#p{i}": k for i, k in enumerate(sets)} | {f"#g{i}": k for i, k in enumerate(gone)}
    vals: dict[str, Any] = {f":p{i}": v for i, v in enumerate(sets.values())} | {":rid": reg.registrationId}
    path = prefix[:-1]  # "attempt" or "attempt.members[i]"
    expression = "SET " + ", ".join(f"{path}.#p{i} = :p{i}" for i in range(len(sets)))
    for i, (name, value) in enumerate((moved or {}).items()):
        names[f"#m{i}"], vals[f":m{i}"] = name, value
        expression += f", #m{i} = :m{i}"
    if gone:
        expression += " REMOVE " + ", ".join(f"{path}.#g{i}" for i in range(len(gone)))
    # Conditional on the hold still naming this runner there (a team's member list never
    # reorders once paid; the condition makes sure of it rather than trusting it).
    record = update_item(inventory, hold_key(hold.holdId), expression, condition=f"{owner} = :rid",
                         names=names, vals=vals)  # fmt: skip
    return _Plan(items, [record], taken)


@dataclass(frozen=True)
class _Plan:
    """An edit's stock moves: units taken and given back, the hold's new record, what it took."""

    stock: list[TransactItem] = field(default_factory=list)
    record: list[TransactItem] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)


class ShardFull(Exception):
    def __init__(self, entry: str) -> None:
        super().__init__(entry)
        self.entry = entry
