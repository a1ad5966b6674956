"""A captain switches the whole team to another event (issue 41, teams): a team runs in one event.

A member alone is refused (their captain moves the team). From the captain's link, the switch
goes as a runner's does (``ledger.switch``), for every member still in the team at once:

1. **Quoted** for the team: the target's price per place now, times the members; the difference
   with what the team paid is taken from, or refunded to, the card that paid the team's one
   payment (the captain's). An event that takes no team of this size is not offered.
2. **Held**: the team's places there together (one hold of N places across the cap's shards,
   ``claim_team``, of the switch's own kind: ``switchOf`` the captain), after each member's
   answers to the target's questions and waiver are checked (in the quote's order, the captain
   first; a 400 names ``members.<i>.<field>``).
3. **Paid**, when dearer: one upgrade payment on the captain's registration, as a runner's.
4. **Moved** in one transaction or not at all: N new bibs there (one counter write), each
   member's registration, the record of the entry it left and its email's claim, the switch's
   hold done, the places freed here (to the waitlist's pool first), option stock given back here
   and taken there (a team's units of one option on one shard are one write of n), the team's
   entry hold's record of them, both events' counters (by N), one trail entry, and a cheaper
   event's refund reserved in each member's ledger (their share of the team's charge).

A transaction holds 100 items at most: a team whose move could exceed it is refused before
anything is held or paid, with the count said (``TeamSwitchTooLarge``). A member who cancels, or
hands their place over, between the hold and the move makes the move fail whole (its conditions)
and the upgrade, if paid, goes back, as a lost runner's switch does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from racecap.audit.service import AuditTrail
from racecap.aws.keys import hold_key, stock_key
from racecap.aws.transactions import ConditionFailed, TransactItem, update_item
from racecap.cache import Flags
from racecap.errors import Conflict, NotEnoughPlaces, SoldOut, ValidationFailed
from racecap.holds.models import Hold
from racecap.holds.service import SOLD_OUT_FLAG_TTL, new_hold
from racecap.ledger.service import Ledger
from racecap.ledger.switch_ports import (
    SwitchGone,
    SwitchHolds,
    SwitchStore,
    TeamSwitchTooLarge,
    answers_for,
    reserved_refund,
)
from racecap.models import Actor
from racecap.money import in_units, minimum_charge
from racecap.observability import metrics
from racecap.places.returns import PlaceReturns
from racecap.places.rules import plan_team
from racecap.questions.models import StockedChoice, StoredAnswers
from racecap.races.catalog import RaceDefinitions, sold_out_flag
from racecap.races.models import Event, Race
from racecap.races.rules import age_on, check_team_size
from racecap.registration.edits import MAX_TRIES, pick_unit
from racecap.registration.models import Registration, RegistrationPhase, member_fields
from racecap.registration.own_models import SwitchRequest, SwitchTeamMember
from racecap.registration.status import StatusSnapshots
from racecap.registration.store import SwitchMove
from racecap.registration.transfer import TransferAnswers

# DynamoDB's limit on one transaction's items.
MAX_ITEMS = 100


def move_size(members: int, old_shards: int, units_taken: int, units_released: int, refunds: int) -> int:
    """The most items a team's move writes (``TeamMoves.move``'s list, counted the same way): the
    bib counter, three per member (registration, record of the entry left, email claim), the
    switch's hold, two counters, the trail, the entry hold's record, the old shards (and the
    waitlist's check), the option units taken and given back (at most one write each), and the
    refunds reserved (one per member refunded, two for a member with two payments)."""
    return 1 + 3 * members + 1 + 2 + 1 + 1 + old_shards + 1 + units_taken + units_released + refunds


def spread_refunds(members: list[Registration], price: int, total: int) -> dict[str, int]:
    """A cheaper event's ``total`` refund, per member: what each paid beyond the new price, in
    team order, never more than ``total`` in all."""
    out: dict[str, int] = {}
    rest = total
    for m in members:
        give = min(rest, max(0, m.amountCents - price))
        if give > 0:
            out[m.registrationId] = give
            rest -= give
    return out


class TeamMoves:
    """The team's side of ``Switches``: who moves, what it costs, whether it fits, the move."""

    def __init__(
        self,
        registrations: SwitchStore,
        holds: SwitchHolds,
        catalog: RaceDefinitions,
        answers: TransferAnswers | None,
        audit: AuditTrail,
        transact: Callable[[list[TransactItem]], None],
        inventory_table: str,
        returns: PlaceReturns,
        ledger: Ledger,
        flags: Flags,
        statuses: StatusSnapshots | None,
        *,
        ask_refund: Callable[[Registration, int, int], None],
        tell: Callable[[Registration, Registration, int, int], None],
    ) -> None:
        # The runner's switch's own collaborators and steps (``Switches`` builds this with its
        # own): a team's switch is the same switch, for N members at once.
        self._regs = registrations
        self._holds = holds
        self._catalog = catalog
        self._answers = answers
        self._audit = audit
        self._transact = transact
        self._inv = inventory_table
        self._returns = returns
        self._ledger = ledger
        self._flags = flags
        self._statuses = statuses
        self._ask_refund = ask_refund
        self._tell = tell

    # -- who, what, whether ------------------------------------------------------------------------
    def members(self, reg: Registration) -> list[Registration] | None:
        """A team captain's members still in the team (confirmed), the captain first; None for a
        runner alone. A member other than the captain: ``[]`` (their captain moves the team)."""
        if not reg.teamMembers:
            return None
        if reg.teamMembers[0] != reg.registrationId:
            return []
        found = (self._regs.get(rid) for rid in reg.teamMembers)
        return [m for m in found if m is not None and m.status == RegistrationPhase.CONFIRMED]

    @staticmethod
    def why_not(members: list[Registration]) -> str | None:
        if not members:
            return "A team runs in one event: your captain can switch the whole team."
        for i, m in enumerate(members):
            whose = "your" if i == 0 else f"{m.firstName}'s"
            if m.ledgerRefundedCents or m.ledgerPending or m.cancelRequestedAt:
                return f"Part of {whose} entry was refunded: ask the organiser to switch the team."
            if m.transferOffer:
                return f"{whose[0].upper()}{whose[1:]} place is offered to another runner: withdraw that offer first."
            if m.pendingSwitch and m.registrationId != members[0].registrationId:
                return "Another switch of this team is under way."
        return None

    @staticmethod
    def roster(members: list[Registration]) -> list[SwitchTeamMember]:
        return [
            SwitchTeamMember(
                registrationId=m.registrationId,
                firstName=m.firstName,
                lastName=m.lastName,
                ageOnRaceDay=age_on(date.fromisoformat(m.dateOfBirth), date.fromisoformat(m.raceDate))
                if m.dateOfBirth
                else m.ageOnRaceDay,
            )
            for m in members
        ]

    @staticmethod
    def takes_team(event: Event, members: list[Registration]) -> str | None:
        try:
            check_team_size(event, len(members))
        except ValidationFailed as exc:
            return exc.message
        return None

    def difference(self, members: list[Registration], list_cents: int) -> tuple[int, int, dict[str, int], str]:
        """(the team's price there, to pay, refunds per member, in words): one under the
        provider's minimum charge is neither charged nor refunded."""
        currency = members[0].currency
        price = list_cents * len(members)
        diff = price - sum(m.amountCents for m in members)
        least = minimum_charge(currency) or 1
        pay = diff if diff >= least else 0
        refunds = spread_refunds(members, list_cents, -diff) if -diff >= least else {}
        said = f"The whole team moves: {len(members)} places. "
        if diff and not pay and not refunds:
            said += f"The difference ({in_units(abs(diff), currency)}) is under the smallest payment: none is made. "
        return price, pay, refunds, said

    def people(
        self, race: Race, target: Event, members: list[Registration], body: SwitchRequest
    ) -> dict[str, dict[str, Any]]:
        """Each member's answers for the target (its questions and waiver), checked as a team's
        registration checks them; a 400 names the member's field."""
        given = body.members or []
        if given and len(given) != len(members):
            raise ValidationFailed(
                f"Give every member's answers: {len(members)}, the captain first.",
                fields={"members": f"{len(members)} members."},
            )
        out: dict[str, dict[str, Any]] = {}
        for i, m in enumerate(members):
            with member_fields(i):
                mine = given[i] if given else None
                out[m.registrationId] = answers_for(self._answers, m, race, target, mine.answers if mine else None,
                                                    mine.waiver if mine else None)  # fmt: skip
        return out

    def check_fits(self, members: list[Registration], target: Event, people: dict[str, dict[str, Any]] | None) -> None:
        """Refused before anything is held when the move could exceed one transaction."""
        entry = self._holds.get(members[0].holdId)
        held = _held_units(entry, members)
        taken = _most_writes([c for m in members for c in self._chosen(m, target, people)]) if people else 0
        least = min(m.amountCents for m in members)
        refunds = len(members) if target.price_at(datetime.now(UTC)) < least else 0
        refunds += len(self._ledger.charges(members[0])) - 1 if refunds else 0
        shards = len({m.shard for m in members})
        size = move_size(len(members), shards, taken, held, refunds)
        if size > MAX_ITEMS:
            raise TeamSwitchTooLarge(too_large(len(members), size))

    # -- holding -----------------------------------------------------------------------------------
    def hold(self, captain: Registration, race: Race, target: Event, members: list[Registration]) -> Hold:
        """The team's places in the target, together (one hold of N places, the switch's kind)."""
        fresh = new_hold(race, target, datetime.now(UTC), None, places=len(members))
        hold = fresh.model_copy(
            update={"registrationId": captain.registrationId, "switchOf": captain.registrationId, "memberIds": []}
        )
        got = self._holds.claim_team(hold, plan_team)
        if isinstance(got, int):
            if got == 0:
                self._flags.flag(sold_out_flag(captain.raceId, target.eventId), SOLD_OUT_FLAG_TTL)
                raise SoldOut(f"{target.name} is sold out: your team's registrations are unchanged.")
            raise NotEnoughPlaces(
                f"Only {got} place{'s' if got != 1 else ''} of {target.name} left: not enough for your team of "
                f"{len(members)}. Your team's registrations are unchanged.",
                left=got,
            )
        return got

    # -- the move ----------------------------------------------------------------------------------
    def move(self, captain: Registration, hold: Hold, pending: dict[str, Any]) -> Registration:
        _, events = self._catalog.definition(captain.raceId)
        target = next((e for e in events if e.eventId == hold.eventId), None)
        old_event = next((e for e in events if e.eventId == captain.eventId), None)
        entry = self._holds.get(captain.holdId)
        members = self.members(captain) or []
        if target is None or entry is None or entry.attempt is None:
            raise Conflict("This team's records are incomplete; contact the organiser.")
        if [m.registrationId for m in members] != list(pending.get("members") or ()):
            raise _gone()
        if (
            any(m.eventId != captain.eventId for m in members)
            or (members[0].pendingSwitch or {}).get("holdId") != hold.holdId
        ):
            raise _gone()  # moved meanwhile (the webhook and the page, at once): the caller sees which
        people: dict[str, dict[str, Any]] = dict(pending.get("people") or {})
        refunds: dict[str, int] = {k: int(v) for k, v in (pending.get("refunds") or {}).items()}
        n_of = {m.registrationId: (m.switches or 0) + 1 for m in members}
        n_of[captain.registrationId] = int(pending.get("n") or n_of[captain.registrationId])
        shards = hold.member_shards()
        now = datetime.now(UTC).isoformat()
        full: set[str] = set()
        chosen = {m.registrationId: self._chosen(m, target, people) for m in members}
        for _ in range(MAX_TRIES * 2):
            place = self._returns.give_back(
                captain.raceId,
                captain.eventId,
                Counter(str(m.shard) for m in members),
                waitlist=bool(old_event and old_event.waitlist.enabled),
            )
            first = self._regs.next_bib(captain.raceId, target.eventId)
            moves = [
                SwitchMove(
                    eventId=target.eventId, eventName=target.name, bib=first + i, shard=shards[i], holdId=hold.holdId,
                    recordId=f"{m.registrationId}-s{n_of[m.registrationId]}", person=people.get(m.registrationId) or
                    {"answers": None, "questionsVersion": None, "waiver": None},
                    refundCents=refunds.get(m.registrationId, 0), now=now,
                )
                for i, m in enumerate(members)
            ]  # fmt: skip
            units = self._units(members, chosen, full)
            stock, taken_keys = self._stock_items(captain, entry, members, target, units)
            record = self._entry_record(entry, members, moves, units, hold)
            audit = self._audit.item(
                Actor.runner(captain.registrationId), captain.raceId, "registration.switched", captain.registrationId,
                eventId=target.eventId, fromEventId=captain.eventId, team=[m.registrationId for m in members],
                bibs=[mv.bib for mv in moves], oldBibs=[m.bib for m in members], switch=n_of[captain.registrationId],
                refundCents=sum(refunds.values()),
            )  # fmt: skip
            reserved = [i for m in members for i in self._refund_items(m, refunds.get(m.registrationId, 0),
                                                                        n_of[m.registrationId], now)]  # fmt: skip
            head = self._regs.team_switch_items(members, moves)
            items = [*head, *stock, audit, *place.items, record, *reserved]
            if len(items) > MAX_ITEMS:
                raise TeamSwitchTooLarge(too_large(len(members), len(items)))
            try:
                self._transact(items)
                break
            except ConditionFailed as exc:
                if 0 in exc.indexes or place.line_moved(exc, items):
                    continue  # another writer took the bibs, or the waitlist moved: build it again
                full_at = [i - len(head) for i in exc.indexes if len(head) <= i < len(head) + len(taken_keys)]
                if full_at:
                    full.add(taken_keys[full_at[0]])
                    continue
                raise _gone() from exc
        else:
            raise Conflict("The new event kept changing while we moved your team; please try again.")
        if place.freed == "public":
            self._flags.clear_flag(sold_out_flag(captain.raceId, captain.eventId))
        metrics.add_metric(name="RegistrationSwitched", unit="Count", value=len(members))
        metrics.add_metric(name="TeamSwitched", unit="Count", value=1)
        for m in members:
            if self._statuses is not None:
                self._statuses.forget(m.registrationId)
            moved = self._regs.get(m.registrationId) or m
            refund = refunds.get(m.registrationId, 0)
            if refund:
                self._ask_refund(moved, refund, n_of[m.registrationId])
            self._tell(m, moved, n_of[m.registrationId], refund)
        return self._regs.get(captain.registrationId) or captain

    def _chosen(self, m: Registration, target: Event, people: dict[str, dict[str, Any]] | None) -> list[StockedChoice]:
        person = (people or {}).get(m.registrationId) or {}
        stored = StoredAnswers.of(person.get("answers"), person.get("questionsVersion"))
        if self._answers is None or stored is None:
            return []
        return self._answers.stocked(m.raceId, target.eventId, stored)

    @staticmethod
    def _units(
        members: list[Registration], chosen: dict[str, list[StockedChoice]], full: set[str]
    ) -> dict[str, list[str]]:
        """Each member's option units there (a stock shard with room, not in ``full``)."""
        return {m.registrationId: [pick_unit(c, full, f" for {m.firstName}") for c in chosen[m.registrationId]]
                for m in members}  # fmt: skip

    def _stock_items(
        self, captain: Registration, entry: Hold, members: list[Registration], target: Event,
        units: dict[str, list[str]],
    ) -> tuple[list[TransactItem], list[str]]:  # fmt: skip
        """The units taken there (first: a full shard's index names it) and given back here; one
        write per shard item, ``n`` units of one at once held to ``taken <= cap - n``."""
        inv, race_id = self._inv, captain.raceId
        taken = Counter(e for rid in units for e in units[rid])
        items: list[TransactItem] = []
        for e, n in taken.items():
            if n == 1:
                items.append(update_item(inv, stock_key(race_id, target.eventId, e), "SET taken = taken + :d",
                                         condition="taken < cap", vals={":d": 1}))  # fmt: skip
            else:
                cap = self._regs.stock_cap(race_id, target.eventId, e)
                items.append(update_item(inv, stock_key(race_id, target.eventId, e), "SET taken = taken + :d",
                                         condition="cap = :cap AND taken <= :most",
                                         vals={":d": n, ":cap": cap, ":most": cap - n}))  # fmt: skip
        released = Counter(e for held in _member_stock(entry, members).values() for e in held)
        items += [
            update_item(inv, stock_key(race_id, captain.eventId, e), "SET taken = taken - :d",
                        condition="taken >= :d", vals={":d": n})
            for e, n in released.items()
        ]  # fmt: skip
        return items, list(taken)

    def _entry_record(
        self, entry: Hold, members: list[Registration], moves: list[SwitchMove], units: dict[str, list[str]], hold: Hold
    ) -> TransactItem:
        """The team's entry hold follows its places: each moving member's units, shard and
        answers there, only while each is still named at its index (a paid team's list never
        reorders; the condition makes sure of it)."""
        index = {mem.registrationId: i for i, mem in enumerate(entry.attempt.team())} if entry.attempt else {}
        # Every attribute by name: ``shard`` is one of DynamoDB's reserved words.
        names: dict[str, str] = {"#ev": "eventId", "#sh": "shard", "#tk": "shardTakes", "#at": "attempt",
                                 "#mb": "members", "#st": "stock", "#rid": "registrationId"}  # fmt: skip
        vals: dict[str, Any] = {":e": hold.eventId, ":s": hold.shard, ":t": hold.taken_by_shard()}
        sets = ["#ev = :e", "#sh = :s", "#tk = :t"]
        removes: list[str] = []
        conditions = []
        for j, (m, mv) in enumerate(zip(members, moves, strict=True)):
            if m.registrationId not in index:
                raise Conflict("This registration is not in its team's record; contact the organiser.")
            path = f"#at.#mb[{index[m.registrationId]}]"
            vals[f":st{j}"], vals[f":sh{j}"], vals[f":rid{j}"] = units[m.registrationId], mv.shard, m.registrationId
            sets += [f"{path}.#st = :st{j}", f"{path}.#sh = :sh{j}"]
            conditions.append(f"{path}.#rid = :rid{j}")
            for k, v in mv.person.items():
                names[f"#{k}"] = k
                if v is None:
                    removes.append(f"{path}.#{k}")
                else:
                    vals[f":{k}{j}"] = v
                    sets.append(f"{path}.#{k} = :{k}{j}")
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        condition = " AND ".join(conditions)
        return update_item(self._inv, hold_key(entry.holdId), expression, condition=condition, names=names,
                           vals=vals)  # fmt: skip

    def _refund_items(self, m: Registration, refund: int, n: int, now: str) -> list[TransactItem]:
        return reserved_refund(self._ledger, m, refund, n, now, "the team switched to a cheaper event")


def too_large(members: int, items: int) -> str:
    return (
        f"A team of {members} is too large to move at once ({items} changes; one move takes at most {MAX_ITEMS}): "
        "ask the organiser to move it. Nothing was changed."
    )


def _gone() -> SwitchGone:
    return SwitchGone(
        "A member's registration changed meanwhile (cancelled, handed over, or switched): nothing was switched. "
        "Reload to see the team as it is now."
    )


def _member_stock(entry: Hold | None, members: list[Registration]) -> dict[str, list[str]]:
    if entry is None or entry.attempt is None:
        return {}
    ids = {m.registrationId for m in members}
    return {mem.registrationId: list(mem.stock or []) for mem in entry.attempt.team() if mem.registrationId in ids}


def _most_writes(chosen: list[StockedChoice]) -> int:
    """The most stock writes a team's choices there can make: one per option and shard used."""
    counts = Counter((c.question_id, c.option_id) for c in chosen)
    shards = {(c.question_id, c.option_id): len(c.shards) for c in chosen}
    return sum(min(n, shards[k]) for k, n in counts.items())


def _held_units(entry: Hold | None, members: list[Registration]) -> int:
    return len({e for held in _member_stock(entry, members).values() for e in held})
