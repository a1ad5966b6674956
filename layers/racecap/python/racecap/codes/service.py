"""Discount codes: directors make them, runners apply them to a held place.

A use is taken with the code's application to the hold (one transaction: the hold's new
price and a conditional write on one shard of the code's counter) and given back when the
hold expires or is released unpaid (``holds.store``: with the place, in the same transaction).
A paid registration keeps its use. The discount is computed once, on the price fixed on the
hold, and rounds in the runner's favour; the hold's ``amountCents`` is then what is charged.

After the card step started (the hold PAYING, its one PaymentIntent created) a code applied
or removed changes that intent's amount through the provider's update call, never a second
intent. Three steps, each safe to repeat and to interleave with the runner paying:

1. record the change on the hold (``Reprice``) and take the new code's use, one conditional
   transaction (no other change under way, the hold still paying with that intent);
2. ask the provider to update the amount, under a key of that change alone;
3. finish: the hold's price and its attempt's (what the payment must equal) become the new
   amount and the replaced code's use goes back — or, if the provider refused (the runner
   paid meanwhile), undo: the new use goes back and the runner is told so (409).

A crash or an unanswered provider call leaves the change recorded: the runner's retry, the
payment's webhook (by the intent's amount) or the sweeper (expiry gives every use back)
settles it. A code that makes a paying place free is refused: see ``Discounts.apply``.
"""

from __future__ import annotations

import math
import random
import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from racecap.aws.transactions import ConditionFailed
from racecap.codes.models import (
    MAX_SHARDS,
    USES_PER_SHARD,
    BulkCodesRequest,
    CodeDraft,
    CodeList,
    CodeTerms,
    CodeUses,
    CodeView,
)
from racecap.codes.store import CodeExists, CodeStore, StoredCode
from racecap.errors import (
    CodeError,
    CodeExpired,
    CodeKept,
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
from racecap.holds.models import Hold, HoldPhase, Reprice
from racecap.holds.snapshots import HoldSnapshots
from racecap.money import charge_problem, decimals, in_units
from racecap.observability import logger, metrics
from racecap.payments.calls import provider_call
from racecap.payments.port import IntentStatus, PaymentProvider, PaymentRejected

if TYPE_CHECKING:
    from racecap.audit.service import AuditTrail
    from racecap.holds.code_tally import CodeTally
    from racecap.models import Director
    from racecap.races.catalog import RaceDefinitions
    from racecap.setup.service import RaceAdmin

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

    def __init__(self, store: CodeStore, races: RaceAdmin, audit: AuditTrail, tally: CodeTally | None = None) -> None:
        self._store = store
        self._races = races
        self._audit = audit
        self._tally = tally  # the stats' copy of code uses: built again with new codes

    def _terms_for(self, director: Director, race_id: str, terms: CodeTerms) -> CodeTerms:
        race, events = self._races.owned(director, race_id)
        known = {e.eventId for e in events}
        unknown = [e for e in terms.eventIds if e not in known]
        if unknown:
            raise ValidationFailed(
                f"The race has no event {unknown[0]}.", fields={"eventIds": f"Unknown event: {', '.join(unknown)}."}
            )
        try:
            return CodeTerms.model_validate(
                terms.in_zone(race.timeZone).model_dump(include=set(CodeTerms.model_fields))
            )
        except ValidationError as exc:  # in UTC, validTo is not after validFrom (only one had an offset)
            raise ValidationFailed(
                "validTo must be after validFrom.", fields={"validTo": "Must be after validFrom."}
            ) from exc

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
        self._made(race_id)
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
        self._made(race_id)
        return codes

    def _made(self, race_id: str) -> None:
        if self._tally is not None:
            self._tally.forget(race_id)

    def list(self, director: Director, race_id: str) -> CodeList:
        self._races.owned(director, race_id)
        codes = self._store.of_race(race_id)
        uses = self._store.uses(codes) if codes else {}
        return CodeList(codes=[_view(c, uses.get(c.code, 0)) for c in sorted(codes, key=lambda c: c.code)])


class CodeHolds(Protocol):
    """The hold writes a code makes (``holds.store.DynamoHolds``; ``tests/fakes``)."""

    def get(self, hold_id: str) -> Hold | None: ...

    def change_code(
        self,
        hold: Hold,
        code: str | None,
        shard: str | None,
        amount: int,
        list_cents: int,
        now: datetime,
        email: str | None = None,
    ) -> None: ...

    def begin_reprice(self, hold: Hold, reprice: Reprice) -> None: ...

    def finish_reprice(self, hold: Hold, reprice: Reprice) -> bool: ...

    def undo_reprice(self, hold: Hold, reprice: Reprice) -> bool: ...


def reprice_key(intent_id: str, change_id: str) -> str:
    """The provider's idempotency key of one change of an intent's amount: a retry of that
    change replays it; another change (even back to an earlier amount) has its own."""
    return f"reprice-{intent_id}-{change_id}"


class Discounts:
    """The runner's side: apply a code to a held place, or remove it; before the details are
    sent (the hold's price) or after, on the card step (the hold's PaymentIntent's amount too)."""

    def __init__(
        self,
        store: CodeStore,
        holds: CodeHolds,
        catalog: RaceDefinitions,
        payments: PaymentProvider,
        hold_hints: HoldSnapshots | None = None,
    ) -> None:
        self._store = store
        self._holds = holds
        self._catalog = catalog
        self._payments = payments
        self._hold_hints = hold_hints

    def apply(self, hold_id: str, typed: str, now: datetime | None = None) -> Hold:
        now = now or datetime.now(UTC)
        hold = self._held(hold_id, now)
        if hold.is_team:  # a team's one payment is shared equally: one member's code has no share to take from
            raise CodeError(
                "Discount codes apply to single entries, not to a team's places.", fields={"code": "Not for teams."}
            )
        code = typed.strip().upper()
        stored = usable(self._store, hold.raceId, hold.eventId, code, now)
        terms = stored.terms
        if hold.code == code:
            return hold
        if hold.guaranteed and not terms.guaranteed:
            raise CodeKept(
                f"This place is one kept for guaranteed entries, held with code {hold.code}: only another "
                f"guaranteed-entry code can replace it, and {code} is not one.",
                fields={"code": "Not a guaranteed entry."},
            )
        if stored.forEmail and hold.attempt is not None and hold.attempt.email != stored.forEmail:
            raise CodeError(
                f"Code {code} is another runner's (a place deferred from last year): it is for their address only.",
                fields={"code": "For another runner's address."},
            )
        list_cents, currency = self._list_price(hold)
        price = discounted(list_cents, currency, terms)
        if price == 0 and hold.status == HoldPhase.PAYING:
            # A free entry takes no card and has no intent (the ledger's rule: no charge), but
            # this hold's intent exists and the runner may be confirming it right now: turning
            # it into a free entry would race that payment (cancel, or refund a charge that got
            # through). So such a code is for the details step only; nothing changes here.
            raise CodeTooLate(
                f"Code {code} makes this place free, and a free place is registered without a card: it can "
                "only be applied before your details are sent. Nothing was changed.",
                fields={"code": "Makes the entry free: apply it before sending your details."},
            )
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
                if hold.status == HoldPhase.PAYING:
                    change = Reprice(
                        changeId=secrets.token_hex(8), code=code, shard=shard, amountCents=price, listCents=list_cents
                    )
                    self._holds.begin_reprice(hold, change)
                else:
                    self._holds.change_code(hold, code, shard, price, list_cents, now, email=stored.forEmail)
            except ConditionFailed as exc:
                if exc.first == 0:
                    raise self._moved(hold_id, now) from exc
                continue  # this shard's uses are gone: another may have one left
            metrics.add_metric(name="CodeApplied", unit="Count", value=1)
            if hold.status == HoldPhase.PAYING:
                return self._complete(hold, change)
            return hold.model_copy(
                update={"code": code, "codeShard": shard, "amountCents": price, "listCents": list_cents,
                        "codeEmail": stored.forEmail}
            )  # fmt: skip
        metrics.add_metric(name="CodeUsedUp", unit="Count", value=1)
        raise CodeUsedUp(f"Code {code} has been used as often as it may be.", fields={"code": "Used up."})

    def remove(self, hold_id: str, now: datetime | None = None) -> Hold:
        now = now or datetime.now(UTC)
        hold = self._held(hold_id, now)
        if not hold.code:
            return hold
        if hold.guaranteed:
            raise CodeKept(
                f"This place is one kept for guaranteed entries, held with code {hold.code}, which it keeps: "
                "release the place instead if you no longer want it."
            )
        list_cents, _ = self._list_price(hold)
        try:
            if hold.status == HoldPhase.PAYING:
                change = Reprice(changeId=secrets.token_hex(8), amountCents=list_cents, listCents=list_cents)
                self._holds.begin_reprice(hold, change)
                return self._complete(hold, change)
            self._holds.change_code(hold, None, None, list_cents, list_cents, now)
        except ConditionFailed as exc:
            raise self._moved(hold_id, now) from exc
        return hold.model_copy(update={"code": None, "codeShard": None, "amountCents": list_cents, "listCents": None})

    def _complete(self, hold: Hold, change: Reprice) -> Hold:
        """Steps 2 and 3 of a change recorded on a paying hold (see the module): the intent's
        amount, then the hold's price; or, refused, the change undone and a 409."""
        intent_id = str(hold.intentId)
        try:
            provider_call(
                lambda: self._payments.update_intent_amount(
                    intent_id, change.amountCents, idempotency_key=reprice_key(intent_id, change.changeId)
                ),
                hold.holdId,
            )
        except PaymentRejected as exc:
            # Refused: the intent was paid (or is being paid, or was cancelled) meanwhile, so
            # its amount never changed. The change goes, its use back with it.
            self._holds.undo_reprice(hold, change)
            logger.info("code change refused by the provider", extra={"holdId": hold.holdId, "code": exc.code})
            metrics.add_metric(name="CodeChangeRefused", unit="Count", value=1)
            if self._cancelled(intent_id):
                raise HoldExpired("Your hold on this place has expired; please hold a new place.") from exc
            raise CodeTooLate(
                "Your payment went through (or ended) before the code could change its amount: the code was not "
                "applied, and you were charged the price shown before it.",
                fields={"code": "Too late: the payment was already made."},
            ) from exc
        if not self._holds.finish_reprice(hold, change):
            # Finished by someone else (the retry of this call, or the payment's webhook, which
            # found the intent's amount to be the new one): the same outcome. Undone: say so.
            now_hold = self._holds.get(hold.holdId)
            if now_hold is None or now_hold.reprice is not None or now_hold.code != change.code:
                raise Conflict("Your place changed meanwhile; please look at it again.")
            return now_hold
        return self._holds.get(hold.holdId) or hold

    def _cancelled(self, intent_id: str) -> bool:
        """Was the refused intent cancelled (the hold expired) rather than paid? Only to say so:
        an unanswered question is answered as paid, the message that asks nothing more."""
        try:
            return self._payments.retrieve_intent(intent_id).status == IntentStatus.CANCELED
        except Exception:
            logger.warning("could not read a refused intent", extra={"intentId": intent_id}, exc_info=True)
            return False

    def _held(self, hold_id: str, now: datetime) -> Hold:
        """The hold a code may change: HELD, or PAYING with its intent created (any code change
        left under way on it settled first)."""
        if self._hold_hints is not None:
            # The price is about to change: the next steps read the hold from the table (the
            # confirm call's snapshot knows nothing of a re-price under way).
            self._hold_hints.forget(hold_id)
        hold = self._holds.get(hold_id)
        if hold is None:
            raise HoldNotFound(f"No hold with id {hold_id}.")
        if (hold.status == HoldPhase.HELD and hold.expired(now)) or hold.status in (
            HoldPhase.EXPIRED,
            HoldPhase.RELEASED,
        ):
            raise HoldExpired("Your hold on this place has expired; please hold a new place.")
        if hold.status == HoldPhase.PAYING:
            if hold.expired(now):
                raise CodeTooLate("The time to pay for this place is up; a code can no longer change its price.")
            if hold.intentId is None or hold.attempt is None:
                raise Conflict("Your details are being processed; please retry in a moment.", retry_after=2)
            if hold.reprice is not None:
                # A change left under way (a crash, the provider not answering): a retry
                # finishes it, with its own key, before anything else is asked.
                try:
                    self._complete(hold, hold.reprice)
                except (CodeTooLate, Conflict):
                    pass  # that change was undone; this call goes on from what the hold is now
                return self._held(hold_id, now)
            return hold
        if hold.status != HoldPhase.HELD:
            raise CodeTooLate("This place is already paid for; a code can no longer change its price.")
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


def usable(store: CodeStore, race_id: str, event_id: str, code: str, now: datetime) -> StoredCode:
    """The race's code ``code`` (in capitals), usable now for the event, or why not."""
    stored = store.get(race_id, code)
    if stored is None:
        raise CodeUnknown(f"There is no code {code} for this race.", fields={"code": "Unknown code."})
    terms = stored.terms
    if terms.validFrom and now < terms.validFrom:
        raise CodeNotYetValid(
            f"Code {code} can be used from {terms.validFrom.isoformat()}.", fields={"code": "Not valid yet."}
        )
    if terms.validTo and now >= terms.validTo:
        raise CodeExpired(f"Code {code} expired at {terms.validTo.isoformat()}.", fields={"code": "Expired."})
    if terms.eventIds and event_id not in terms.eventIds:
        raise CodeNotForEvent(f"Code {code} is not valid for this event.", fields={"code": "Not for this event."})
    return stored


def code_uses(store: CodeStore, tally: CodeTally, race_id: str) -> list[CodeUses]:
    """Uses against limits, per code of the race, for the director's stats: from the copy kept
    as uses move (one Redis read whatever the number of codes), built from the codes and their
    shards when there is none to trust (``holds.code_tally``)."""
    kept = tally.read(race_id)
    if kept is None:
        codes = store.of_race(race_id)
        uses = store.uses(codes) if codes else {}
        limits = {c.code: c.maxUses for c in codes}
        tally.seed(race_id, uses, limits)
    else:
        uses, limits = kept
    return [CodeUses(code=code, used=uses.get(code, 0), limit=limits[code]) for code in sorted(limits)]


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
        guaranteed=t.guaranteed,
        createdAt=c.createdAt,
    )
