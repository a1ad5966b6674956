"""The ledger store's contract: the same cases against the fake and DynamoDB Local, so the
reservation the unit tests rely on (the sum of refunds within the charge, checked in the write
that records the refund) holds on the real table too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from racecap.aws.transactions import ConditionFailed
from racecap.ledger.models import LedgerEntry, RefundPhase

from tests.contract.test_store_ports import _confirm, race  # noqa: F401  (the race fixture)

NOW = datetime.now(UTC).isoformat()


def _refund(key: str, amount: int) -> LedgerEntry:
    return LedgerEntry(
        kind="refund", key=key, providerId="", amountCents=amount, currency="USD", reason="r", actor="dir",
        at=NOW, status=RefundPhase.PENDING,
    )  # fmt: skip


def test_reservations_stop_at_the_charge_and_a_key_is_recorded_once(stores, race):  # noqa: F811
    (reg,) = _confirm(stores, race, 1)  # 2500 charged
    rid, ledger = reg.registrationId, stores.ledger
    assert ledger.refunded_cents(rid) == 0 and ledger.refunds(rid) == []
    stores.transact(ledger.reserve_items(reg, _refund("k1", 1000)))
    stores.transact(ledger.reserve_items(reg, _refund("k2", 1500)))
    with pytest.raises(ConditionFailed) as over:
        stores.transact(ledger.reserve_items(reg, _refund("k3", 1)))
    assert over.value.indexes == [0]  # the sum's condition, not the key's
    with pytest.raises(ConditionFailed) as again:
        stores.transact(ledger.reserve_items(reg, _refund("k1", 0)))
    assert again.value.indexes == [1]  # the key was recorded before
    assert ledger.refunded_cents(rid) == 2500
    assert [(e.key, e.amountCents, e.status) for e in ledger.refunds(rid)] == [
        ("k1", 1000, RefundPhase.PENDING), ("k2", 1500, RefundPhase.PENDING)
    ]  # fmt: skip
    # The registration reads as before, but for the ledger's sum and its count of refunds not
    # answered yet it now carries (no extra read for the export's refunded column and state).
    after = stores.regs.get(rid)
    assert after is not None and (after.ledgerRefundedCents, after.ledgerPending) == (2500, 2)
    assert after.model_copy(update={"ledgerRefundedCents": None, "ledgerPending": None}) == reg


def test_a_release_gives_the_amount_back_once_and_a_settled_refund_keeps_its_id(stores, race):  # noqa: F811
    (reg,) = _confirm(stores, race, 1)
    rid, ledger = reg.registrationId, stores.ledger
    stores.transact(ledger.reserve_items(reg, _refund("k1", 2500)))
    entry = ledger.refund(rid, "k1")
    assert entry is not None
    stores.transact(ledger.release_items(rid, entry, NOW))
    with pytest.raises(ConditionFailed):
        stores.transact(ledger.release_items(rid, entry, NOW))
    assert ledger.refunded_cents(rid) == 0 and ledger.refund(rid, "k1").status == RefundPhase.REFUSED
    assert stores.regs.get(rid).ledgerPending == 0  # refused: pending no more, counted down once
    stores.transact(ledger.reserve_items(reg, _refund("k2", 2500)))
    assert stores.regs.get(rid).ledgerPending == 1
    ledger.settle_reserved(rid, "k2", "re_123", NOW)
    ledger.settle_reserved(rid, "k2", "re_123", NOW)  # a repeat changes nothing
    settled = ledger.refund(rid, "k2")
    assert settled is not None and (settled.status, settled.providerId) == (RefundPhase.SUCCEEDED, "re_123")
    assert ledger.refunded_cents(rid) == 2500 and stores.regs.get(rid).ledgerPending == 0


def test_a_refund_waits_on_the_open_list_until_the_providers_word_and_a_failure_gives_it_back(stores, race):  # noqa: F811
    (reg,) = _confirm(stores, race, 1)
    rid, ledger = reg.registrationId, stores.ledger
    later = "9999-12-31T00:00:00+00:00"
    stores.transact(ledger.reserve_items(reg, _refund("k1", 1000)))
    assert [(r, e.key) for r, e in ledger.open_refunds(later) if r == rid] == [(rid, "k1")]
    assert [r for r, _ in ledger.open_refunds(NOW) if r == rid] == []  # recorded at NOW: not before it
    pending = ledger.refund(rid, "k1")
    stores.transact(ledger.move_items(rid, pending, RefundPhase.PROCESSING, refund_id="re_1", at=NOW))
    processing = ledger.refund(rid, "k1")
    assert (processing.status, processing.providerId) == (RefundPhase.PROCESSING, "re_1")
    assert [e.status for r, e in ledger.open_refunds(later) if r == rid] == [RefundPhase.PROCESSING]
    assert stores.regs.get(rid).ledgerPending == 1  # still waiting
    with pytest.raises(ConditionFailed):  # moved from a state it is no longer in: nothing changes
        stores.transact(ledger.move_items(rid, pending, RefundPhase.SUCCEEDED, refund_id="re_1", at=NOW))
    stores.transact(ledger.move_items(rid, processing, RefundPhase.SUCCEEDED, refund_id="re_1", at=NOW))
    assert [r for r, _ in ledger.open_refunds(later) if r == rid] == []  # off the open list
    after = stores.regs.get(rid)
    assert (after.ledgerRefundedCents, after.ledgerPending) == (1000, 0)
    succeeded = ledger.refund(rid, "k1")
    stores.transact(
        ledger.move_items(rid, succeeded, RefundPhase.FAILED, refund_id="", at=NOW, why="expired_or_canceled_card")
    )
    failed = ledger.refund(rid, "k1")
    assert (failed.status, failed.failureReason, failed.providerId) == (
        RefundPhase.FAILED, "expired_or_canceled_card", "re_1"
    )  # fmt: skip
    after = stores.regs.get(rid)
    assert (after.ledgerRefundedCents, after.ledgerPending, after.refundFailures) == (0, 0, 1)
    assert ledger.refunded_cents(rid) == 0


def test_a_whole_cancellation_reserves_only_on_the_sum_it_read(stores, race):  # noqa: F811
    # FULL reserves all that is left: only while the sum is the one it read (1000 of 2500), so a
    # refund reserved in between (or given back) makes it read again, never refund less or more.
    (reg,) = _confirm(stores, race, 1)
    rid, ledger, regs = reg.registrationId, stores.ledger, stores.cancel_store
    stores.transact(ledger.reserve_items(reg, _refund("k1", 1000)))
    stores.transact(ledger.reserve_items(reg, _refund("k2", 500)))  # in between: the sum is 1500

    def begin(cents: int):
        return regs.begin_cancel_item(rid, NOW, "dir", choice="FULL", refund_cents=cents, charged=2500, whole=True)

    with pytest.raises(ConditionFailed) as moved:
        stores.transact([begin(1500)])  # read at 1000: 1500 was left then
    assert moved.value.indexes == [0] and ledger.refunded_cents(rid) == 1500
    stores.transact([begin(1000)])  # all that is left now
    cancelling = stores.regs.get(rid)
    assert cancelling is not None and (cancelling.status, cancelling.cancelRefundCents) == ("CANCELLING", 1000)
    assert ledger.refunded_cents(rid) == 2500
