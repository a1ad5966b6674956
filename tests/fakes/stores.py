"""In-memory stores: ``HoldStore``, ``RegistrationStore`` and ``MessageQueue`` (``holds.store``, ``registration.store``, ``aws.queues``).

One ``FakeTables`` holds what the Inventory and Registrations tables hold (cap shards,
holds, email claims, registrations, counters); ``FakeHolds`` and ``FakeRegistrations`` are
views on it, as the DynamoDB adapters are views on the tables. Every change that the real
adapters make in one transaction is checked whole, then applied whole, under one lock;
a failed condition raises the same outcome (``ConditionFailed`` with the same item
positions, ``CounterMoved``, ...). ``tests/contract`` runs the same cases against these and
the DynamoDB adapters.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import BaseModel
from racecap.aws.keys import option_counter
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.errors import TooManyHolds
from racecap.holds.models import (
    Attempt,
    EmailClaimPhase,
    Hold,
    HoldPhase,
    Reprice,
)
from racecap.places.returns import Freed, Giveback, LineCounts, line_counts, pool_attr
from racecap.registration.models import (
    ROW_FIELDS,
    PaidRegistration,
    Registration,
    RegistrationPhase,
    RegistrationRowData,
)
from racecap.registration.status import Backlog
from racecap.registration.store import STATS_FIELDS, CounterMoved, DuplicateRegistration

Check = Callable[[], bool]
Apply = Callable[[], None]


def fake_item(check: Check, apply: Apply) -> TransactItem:
    """A transaction item for ``FakeTables.transact``: a condition and a change."""
    return {"Fake": (check, apply)}


@dataclass
class Claim:
    registrationId: str
    holdId: str
    eventId: str
    status: EmailClaimPhase


@dataclass
class FakeTables:
    shards: dict[tuple[str, str], dict[str, list[int]]] = field(default_factory=dict)  # sk -> [cap, taken]
    holds: dict[str, Hold] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)  # the sweeper's sparse index
    # Queued holds keyed by their re-send time in that index (else by their expiry, as live ones).
    by_requeue: set[str] = field(default_factory=set)
    emails: dict[tuple[str, str], Claim] = field(default_factory=dict)
    regs: dict[str, Registration] = field(default_factory=dict)
    bibs: dict[tuple[str, str], int] = field(default_factory=dict)
    stats: dict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    minutes: dict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    audit: list[dict[str, Any]] = field(default_factory=list)
    client_holds: Counter[str] = field(default_factory=Counter)  # per-client hold-limit counters
    ledger_sums: Counter[str] = field(default_factory=Counter)  # registration id -> ledgerRefundedCents
    cancel_marks: dict[str, str] = field(default_factory=dict)  # cancellations under way: id -> begun at
    # Discount codes' use counters: (raceId, CODE) -> shard -> [cap, taken] (racecap.codes)
    code_shards: dict[tuple[str, str], dict[str, list[int]]] = field(default_factory=dict)
    # The waitlist's LINE counters a freed place looks at (places.returns): waiting, pool,
    # pool_<shard>, offered, closed — per (raceId, eventId).
    lines: dict[tuple[str, str], Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    lock: threading.RLock = field(default_factory=threading.RLock)
    transactions: int = 0

    def add_event(self, race_id: str, event_id: str, caps: list[int]) -> None:
        self.shards[(race_id, event_id)] = {f"SHARD#{n:03d}": [cap, 0] for n, cap in enumerate(caps)}

    def taken(self, race_id: str, event_id: str) -> int:
        return sum(t for _, t in self.shards[(race_id, event_id)].values())

    def transact(self, items: Sequence[TransactItem]) -> None:
        """Check every item's condition, then apply them all: one transaction."""
        with self.lock:
            self.transactions += 1
            steps = [cast(tuple[Check, Apply], item["Fake"]) for item in items]
            failed = [i for i, (check, _) in enumerate(steps) if not check()]
            if failed:
                raise ConditionFailed(failed)
            for _, apply in steps:
                apply()

    # -- freeing places (``places.returns.DynamoPlaceReturns``, in memory) ----------------------
    def line(self, race_id: str, event_id: str) -> LineCounts:
        with self.lock:
            found = self.lines.get((race_id, event_id))
            return line_counts(dict(found) if found else None)

    def pool_item(
        self, race_id: str, event_id: str, takes: Mapping[str, int], *, must_want: bool = True
    ) -> TransactItem:
        ev = (race_id, event_id)

        def wants() -> bool:
            line = self.line(race_id, event_id)
            return line.exists and not line.closed and (not must_want or line.waiting > line.pool)

        def pool() -> None:
            for sk, k in takes.items():
                self.lines[ev]["pool"] += k
                self.lines[ev][pool_attr(sk)] += k

        return fake_item(wants, pool)

    def wants_nothing(self, race_id: str, event_id: str, *, closed_only: bool = False) -> TransactItem:
        def check() -> bool:
            line = self.line(race_id, event_id)
            return not line.exists or line.closed or (not closed_only and line.waiting <= line.pool)

        return fake_item(check, lambda: None)

    def give_back(
        self, race_id: str, event_id: str, takes: Mapping[str, int], *, waitlist: bool, to_line: bool = False
    ) -> Giveback:
        ev = (race_id, event_id)

        def ok() -> bool:
            return all(self.shards[ev][sk][1] >= k for sk, k in takes.items())

        def apply() -> None:
            for sk, k in takes.items():
                self.shards[ev][sk][1] -= k

        on_shards = [fake_item(ok, apply)]
        if not waitlist:
            return Giveback(on_shards, "public")
        seen = self.line(race_id, event_id)
        if seen.wants_places or (to_line and seen.exists and not seen.closed):
            item = self.pool_item(race_id, event_id, takes, must_want=not to_line)
            return Giveback([item], "pool", item)
        check = self.wants_nothing(race_id, event_id, closed_only=to_line)
        return Giveback([*on_shards, check], "public", check)

    # -- items shared by both views ---------------------------------------------------------
    def hold_item(self, hold_id: str, check: Callable[[Hold], bool], **changes: Any) -> TransactItem:
        def ok() -> bool:
            found = self.holds.get(hold_id)
            return found is not None and check(found)

        def apply() -> None:
            self.holds[hold_id] = self.holds[hold_id].model_copy(update=changes)
            # QUEUED stays in the index (keyed by its expiry) until the writer confirms it.
            if changes.get("status") not in (None, HoldPhase.HELD, HoldPhase.PAYING, HoldPhase.QUEUED):
                self.live.discard(hold_id)

        return fake_item(ok, apply)

    def stock_items(self, hold: Hold, attempt: Attempt | None, delta: int) -> list[TransactItem]:
        """The attempt's stocked options taken (+1, below the cap) or given back (-1), as the
        adapter's items on the option counters' shards (``aws.keys.option_counter``)."""
        items = []
        for entry in (attempt.stock or []) if attempt else []:
            question_id, option_id, shard = entry.split("#", 2)
            counter = (hold.raceId, option_counter(hold.eventId, question_id, option_id))

            def ok(counter: tuple[str, str] = counter, shard: str = shard) -> bool:
                cap, taken = self.shards.get(counter, {}).get(shard, [0, 0])
                return delta < 0 or taken < cap

            def apply(counter: tuple[str, str] = counter, shard: str = shard) -> None:
                self.shards[counter][shard][1] += delta

            items.append(fake_item(ok, apply))
        return items

    def shard_item(self, hold: Hold, delta: int, *, guard: bool = False, shard: str | None = None) -> TransactItem:
        """Every place of the hold (a team's on each of its shards) moved by ``delta`` each; or
        one place on ``shard`` (a team member's, cancelled)."""
        takes = {shard: 1} if shard else hold.taken_by_shard()

        def ok() -> bool:
            counters = self.shards[(hold.raceId, hold.eventId)]
            return not guard or all(counters[sk][1] >= k for sk, k in takes.items())

        def apply() -> None:
            for sk, k in takes.items():
                self.shards[(hold.raceId, hold.eventId)][sk][1] += delta * k

        return fake_item(ok, apply)

    def code_item(self, race_id: str, code: str, shard: str, delta: int) -> TransactItem:
        """A code's use taken (+1, only while the shard has one left) or given back (-1)."""

        def ok() -> bool:
            cap, taken = self.code_shards[(race_id, code)][shard]
            return taken < cap if delta > 0 else taken >= 1

        def apply() -> None:
            self.code_shards[(race_id, code)][shard][1] += delta

        return fake_item(ok, apply)

    def code_uses(self, race_id: str, code: str) -> int:
        return sum(t for _, t in self.code_shards.get((race_id, code), {}).values())

    def release_email_item(self, race_id: str, email: str, rid: str, *, only_claimed: bool) -> TransactItem:
        def ok() -> bool:
            claim = self.emails.get((race_id, email))
            if only_claimed:
                return claim is not None and claim.registrationId == rid and claim.status == EmailClaimPhase.CLAIMED
            return claim is None or claim.registrationId == rid

        return fake_item(ok, lambda: self.emails.pop((race_id, email), None) and None)


class FakeHolds:
    def __init__(self, tables: FakeTables | None = None) -> None:
        self.tables = tables or FakeTables()

    def claim(self, hold: Hold, shards: list[str], avoid: set[str] | None = None) -> Hold | None:
        order = sorted(shards, key=lambda s: bool(avoid) and s in (avoid or set()))
        t = self.tables
        for shard in order:
            with t.lock:
                if hold.holdId in t.holds:
                    raise ConditionFailed([1])
                cap, taken = t.shards[(hold.raceId, hold.eventId)][shard]
                if taken < cap:
                    for key, limit in hold.clientLimits.items():
                        if t.client_holds[key] >= limit:
                            raise TooManyHolds(f"This client already holds {limit} places.", retry_after=60)
                    for key in hold.clientLimits:
                        t.client_holds[key] += 1
                    t.shards[(hold.raceId, hold.eventId)][shard][1] += 1
                    placed = hold.model_copy(update={"shard": shard})
                    t.holds[hold.holdId] = placed
                    t.live.add(hold.holdId)
                    return placed
            if avoid is not None:
                avoid.add(shard)
        return None

    def claim_team(self, hold: Hold, plan: Callable[[dict[str, int], int], dict[str, int]]) -> Hold | int:
        t = self.tables
        with t.lock:
            shards = t.shards[(hold.raceId, hold.eventId)]
            rooms = {sk: cap - taken for sk, (cap, taken) in shards.items() if cap > taken}
            if sum(rooms.values()) < hold.places:
                return sum(rooms.values())
            for key, limit in hold.clientLimits.items():
                if t.client_holds[key] + hold.client_takes(key) > limit:
                    raise TooManyHolds(f"This client already holds {limit} places.", retry_after=60)
            takes = plan(rooms, hold.places)
            for key in hold.clientLimits:
                t.client_holds[key] += hold.client_takes(key)
            for sk, k in takes.items():
                shards[sk][1] += k
            placed = hold.model_copy(update={"shardTakes": takes, "shard": min(takes)})
            t.holds[hold.holdId] = placed
            t.live.add(hold.holdId)
            return placed

    def get(self, hold_id: str) -> Hold | None:
        with self.tables.lock:
            return self.tables.holds.get(hold_id)

    def get_many(self, hold_ids: Sequence[str]) -> list[Hold]:
        with self.tables.lock:
            return [self.tables.holds[h] for h in set(hold_ids) if h in self.tables.holds]

    def release(
        self, hold: Hold, new_phase: HoldPhase, *, now: datetime | None = None, waitlist: bool = False
    ) -> Freed | None:
        moment = now or datetime.now(UTC)

        def releasable(h: Hold) -> bool:
            return h.status == HoldPhase.HELD and (new_phase != HoldPhase.EXPIRED or h.expired(moment))

        return self._move_place(hold, releasable, new_phase, waitlist=waitlist)

    def _move_place(
        self,
        hold: Hold,
        check: Callable[[Hold], bool],
        phase: HoldPhase,
        extra: list[TransactItem] | None = None,
        *,
        waitlist: bool = False,
    ) -> Freed | None:
        t = self.tables
        change = hold.reprice

        def unchanged(h: Hold) -> bool:  # the code and the code change it was read with
            return check(h) and h.code == hold.code and h.reprice == change

        uses = [t.code_item(hold.raceId, hold.code, hold.codeShard, -1)] if hold.code and hold.codeShard else []
        if change and change.code and change.shard:
            uses.append(t.code_item(hold.raceId, change.code, change.shard, -1))
        while True:
            place = t.give_back(
                hold.raceId, hold.eventId, hold.taken_by_shard(), waitlist=waitlist, to_line=bool(hold.offerEntry)
            )
            items = [
                self.tables.hold_item(hold.holdId, unchanged, status=phase, reprice=None),
                *uses,
                *place.items,
                *(extra or []),
                *self._free_client_slots(hold),
            ]
            try:
                self.tables.transact(items)
            except ConditionFailed as exc:
                if exc.first == 0:
                    return None
                if place.line_moved(exc, items):
                    continue
                raise
            return place.freed

    def finish_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        t = self.tables
        found = self.get(hold.holdId)
        if found is None or found.attempt is None:
            return False
        changes: dict[str, Any] = {
            "reprice": None,
            "amountCents": reprice.amountCents,
            "attempt": replace(found.attempt, amountCents=reprice.amountCents),
            "code": reprice.code,
            "codeShard": reprice.shard,
            "listCents": reprice.listCents if reprice.code else None,
        }
        items = [t.hold_item(hold.holdId, lambda h: h.reprice == reprice, **changes)]
        if hold.code and hold.codeShard:
            items.append(t.code_item(hold.raceId, hold.code, hold.codeShard, -1))
        return self._settle_change(items)

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool:
        t = self.tables
        items = [t.hold_item(hold.holdId, lambda h: h.reprice == reprice, reprice=None)]
        if reprice.code and reprice.shard:
            items.append(t.code_item(hold.raceId, reprice.code, reprice.shard, -1))
        return self._settle_change(items)

    def _settle_change(self, items: list[TransactItem]) -> bool:
        try:
            self.tables.transact(items)
        except ConditionFailed as exc:
            if exc.first == 0:
                return False
            raise
        return True

    def offered_hold_item(self, hold: Hold) -> TransactItem:
        """A hold on a place the waitlist offered (its shard counts it already); the item's check
        answers the hold's id (``FakeWaitlist.claim_offer`` reads it)."""

        def put() -> None:
            self.tables.holds[hold.holdId] = hold
            self.tables.live.add(hold.holdId)

        return fake_item(lambda: hold.holdId, put)  # type: ignore[arg-type,return-value]

    def _free_client_slots(self, hold: Hold) -> list[TransactItem]:
        def free(key: str) -> None:
            self.tables.client_holds[key] -= hold.client_takes(key)

        return [fake_item(lambda: True, lambda k=key: free(k)) for key in hold.clientLimits]

    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[Hold]:
        def due(h: Hold) -> bool:
            if h.holdId in self.tables.by_requeue:
                return h.requeueAt is not None and h.requeueAt <= now
            return h.expired(now)

        with self.tables.lock:
            return [self.tables.holds[h] for h in self.tables.live if due(self.tables.holds[h])]

    def mark_sold_out(self, race_id: str, event_id: str, at: datetime) -> bool:
        with self.tables.lock:
            counts = self.tables.stats[(race_id, event_id)]
            if counts["soldOutAt"]:
                return False
            counts["soldOutAt"] = int(at.timestamp() * 1000)
            return True


class FakeRegistrations:
    def __init__(self, tables: FakeTables | None = None) -> None:
        self.tables = tables or FakeTables()

    def get(self, registration_id: str, consistent: bool = True) -> Registration | None:
        with self.tables.lock:
            return self.tables.regs.get(registration_id)

    def existing(self, registration_ids: list[str]) -> dict[str, Registration]:
        with self.tables.lock:
            return {r: self.tables.regs[r] for r in registration_ids if r in self.tables.regs}

    def next_bib(self, race_id: str, event_id: str) -> int:
        with self.tables.lock:
            return self.tables.bibs.get((race_id, event_id), 1)

    def confirm_batch(
        self, race_id: str, event_id: str, first_bib: int, paid: list[PaidRegistration], confirmed_at: str
    ) -> list[Registration]:
        t = self.tables
        key = (race_id, event_id)
        regs = [
            Registration(
                **p.model_dump(), bib=first_bib + i, status=RegistrationPhase.CONFIRMED, confirmedAt=confirmed_at
            )
            for i, p in enumerate(paid)
        ]

        def counter_ok() -> bool:
            return key not in t.bibs if first_bib == 1 else t.bibs.get(key) == first_bib

        def counters() -> None:
            t.bibs[key] = first_bib + len(regs)
            t.stats[key].update(confirmed=len(regs), revenueCents=sum(r.amountCents for r in regs))
            t.minutes[key][confirmed_at[:16]] += len(regs)

        items = [fake_item(counter_ok, counters)]
        holds_seen: set[str] = set()
        for reg in regs:
            items.append(
                fake_item(
                    lambda r=reg: r.registrationId not in t.regs, lambda r=reg: t.regs.__setitem__(r.registrationId, r)
                )
            )
            if reg.holdId in holds_seen:
                continue  # a team's hold moves once, with its captain (as the adapter's)
            holds_seen.add(reg.holdId)
            items.append(
                t.hold_item(
                    reg.holdId,
                    lambda h, r=reg: h.registrationId == r.registrationId,
                    status=HoldPhase.CONFIRMED,
                    bib=reg.bib,
                    chargeId=reg.chargeId,
                )
            )
        try:
            t.transact(items)
        except ConditionFailed as exc:
            if exc.first == 0:
                raise CounterMoved() from exc
            raise DuplicateRegistration() from exc
        with t.lock:
            t.live.difference_update(r.holdId for r in regs)
        return regs

    # -- directors: reading ---------------------------------------------------------------------
    def _event(self, race_id: str, event_id: str, after_bib: int) -> list[RegistrationRowData]:
        with self.tables.lock:
            regs = [r for r in self.tables.regs.values() if (r.raceId, r.eventId) == (race_id, event_id)]
        return [_row(r) for r in sorted(regs, key=lambda r: r.bib) if r.bib > after_bib]

    def event_page(
        self, race_id: str, event_id: str, after_bib: int, limit: int
    ) -> tuple[list[RegistrationRowData], bool]:
        rows = self._event(race_id, event_id, after_bib)
        return rows[:limit], len(rows) > limit

    def event_rows(self, race_id: str, event_id: str, after_bib: int = 0) -> Iterator[RegistrationRowData]:
        return iter(self._event(race_id, event_id, after_bib))

    def by_bib(self, race_id: str, event_id: str, bib: int) -> RegistrationRowData | None:
        return next((r for r in self._event(race_id, event_id, bib - 1) if r["bib"] == bib), None)

    def by_email(self, race_id: str, email: str) -> Registration | None:
        with self.tables.lock:
            claim = self.tables.emails.get((race_id, email))
            return self.tables.regs.get(claim.registrationId) if claim is not None else None

    def stats(self, race_id: str, event_id: str) -> dict[str, int]:
        with self.tables.lock:
            counts = self.tables.stats[(race_id, event_id)]
            return {k: counts[k] for k in STATS_FIELDS}

    def per_minute(self, race_id: str, event_id: str, since: str) -> dict[str, int]:
        with self.tables.lock:
            return {m: n for m, n in self.tables.minutes[(race_id, event_id)].items() if m >= since}

    # -- directors: cancelling -------------------------------------------------------------------
    def _reg_item(self, rid: str, phase: RegistrationPhase, **changes: Any) -> TransactItem:
        t = self.tables
        return fake_item(
            lambda: rid in t.regs and t.regs[rid].status == phase,
            lambda: t.regs.__setitem__(rid, t.regs[rid].model_copy(update=changes)),
        )


def _row(reg: Registration) -> RegistrationRowData:
    return cast(RegistrationRowData, reg.model_dump(mode="json", include=set(ROW_FIELDS), exclude_none=True))


class FakeQueue:
    """``MessageQueue`` as a list; ``fail_next`` makes the next send raise (SQS refused it)."""

    def __init__(self) -> None:
        self.sent: list[BaseModel] = []
        self.fail_next = 0

    def send(self, message: BaseModel) -> str:
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("injected: the queue refused the message")
        self.sent.append(message)
        return f"m-{len(self.sent)}"

    def send_many(self, messages: Sequence[BaseModel]) -> None:
        for m in messages:
            self.send(m)


class FakeWriterPace:
    """``WriterPace`` in memory: what the writer recorded, and the backlog the waiting screen is
    shown (``backlog_now``; ``broken`` makes reading it raise, as an unreachable Redis would)."""

    def __init__(self) -> None:
        self.recorded: list[tuple[int, float]] = []
        self.backlog_now: Backlog | None = Backlog(waiting=0, per_second=0.0, latency_s=0.0)
        self.broken = False

    def record(self, confirmed: int, latency_s: float) -> None:
        self.recorded.append((confirmed, latency_s))

    def backlog(self) -> Backlog | None:
        if self.broken:
            raise RuntimeError("injected: the backlog cannot be read")
        return self.backlog_now
