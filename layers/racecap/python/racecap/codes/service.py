"""Discount codes: directors make them, runners apply them to a held place.

A use is taken with the code's application to the hold (one transaction: the hold's new
price and a conditional write on one shard of the code's counter) and given back when the
hold expires or is released unpaid (``dal.holds``: with the place, in the same transaction).
A paid registration keeps its use. The discount is computed once, on the price fixed on the
hold, and rounds in the runner's favour; the hold's ``amountCents`` is then what is charged.
"""

from __future__ import annotations

import math
import random
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from racecap.codes.models import (
    MAX_SHARDS,
    USES_PER_SHARD,
    BulkCodesRequest,
    CodeDraft,
    CodeList,
    CodeTerms,
    CodeView,
)
from racecap.codes.store import CodeExists, CodeStore, StoredCode
from racecap.dal.transactions import ConditionFailed
from racecap.domain import Hold, HoldPhase
from racecap.errors import (
    CodeError,
    CodeExpired,
    CodeNotForEvent,
    CodeNotYetValid,
    CodeTaken,
    CodeTooLate,
    CodeUnknown,
    CodeUsedUp,
    Conflict,
    DomainError,
    HoldExpired,
    HoldNotFound,
    ValidationFailed,
)
from racecap.money import charge_problem, decimals, in_units
from racecap.observability import metrics

if TYPE_CHECKING:
    from racecap.dal.holds import DynamoHolds
    from racecap.logic.admin import RaceAdmin
    from racecap.logic.audit import AuditTrail
    from racecap.logic.races import RaceDefinitions
    from racecap.models import Director

# A code with no limit still counts its uses (the stats show them) on shards that never fill.
UNLIMITED_SHARD_CAP = 1_000_000_000
UNLIMITED_SHARDS = 4
# Random part of a batch's codes: 8 characters of an alphabet with no 0/O or 1/I to misread.
BULK_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
BULK_RANDOM = 8


def shard_caps(max_uses: int | None) -> list[int]:
    """How a code's uses spread over its shards (the caps' approach: the sum is the limit)."""
    if max_uses is None:
        return [UNLIMITED_SHARD_CAP] * UNLIMITED_SHARDS
    shards = max(1, min(MAX_SHARDS, max_uses // USES_PER_SHARD))
    base, rest = divmod(max_uses, shards)
    return [base + (1 if i < rest else 0) for i in range(shards)]


def discounted(price: int, currency: str, terms: CodeTerms) -> int:
    """The price after the code, in the currency's API unit, rounded in the runner's favour:
    a percentage's discount rounds up to the unit (to 10 for three-decimal currencies, which
    the provider takes in tens only); never below 0."""
    if terms.kind == "PERCENT":
        assert terms.percent is not None
        step = 10 if decimals(currency) == 3 else 1
        off = math.ceil(price * terms.percent / 100 / step) * step
    else:
        assert terms.amountCents is not None
        off = terms.amountCents
    return max(0, price - off)


class CodesAdmin:
    """The director's side: make codes (one, or a single-use batch), list them with uses."""

    def __init__(self, store: CodeStore, races: RaceAdmin, audit: AuditTrail) -> None:
        self._store = store
        self._races = races
        self._audit = audit

    def _terms_for(self, director: Director, race_id: str, terms: CodeTerms) -> CodeTerms:
        race, events = self._races.owned(director, race_id)
        known = {e.eventId for e in events}
        unknown = [e for e in terms.eventIds if e not in known]
        if unknown:
            raise ValidationFailed(
                f"The race has no event {unknown[0]}.", fields={"eventIds": f"Unknown event: {', '.join(unknown)}."}
            )
        return CodeTerms.model_validate(terms.in_zone(race.timeZone).model_dump(include=set(CodeTerms.model_fields)))

    def create(self, director: Director, race_id: str, draft: CodeDraft, now: datetime | None = None) -> CodeView:
        terms = self._terms_for(director, race_id, draft)
        stored = StoredCode(
            raceId=race_id,
            code=draft.code,
            terms=terms,
            maxUses=draft.maxUses,
            shards=shard_caps(draft.maxUses),
            createdAt=now or datetime.now(UTC),
        )
        audit = self._audit.item(
            director, race_id, "code.create", draft.code, maxUses=draft.maxUses, **_described(terms)
        )
        try:
            self._store.create([stored], audit)
        except CodeExists as exc:
            raise CodeTaken(f"The race already has a code {draft.code}.", fields={"code": "Already exists."}) from exc
        return _view(stored, 0)

    def bulk(
        self, director: Director, race_id: str, request: BulkCodesRequest, now: datetime | None = None
    ) -> list[str]:
        """``count`` single-use codes ``<PREFIX>-<random>``; the new codes, for the CSV."""
        terms = self._terms_for(director, race_id, request)
        created = now or datetime.now(UTC)
        codes = sorted({f"{request.prefix}-{_random_part()}" for _ in range(request.count)})
        while len(codes) < request.count:  # two draws alike (1 in 10^12): draw the difference
            codes = sorted(set(codes) | {f"{request.prefix}-{_random_part()}"})
        stored = [
            StoredCode(raceId=race_id, code=c, terms=terms, maxUses=1, shards=[1], createdAt=created) for c in codes
        ]
        audit = self._audit.item(
            director, race_id, "code.bulk", request.prefix, count=request.count, **_described(terms)
        )
        try:
            self._store.create(stored, audit)
        except CodeExists as exc:  # a random code equal to an existing one: the batch is refused whole
            raise CodeTaken(f"Codes {', '.join(exc.codes)} exist already; ask again.") from exc
        return codes

    def list(self, director: Director, race_id: str) -> CodeList:
        self._races.owned(director, race_id)
        codes = self._store.of_race(race_id)
        uses = self._store.uses(codes) if codes else {}
        return CodeList(codes=[_view(c, uses.get(c.code, 0)) for c in sorted(codes, key=lambda c: c.code)])


class Discounts:
    """The runner's side: apply a code to a held place, or remove it."""

    def __init__(self, store: CodeStore, holds: DynamoHolds, catalog: RaceDefinitions) -> None:
        self._store = store
        self._holds = holds
        self._catalog = catalog

    def apply(self, hold_id: str, typed: str, now: datetime | None = None) -> Hold:
        now = now or datetime.now(UTC)
        hold = self._held(hold_id, now)
        if hold.is_team:  # a team's one payment is shared equally: one member's code has no share to take from
            raise CodeError(
                "Discount codes apply to single entries, not to a team's places.", fields={"code": "Not for teams."}
            )
        code = typed.strip().upper()
        stored = self._store.get(hold.raceId, code)
        if stored is None:
            raise CodeUnknown(f"There is no code {code} for this race.", fields={"code": "Unknown code."})
        terms = stored.terms
        if terms.validFrom and now < terms.validFrom:
            raise CodeNotYetValid(
                f"Code {code} can be used from {terms.validFrom.isoformat()}.", fields={"code": "Not valid yet."}
            )
        if terms.validTo and now >= terms.validTo:
            raise CodeExpired(f"Code {code} expired at {terms.validTo.isoformat()}.", fields={"code": "Expired."})
        if terms.eventIds and hold.eventId not in terms.eventIds:
            raise CodeNotForEvent(f"Code {code} is not valid for this event.", fields={"code": "Not for this event."})
        if hold.code == code:
            return hold
        list_cents, currency = self._list_price(hold)
        price = discounted(list_cents, currency, terms)
        problem = charge_problem(price, currency) if price > 0 else None
        if problem is not None:
            raise CodeError(
                f"With code {code} this place would cost {in_units(price, currency)} {currency}, less than the "
                "payment provider can charge; the race director can fix the code.",
                fields={"code": problem},
            )
        shards = stored.shard_names()
        for shard in random.sample(shards, len(shards)):
            try:
                self._holds.change_code(hold, code, shard, price, list_cents, now)
            except ConditionFailed as exc:
                if exc.first == 0:
                    raise self._moved(hold_id, now) from exc
                continue  # this shard's uses are gone: another may have one left
            metrics.add_metric(name="CodeApplied", unit="Count", value=1)
            return hold.model_copy(
                update={"code": code, "codeShard": shard, "amountCents": price, "listCents": list_cents}
            )
        metrics.add_metric(name="CodeUsedUp", unit="Count", value=1)
        raise CodeUsedUp(f"Code {code} has been used as often as it may be.", fields={"code": "Used up."})

    def remove(self, hold_id: str, now: datetime | None = None) -> Hold:
        now = now or datetime.now(UTC)
        hold = self._held(hold_id, now)
        if not hold.code:
            return hold
        list_cents, _ = self._list_price(hold)
        try:
            self._holds.change_code(hold, None, None, list_cents, list_cents, now)
        except ConditionFailed as exc:
            raise self._moved(hold_id, now) from exc
        return hold.model_copy(update={"code": None, "codeShard": None, "amountCents": list_cents, "listCents": None})

    def _held(self, hold_id: str, now: datetime) -> Hold:
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if (hold.status == HoldPhase.HELD and hold.expired(now)) or hold.status in (
            HoldPhase.EXPIRED,
            HoldPhase.RELEASED,
        ):
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")
        if hold.status != HoldPhase.HELD:
            raise CodeTooLate("A code is applied before your details are sent; this place is already being paid for.")
        return hold

    def _moved(self, hold_id: str, now: datetime) -> DomainError:
        """The hold changed between reading and writing: say what it is now."""
        try:
            self._held(hold_id, now)
        except DomainError as exc:
            return exc
        return Conflict("Your place changed meanwhile (a code applied from another tab?); please try again.")

    def _list_price(self, hold: Hold) -> tuple[int, str]:
        """The price before any code: fixed on the hold when the place was taken."""
        if hold.amountCents is not None and hold.currency:
            return (hold.listCents if hold.code and hold.listCents is not None else hold.amountCents), hold.currency
        _race, events = self._catalog.definition(hold.raceId)
        event = next(e for e in events if e.eventId == hold.eventId)
        return event.price_at(hold.createdAt), event.currency


def _random_part() -> str:
    return "".join(secrets.choice(BULK_ALPHABET) for _ in range(BULK_RANDOM))


def _described(terms: CodeTerms) -> dict[str, Any]:
    return terms.model_dump(mode="json", exclude_none=True)


def _view(c: StoredCode, uses: int) -> CodeView:
    t = c.terms
    return CodeView(
        code=c.code,
        kind=t.kind,
        percent=t.percent,
        amountCents=t.amountCents,
        eventIds=t.eventIds,
        validFrom=t.validFrom,
        validTo=t.validTo,
        maxUses=c.maxUses,
        uses=uses,
        note=t.note,
        createdAt=c.createdAt,
    )
