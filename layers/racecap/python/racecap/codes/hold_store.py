"""A discount code's writes on a hold (``codes.service.CodeHolds``): changing the code of a held
place, and beginning a re-price of a hold whose payment is under way (finished or undone with the
payment, on ``holds.store.DynamoHolds``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from racecap.aws.transactions import transact
from racecap.holds.code_tally import Move
from racecap.holds.models import (
    Hold,
    HoldPhase,
    Reprice,
)
from racecap.holds.store import DynamoHolds


class DynamoCodeHolds(DynamoHolds):
    def change_code(
        self,
        hold: Hold,
        code: str | None,
        shard: str | None,
        amount: int,
        list_cents: int,
        now: datetime,
        email: str | None = None,
    ) -> None:
        """Put ``code`` (None: no code) on a HELD hold at ``amount``, taking its use on
        ``shard`` and giving back the use of the code the hold was read with, in one
        transaction. ``ConditionFailed``: index 0, the hold moved on (paying, expired, or its
        code changed meanwhile); index 1 with a new code, that shard has no use left."""
        condition = "#s = :held AND expiresAt > :now AND " + (
            "code = :old" if hold.code else "attribute_not_exists(code)"
        )
        vals: dict[str, Any] = {":held": HoldPhase.HELD, ":now": now.isoformat(), ":amount": amount}
        if hold.code:
            vals[":old"] = hold.code
        if code is None:
            expression = "SET amountCents = :amount REMOVE code, codeShard, listCents, codeEmail"
        else:
            expression = "SET amountCents = :amount, code = :code, codeShard = :shard, listCents = :list"
            vals.update({":code": code, ":shard": shard, ":list": list_cents})
            # A personal code names its runner's address (``Hold.codeEmail``); another code, none.
            expression += ", codeEmail = :email" if email else " REMOVE codeEmail"
            if email:
                vals[":email"] = email
        items = [self._update_hold(hold, expression, condition, vals)]
        moves: list[Move] = []
        if code is not None and shard is not None:
            items.append(self.code_take(hold.raceId, code, shard))
            moves.append((hold.raceId, code, 1))
        if hold.code and hold.codeShard:
            items.append(self.code_give_back(hold.raceId, hold.code, hold.codeShard))
            moves.append((hold.raceId, hold.code, -1))
        transact(self._db, items)
        self.tally_codes(moves)

    def begin_reprice(self, hold: Hold, reprice: Reprice) -> None:
        """Record a code change on a PAYING hold whose intent is ``hold.intentId``, taking the
        new code's use on ``reprice.shard``: only while no other change is under way and the
        hold still carries the code it was read with. ``ConditionFailed``: index 0, the hold
        moved on (paid, expired, another change); index 1, that shard has no use left."""
        condition = (
            "#s = :paying AND intentId = :intent AND attempt.#k = :key AND attribute_not_exists(reprice) AND "
            + ("code = :old" if hold.code else "attribute_not_exists(code)")
        )
        assert hold.attempt is not None
        vals: dict[str, Any] = {
            ":paying": HoldPhase.PAYING,
            ":intent": str(hold.intentId),
            ":key": hold.attempt.key,
            ":r": reprice.model_dump(exclude_none=True),
        }
        if hold.code:
            vals[":old"] = hold.code
        items = [self._update_hold(hold, "SET reprice = :r", condition, vals)]
        if reprice.code and reprice.shard:
            items.append(self.code_take(hold.raceId, reprice.code, reprice.shard))
        transact(self._db, items)
        if reprice.code and reprice.shard:
            self.tally_codes([(hold.raceId, reprice.code, 1)])
