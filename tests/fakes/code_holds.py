"""In-memory code writes on a hold (``codes.service.CodeHolds``), on the holds of ``FakeHolds`` and
the same ``FakeTables``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from racecap.holds.models import (
    Hold,
    HoldPhase,
    Reprice,
)

from tests.fakes.stores import FakeHolds


class FakeCodeHolds(FakeHolds):
    # -- discount codes (racecap.codes.service.CodeHolds) ----------------------------------------
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
        t = self.tables

        def ok(h: Hold) -> bool:
            return h.status == HoldPhase.HELD and h.expiresAt > now and h.code == hold.code

        changes: dict[str, Any] = {"amountCents": amount, "code": code, "codeShard": shard}
        changes["listCents"] = list_cents if code else None
        changes["codeEmail"] = email if code else None
        items = [t.hold_item(hold.holdId, ok, **changes)]
        if code is not None and shard is not None:
            items.append(t.code_item(hold.raceId, code, shard, +1))
        if hold.code and hold.codeShard:
            items.append(t.code_item(hold.raceId, hold.code, hold.codeShard, -1))
        t.transact(items)

    def begin_reprice(self, hold: Hold, reprice: Reprice) -> None:
        t = self.tables
        assert hold.attempt is not None
        key = hold.attempt.key

        def ok(h: Hold) -> bool:
            return (
                h.status == HoldPhase.PAYING
                and h.intentId == hold.intentId
                and h.attempt is not None
                and h.attempt.key == key
                and h.reprice is None
                and h.code == hold.code
            )

        items = [t.hold_item(hold.holdId, ok, reprice=reprice)]
        if reprice.code and reprice.shard:
            items.append(t.code_item(hold.raceId, reprice.code, reprice.shard, +1))
        t.transact(items)
