"""In-memory ledger writes on registrations (``ledger.cancel_store.CancelStore``), on the registrations
of ``FakeRegistrations`` and the same ``FakeTables``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from racecap.aws.transactions import TransactItem
from racecap.holds.models import (
    Hold,
    HoldPhase,
)
from racecap.places.returns import Giveback
from racecap.registration.models import (
    Registration,
    RegistrationPhase,
)
from racecap.registration.store import cancelled_by_field

from tests.fakes.stores import FakeRegistrations, fake_item


class FakeCancelStore(FakeRegistrations):
    def open_cancel_item(self, registration_id: str, now: str) -> TransactItem:
        return fake_item(lambda: True, lambda: self.tables.cancel_marks.__setitem__(registration_id, now))

    def close_cancel_item(self, registration_id: str) -> TransactItem:
        return fake_item(lambda: True, lambda: self.tables.cancel_marks.pop(registration_id, None))

    def open_cancels(self, before: str) -> list[str]:
        with self.tables.lock:
            return [rid for rid, at in sorted(self.tables.cancel_marks.items(), key=lambda kv: kv[1]) if at < before]

    def flag_dispute(self, registration_id: str, dispute_id: str, now: str) -> bool:
        with self.tables.lock:
            reg = self.tables.regs.get(registration_id)
            if reg is None:
                return False
            self.tables.regs[registration_id] = reg.model_copy(
                update={"disputeId": dispute_id, "disputedAt": reg.disputedAt or now}
            )
            return True

    def begin_cancel_item(
        self,
        registration_id: str,
        now: str,
        by: str,
        *,
        choice: str | None = None,
        refund_cents: int = 0,
        refund_key: str | None = None,
        charged: int = 0,
        whole: bool = False,
        link_version: int | None = None,
        event_id: str | None = None,
        also: dict[str, Any] | None = None,
    ) -> TransactItem:
        t, rid = self.tables, registration_id

        def ok() -> bool:
            reg = t.regs.get(rid)
            if reg is None or reg.status != RegistrationPhase.CONFIRMED:
                return False
            if link_version is not None and (reg.linkVersion or 0) != link_version:
                return False
            if event_id is not None and reg.eventId != event_id:
                return False
            if not refund_cents:
                return True
            room, summed = charged - refund_cents, t.ledger_sums[rid]
            return reg.amountCents == charged and (summed == room if whole else summed <= room)

        def apply() -> None:
            changes: dict[str, Any] = {
                "status": RegistrationPhase.CANCELLING,
                "cancelRequestedAt": now,
                "cancelledBy": by,
            }
            if choice is not None:
                changes |= {"cancelRefund": choice, "cancelRefundCents": refund_cents}
            if refund_key is not None:
                changes["cancelRefundKey"] = refund_key
            changes |= also or {}
            t.ledger_sums[rid] += refund_cents
            t.regs[rid] = t.regs[rid].model_copy(update=changes | {"ledgerRefundedCents": t.ledger_sums[rid]})

        return fake_item(ok, apply)

    def undo_cancel_item(self, registration_id: str, release_cents: int = 0) -> TransactItem:
        t, rid = self.tables, registration_id

        def apply() -> None:
            t.ledger_sums[rid] -= release_cents
            t.regs[rid] = t.regs[rid].model_copy(
                update={
                    "status": RegistrationPhase.CONFIRMED,
                    "cancelRequestedAt": None,
                    "cancelledBy": None,
                    "cancelRefund": None,
                    "cancelRefundCents": None,
                    "cancelRefundKey": None,
                    "ledgerRefundedCents": t.ledger_sums[rid],
                }
            )

        return fake_item(lambda: rid in t.regs and t.regs[rid].status == RegistrationPhase.CANCELLING, apply)

    def payments_counted_item(self, race_id: str, event_id: str, cents: int) -> TransactItem:
        def count() -> None:
            self.tables.stats[(race_id, event_id)].update(otherPaidCents=cents)

        return fake_item(lambda: True, count)

    def refunds_counted_item(self, race_id: str, event_id: str, cents: int, *, outside: bool = False) -> TransactItem:
        def count() -> None:
            self.tables.stats[(race_id, event_id)].update(refundedCents=cents, outsideRefunds=int(outside))

        return fake_item(lambda: True, count)

    def finish_cancel_items(
        self,
        reg: Registration,
        hold: Hold,
        refund_id: str,
        now: str,
        refunded_cents: int | None = None,
        *,
        place: Giveback | None = None,
    ) -> list[TransactItem]:
        t = self.tables
        rid = reg.registrationId
        refunded = reg.amountCents if refunded_cents is None else refunded_cents

        def count() -> None:
            t.stats[(reg.raceId, reg.eventId)].update(
                confirmed=-1,
                revenueCents=-reg.amountCents,
                cancelled=1,
                refundedCents=refunded,
                cancelledCents=reg.amountCents,
            )
            t.stats[(reg.raceId, reg.eventId)][cancelled_by_field(reg.cancelledBy)] += 1

        return [
            self._reg_item(
                rid,
                RegistrationPhase.CANCELLING,
                status=RegistrationPhase.CANCELLED,
                cancelledAt=now,
                refundId=refund_id,
            ),
            (
                # A team's hold stays CONFIRMED while any member is (as the adapter's).
                t.hold_item(hold.holdId, lambda h: h.status == HoldPhase.CONFIRMED)
                if hold.is_team
                else t.hold_item(
                    hold.holdId,
                    lambda h: h.registrationId == rid and h.status == HoldPhase.CONFIRMED,
                    status=HoldPhase.CANCELLED,
                )
            ),
            *(
                place.items
                if place
                else [t.shard_item(hold, -1, guard=True, shard=reg.shard if hold.is_team else None)]
            ),
            t.release_email_item(reg.raceId, reg.email, rid, only_claimed=False),
            fake_item(lambda: True, count),
            *(
                t.stock_items(hold, replace(hold.attempt, stock=_member_stock(reg, hold)), -1)
                if hold.attempt is not None
                else []
            ),
        ]


def _member_stock(reg: Registration, hold: Hold) -> list[str] | None:
    if hold.attempt is None or not hold.is_team:
        return hold.attempt.stock if hold.attempt else None
    return next((m.stock for m in hold.attempt.team() if m.registrationId == reg.registrationId), None)
