"""In-memory payment attempts on a hold (``registration.attempts.Attempts``), on the holds of
``FakeHolds`` and the same ``FakeTables``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.holds.models import (
    Attempt,
    BeginOutcome,
    EmailClaimPhase,
    Hold,
    HoldPhase,
)
from racecap.places.returns import Freed
from racecap.registration.attempts import MemberEmailTaken, OptionShardFull, email_claims

from tests.fakes.stores import Claim, FakeHolds, fake_item


class FakeAttempts(FakeHolds):
    def begin_payment(
        self, hold: Hold, attempt: Attempt, now: datetime, *, intent_id: str | None = None, take_stock: bool = True
    ) -> BeginOutcome:
        t = self.tables

        def one_intent(h: Hold) -> bool:
            return intent_id is None or h.intentId in (None, intent_id)

        def hold_ok(h: Hold) -> bool:
            fresh = h.status == HoldPhase.HELD and h.expiresAt > now and h.code == hold.code
            same = (
                h.status == HoldPhase.PAYING
                and h.attempt is not None
                and h.attempt.key == attempt.key
                and h.code == hold.code
                and h.reprice is None
            )
            return (fresh or same) and one_intent(h)

        intent = {"intentId": intent_id} if intent_id is not None else {}

        claims = email_claims(hold, attempt)

        def email_item(email: str, rid: str) -> TransactItem:
            def ok() -> bool:
                claim = t.emails.get((hold.raceId, email))
                return claim is None or claim.registrationId == rid

            def claim_email() -> None:
                t.emails[(hold.raceId, email)] = Claim(rid, hold.holdId, hold.eventId, EmailClaimPhase.CLAIMED)

            return fake_item(ok, claim_email)

        stock = t.stock_items(hold, attempt, +1) if take_stock else []

        def fresh_only(h: Hold) -> bool:  # taking stock: only from HELD (see the adapter)
            return h.status == HoldPhase.HELD and h.expiresAt > now and h.code == hold.code and one_intent(h)

        try:
            t.transact(
                [
                    t.hold_item(
                        hold.holdId,
                        fresh_only if stock else hold_ok,
                        status=HoldPhase.PAYING,
                        attempt=attempt,
                        **intent,
                    ),
                    *(email_item(email, rid) for email, rid in claims),
                    *stock,
                ]
            )
        except ConditionFailed as exc:
            if exc.first > len(claims):
                raise OptionShardFull((attempt.stock or [])[exc.first - 1 - len(claims)]) from exc
            if exc.first == 0:
                return BeginOutcome.HOLD_GONE
            if hold.is_team:
                raise MemberEmailTaken(exc.first - 1) from exc
            return BeginOutcome.EMAIL_TAKEN
        return BeginOutcome.STARTED

    def _paying_with(self, attempt: Attempt) -> Callable[[Hold], bool]:
        return lambda h: h.status == HoldPhase.PAYING and h.attempt is not None and h.attempt.key == attempt.key

    def payment_declined(self, hold: Hold, attempt: Attempt) -> None:
        t = self.tables
        t.transact(
            [
                t.hold_item(hold.holdId, self._paying_with(attempt), status=HoldPhase.HELD, attempt=None),
                *self._release_emails(hold, attempt),
                *t.stock_items(hold, attempt, -1),
            ]
        )

    def abandon_payment(self, hold: Hold, attempt: Attempt, *, waitlist: bool = False) -> Freed | None:
        stock = self.tables.stock_items(hold, attempt, -1)
        emails = self._release_emails(hold, attempt)
        return self._move_place(
            hold, self._paying_with(attempt), HoldPhase.EXPIRED, [*emails, *stock], waitlist=waitlist
        )

    def _release_emails(self, hold: Hold, attempt: Attempt) -> list[TransactItem]:
        return [
            self.tables.release_email_item(hold.raceId, email, rid, only_claimed=True)
            for email, rid in email_claims(hold, attempt)
        ]

    def mark_queued(self, hold: Hold, attempt: Attempt, payment_id: str, now: datetime, requeue_at: datetime) -> bool:
        t = self.tables
        try:
            t.transact(
                [
                    t.hold_item(
                        hold.holdId,
                        self._paying_with(attempt),
                        status=HoldPhase.QUEUED,
                        chargeId=payment_id,
                        queuedAt=now,
                        requeueAt=requeue_at,
                    ),
                    *(self._free_client_slots(hold) if attempt.amountCents else []),  # a free entry keeps counting
                ]
            )
        except ConditionFailed:
            return False  # already moved on: the same outcome
        return True

    def extend(self, hold: Hold, until: datetime) -> bool:
        t = self.tables

        def ok(h: Hold) -> bool:
            return h.status == HoldPhase.PAYING and h.expiresAt == hold.expiresAt and not h.extended

        try:
            t.transact([t.hold_item(hold.holdId, ok, expiresAt=until, extended=True)])
        except ConditionFailed:
            return False
        return True

    def await_requeue(self, hold: Hold) -> None:
        with self.tables.lock:
            found = self.tables.holds.get(hold.holdId)
            if found is not None and found.status == HoldPhase.QUEUED and found.requeueAt == hold.requeueAt:
                self.tables.by_requeue.add(hold.holdId)

    def postpone_requeue(self, hold: Hold, until: datetime) -> bool:
        with self.tables.lock:
            found = self.tables.holds.get(hold.holdId)
            if found is None or found.status != HoldPhase.QUEUED or found.requeueAt != hold.requeueAt:
                return False
            if hold.requeueAt is None:
                return False
            self.tables.holds[hold.holdId] = found.model_copy(
                update={"requeueAt": until, "requeues": found.requeues + 1}
            )
            self.tables.by_requeue.add(hold.holdId)
            return True
