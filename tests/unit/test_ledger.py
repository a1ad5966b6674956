"""The payments ledger on fakes: a director's refunds of an amount, never more than was charged
(however many clicks at once), each its own key at the provider, released when it refuses."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from racecap.aws.transactions import ConditionFailed
from racecap.emails.templates import render_refund
from racecap.errors import Busy, Conflict, DomainError, RefundFailed, RegistrationNotFound
from racecap.ledger.models import RefundPhase, ledger_state
from racecap.ledger.service import SETTLE_AFTER, RefundKeyReused, RefundTooLarge
from racecap.payments.port import NewIntent, PaymentRejected, refund_from
from racecap.registration.models import RegistrationPhase

from tests.unit.core_world import DIRECTOR, World, request


@pytest.fixture
def world() -> World:
    w = World()
    w.race(caps=(3,))
    return w


def _confirmed(world: World, email: str = "ann@example.com", card: str = "pm_card_visa") -> str:
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    rid = world.registration.register(hold_id, request(email, card)).registrationId
    assert world.write_queued() == []
    return rid


def _race(world: World):
    return world.catalog.definition("race-1")[0]


def test_the_entry_payment_is_read_from_the_registration_not_written(world):
    rid = _confirmed(world)
    reg = world.regs.get(rid)
    assert world.ledger_store.entries == {} and world.ledger_store.sums == {}  # the hot path wrote none
    statement = world.ledger.statement(reg)
    (payment,) = statement.entries
    assert (payment.kind, payment.providerId, payment.amountCents, payment.currency, payment.actor) == (
        "payment", reg.chargeId, 2500, reg.currency, "runner"
    )  # fmt: skip
    assert (statement.chargedCents, statement.refundedCents, statement.leftCents) == (2500, 0, 2500)


def test_partial_refunds_each_their_own_key_until_nothing_is_left(world):
    rid = _confirmed(world)
    views = [world.ledger.refund(DIRECTOR, _race(world), rid, 750, "late start") for _ in range(3)]
    assert [v.refund.status for v in views] == [RefundPhase.SUCCEEDED] * 3
    assert len({v.refund.key for v in views}) == 3 and len({v.refund.providerId for v in views}) == 3
    assert views[-1].statement.leftCents == 250
    assert [r.amount_cents for r in world.payments.refunds] == [750, 750, 750]
    with pytest.raises(RefundTooLarge, match=r"2\.50 USD"):
        world.ledger.refund(DIRECTOR, _race(world), rid, 750)
    assert len(world.payments.refunds) == 3  # the refused click reached no provider
    assert world.regs.get(rid).status == RegistrationPhase.CONFIRMED
    assert [a["action"] for a in world.tables.audit if a["target"] == rid] == ["registration.refund"] * 3
    assert world.tables.audit[0]["amountCents"] == 750 and world.tables.audit[0]["reason"] == "late start"


def test_ten_concurrent_clicks_of_30_percent_refund_at_most_the_charge(world):
    rid = _confirmed(world)

    def click(_: int) -> int:
        try:
            world.ledger.refund(DIRECTOR, _race(world), rid, 750)
            return 201
        except DomainError as exc:
            return exc.status

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(click, range(10)))
    assert sorted(answers) == [201] * 3 + [409] * 7
    assert sum(r.amount_cents for r in world.payments.refunds) == 2250  # within the 2500 charged


def test_a_refused_refund_releases_its_reservation(world, monkeypatch):
    rid = _confirmed(world)

    def refuse(**kwargs):
        raise PaymentRejected("charge_disputed", "disputed", 400)

    real = world.payments.refund
    monkeypatch.setattr(world.payments, "refund", refuse)
    with pytest.raises(RefundFailed, match="charge_disputed"):
        world.ledger.refund(DIRECTOR, _race(world), rid, 2500)
    (refused,) = world.ledger_store.refunds(rid)
    assert refused.status == RefundPhase.REFUSED and world.ledger_store.refunded_cents(rid) == 0
    monkeypatch.setattr(world.payments, "refund", real)
    assert world.ledger.refund(DIRECTOR, _race(world), rid, 2500).statement.leftCents == 0


def test_no_answer_keeps_the_amount_reserved_and_the_same_action_resumes(world):
    rid = _confirmed(world)
    reg = world.regs.get(rid)
    world.payments.fail_next = 1
    pending = world.ledger.refund_registration(reg, 2000, "refund-click-1", DIRECTOR, "")
    assert pending.status == RefundPhase.PENDING  # answered 202: settled later, never lost
    assert world.ledger_store.refund(rid, "refund-click-1").status == RefundPhase.PENDING
    # The director's sheet says so while the provider has not answered.
    row = world.regs.get(rid).model_dump()
    assert ledger_state(row) == "REFUND_PENDING"
    with pytest.raises(RefundTooLarge):  # the pending 2000 may have been refunded: 500 is left
        world.ledger.refund(DIRECTOR, _race(world), rid, 1000)
    done = world.ledger.refund_registration(reg, 2000, "refund-click-1", DIRECTOR, "")
    assert done.status == RefundPhase.SUCCEEDED and len(world.payments.refunds) == 1
    assert world.ledger.refund_registration(reg, 2000, "refund-click-1", DIRECTOR, "").providerId == done.providerId
    assert ledger_state(world.regs.get(rid).model_dump()) == "PARTLY_REFUNDED"  # answered: pending no more


def test_only_a_confirmed_registration_of_the_race_is_refunded_in_part(world):
    rid = _confirmed(world)
    with pytest.raises(RegistrationNotFound):
        world.ledger.refund(DIRECTOR, _race(world), "reg_nope", 100)
    with pytest.raises(RefundTooLarge):
        world.ledger.refund(DIRECTOR, _race(world), rid, 2501)
    world.cancellations.cancel(DIRECTOR, _race(world), rid)
    with pytest.raises(Conflict, match="CANCELLED"):
        world.ledger.refund(DIRECTOR, _race(world), rid, 100)


# -- the director's cancellation with a refund choice ----------------------------------------------
def test_a_cancellation_refunds_all_that_is_left_after_earlier_refunds_by_default(world):
    rid = _confirmed(world)
    world.ledger.refund(DIRECTOR, _race(world), rid, 1000, "late start")
    view = world.cancellations.cancel(DIRECTOR, _race(world), rid, "injured")
    assert (view.status, view.refund, view.refundedCents, view.currency) == ("CANCELLED", "FULL", 1500, "USD")
    assert [r.amount_cents for r in world.payments.refunds] == [1000, 1500]
    statement = world.ledger.statement(world.regs.get(rid))
    assert (statement.refundedCents, statement.leftCents) == (2500, 0)
    assert {e.status for e in statement.entries if e.kind == "refund"} == {RefundPhase.SUCCEEDED}
    cancel = next(a for a in world.tables.audit if a["action"] == "registration.cancel")
    assert (cancel["refund"], cancel["refundCents"], cancel["reason"]) == ("FULL", 1500, "injured")
    stats = world.regs.stats("race-1", "ev0")
    assert (stats["refundedCents"], stats["cancelledCents"], stats["revenueCents"]) == (2500, 2500, 0)


def test_a_full_cancellation_refunds_what_a_concurrent_partial_refund_left(world, monkeypatch):
    # Given a partial refund that reserves right after the cancellation read what was left
    rid = _confirmed(world)
    real = world.ledger_store.refunded_cents
    cut_in: list = []

    def read_then_refund(registration_id: str) -> int:
        seen = real(registration_id)
        if not cut_in:
            cut_in.append(None)  # once (the partial refund reads the sum too)
            cut_in[0] = world.ledger.refund(DIRECTOR, _race(world), rid, 700, "late start")
        return seen

    monkeypatch.setattr(world.ledger_store, "refunded_cents", read_then_refund)
    # When the director cancels with FULL, both succeed: FULL is what is left when it reserves
    view = world.cancellations.cancel(DIRECTOR, _race(world), rid, "injured")
    assert (view.status, view.refund, view.refundedCents) == ("CANCELLED", "FULL", 1800)
    assert cut_in[0].refund.status == RefundPhase.SUCCEEDED
    assert [r.amount_cents for r in world.payments.refunds] == [700, 1800]  # the charge, never more
    assert real(rid) == 2500 and world.regs.stats("race-1", "ev0")["refundedCents"] == 2500
    cancel = next(a for a in world.tables.audit if a["action"] == "registration.cancel")
    assert (cancel["refund"], cancel["refundCents"]) == ("FULL", 1800)


def test_a_cancellation_without_refund_asks_no_provider_and_gives_the_place_back(world):
    rid = _confirmed(world)
    view = world.cancellations.cancel(DIRECTOR, _race(world), rid, "no-show rule", refund="NONE")
    assert (view.status, view.refund, view.refundedCents, view.refundId) == ("CANCELLED", "NONE", 0, "")
    assert world.payments.refunds == [] and world.ledger_store.refunds(rid) == []
    assert world.tables.taken("race-1", "ev0") == 0
    assert world.regs.stats("race-1", "ev0")["refundedCents"] == 0
    # The runner is told it was cancelled, and that nothing was refunded (not "0.00 refunded").
    (email,) = [m for m in world.emails.sent if m.kind == "refund"]
    rendered = render_refund(email.data)
    assert "No payment was refunded" in rendered.text and "$" not in rendered.subject
    # A repeat, whatever its body, answers the first call's choice and refunds nothing.
    again = world.cancellations.cancel(DIRECTOR, _race(world), rid, refund="FULL")
    assert (again.changed, again.refund, again.refundedCents) == (False, "NONE", 0)
    assert world.payments.refunds == []


def test_a_cancellation_refunds_an_amount_within_what_is_left_or_changes_nothing(world):
    rid = _confirmed(world)
    world.ledger.refund(DIRECTOR, _race(world), rid, 2000)
    audit_before = len(world.tables.audit)
    with pytest.raises(RefundTooLarge, match=r"5\.00 USD"):
        world.cancellations.cancel(DIRECTOR, _race(world), rid, refund="AMOUNT", amount_cents=501)
    reg = world.regs.get(rid)
    assert (reg.status, reg.cancelRefund, world.ledger_store.refunded_cents(rid)) == ("CONFIRMED", None, 2000)
    assert len(world.tables.audit) == audit_before and len(world.payments.refunds) == 1
    view = world.cancellations.cancel(DIRECTOR, _race(world), rid, refund="AMOUNT", amount_cents=300)
    assert (view.refund, view.refundedCents, view.refundId != "") == ("AMOUNT", 300, True)
    assert [r.amount_cents for r in world.payments.refunds] == [2000, 300]


def test_a_refused_cancellation_refund_releases_its_reservation(world, monkeypatch):
    rid = _confirmed(world)

    def refuse(**kwargs):
        raise PaymentRejected("charge_disputed", "disputed", 400)

    real = world.payments.refund
    monkeypatch.setattr(world.payments, "refund", refuse)
    with pytest.raises(RefundFailed):
        world.cancellations.cancel(DIRECTOR, _race(world), rid, refund="AMOUNT", amount_cents=1000)
    reg = world.regs.get(rid)
    assert (reg.status, reg.cancelRefundKey, world.ledger_store.refunded_cents(rid)) == ("CONFIRMED", None, 0)
    assert [e.status for e in world.ledger_store.refunds(rid)] == [RefundPhase.REFUSED]
    monkeypatch.setattr(world.payments, "refund", real)
    assert world.cancellations.cancel(DIRECTOR, _race(world), rid).refundedCents == 2500  # a new key, all of it


def test_a_cancellation_whose_provider_did_not_answer_resumes_with_its_amount(world):
    rid = _confirmed(world)
    world.payments.fail_next = 1
    with pytest.raises(Busy):
        world.cancellations.cancel(DIRECTOR, _race(world), rid, refund="AMOUNT", amount_cents=700)
    assert world.ledger_store.refunded_cents(rid) == 700  # reserved meanwhile
    with pytest.raises(Conflict, match="CANCELLING"):
        world.ledger.refund(DIRECTOR, _race(world), rid, 1)
    view = world.cancellations.cancel(DIRECTOR, _race(world), rid)  # the retry: the first call's choice
    assert (view.refund, view.refundedCents) == ("AMOUNT", 700)
    assert [r.amount_cents for r in world.payments.refunds] == [700]


def test_a_registrations_detail_shows_the_runner_and_every_payment_and_refund(world):
    rid = _confirmed(world)
    world.ledger.refund(DIRECTOR, _race(world), rid, 500, "late start")
    detail = world.ledger.registration(_race(world), rid)
    assert (detail.registrationId, detail.status, detail.email, detail.amountCents) == (
        rid, "CONFIRMED", "ann@example.com", 2500
    )  # fmt: skip
    assert detail.bib >= 1
    assert [(e.kind, e.amountCents, e.reason) for e in detail.ledger.entries] == [
        ("payment", 2500, "entry"), ("refund", 500, "late start")
    ]  # fmt: skip
    assert detail.ledger.entries[1].actor == DIRECTOR.sub and detail.ledger.leftCents == 2000
    world.cancellations.cancel(DIRECTOR, _race(world), rid, "injured")
    after = world.ledger.registration(_race(world), rid)
    # The cancellation's refund is in the ledger too: all that was left.
    assert after.status == "CANCELLED" and after.cancelledAt is not None and after.refundId
    assert [(e.kind, e.amountCents) for e in after.ledger.entries][1:] == [("refund", 500), ("refund", 2000)]
    assert after.ledger.leftCents == 0


def test_a_registration_of_another_race_is_not_found(world):
    rid = _confirmed(world)
    other = _race(world).model_copy(update={"raceId": "race-2"})
    with pytest.raises(RegistrationNotFound):
        world.ledger.registration(other, rid)
    with pytest.raises(RegistrationNotFound):
        world.ledger.registration(_race(world), "reg_nope")


# -- every refund settles exactly once (issue 37) -------------------------------------------------
def later() -> datetime:
    """The sweeper's next run, past the grace a refund's own request has to be answered."""
    return datetime.now(UTC) + SETTLE_AFTER + timedelta(seconds=1)


def _books(world: World, rid: str) -> tuple[int, int]:
    """(the ledger's sum of refunds, what the provider refunded in all) for one registration."""
    reg = world.regs.get(rid)
    given = sum(r.amount_cents for r in world.payments.refunds if r.intent_id == reg.chargeId and r.status != "failed")
    return world.ledger_store.refunded_cents(rid), given


def test_a_spent_budget_refuses_before_anything_is_reserved_and_the_same_key_then_refunds_once(world):
    rid = _confirmed(world)
    world.payments.budget_refuses = 1
    with pytest.raises(Busy) as spent:
        world.ledger.refund(DIRECTOR, _race(world), rid, 1000, client_key="dialog-0001")
    assert spent.value.retry_after >= 1
    assert world.ledger_store.refunds(rid) == [] and _books(world, rid) == (0, 0)  # nothing reserved, nothing asked
    first = world.ledger.refund(DIRECTOR, _race(world), rid, 1000, client_key="dialog-0001")
    again = world.ledger.refund(DIRECTOR, _race(world), rid, 1000, client_key="dialog-0001")  # a double click
    assert first.refund.status == again.refund.status == RefundPhase.SUCCEEDED
    assert first.refund.providerId == again.refund.providerId and _books(world, rid) == (1000, 1000)
    with pytest.raises(RefundKeyReused):  # the same key for another amount: nothing done
        world.ledger.refund(DIRECTOR, _race(world), rid, 500, client_key="dialog-0001")
    assert _books(world, rid) == (1000, 1000)


@pytest.mark.parametrize("forgotten", [False, True], ids=["key-kept", "key-expired"])
def test_a_lost_answer_is_settled_by_the_sweeper_as_one_refund(world, forgotten):
    rid = _confirmed(world)
    world.payments.fail_after_next = 1  # the provider refunds; its answer never arrives
    view = world.ledger.refund(DIRECTOR, _race(world), rid, 1200, client_key="dialog-lost")
    assert view.refund.status == RefundPhase.PENDING and view.statement.pendingCents == 1200
    assert world.ledger.settle_open() == {}  # within the grace: the request may still be answered
    if forgotten:
        world.payments.forget_keys()  # the provider forgot the key: only the metadata finds it
    assert world.ledger.settle_open(later()) == {"succeeded": 1}
    (entry,) = world.ledger_store.refunds(rid)
    assert entry.status == RefundPhase.SUCCEEDED and entry.providerId == world.payments.refunds[0].id
    assert _books(world, rid) == (1200, 1200) and len(world.payments.refunds) == 1
    assert ledger_state(world.regs.get(rid).model_dump()) == "PARTLY_REFUNDED"  # pending no more
    assert world.ledger.settle_open(later()) == {}  # settled: off the open list


def test_a_refund_the_provider_never_received_is_asked_again_under_its_key(world):
    rid = _confirmed(world)
    world.payments.fail_next = 1  # nothing reached the provider
    assert world.ledger.refund(DIRECTOR, _race(world), rid, 800).refund.status == RefundPhase.PENDING
    world.payments.rate_limit_next = 1  # the sweeper's first look meets the provider's 429: next run
    assert world.ledger.settle_open(later()) == {"waiting": 1}
    assert world.ledger.settle_open(later()) == {"asked-succeeded": 1}
    assert _books(world, rid) == (800, 800) and len(world.payments.refunds) == 1


def test_a_pending_refund_is_processing_until_the_provider_says_it_succeeded(world):
    rid = _confirmed(world, card="pm_card_pendingRefund")
    view = world.ledger.refund(DIRECTOR, _race(world), rid, 900, client_key="dialog-pend")
    assert view.refund.status == RefundPhase.PROCESSING and view.statement.pendingCents == 900
    assert ledger_state(world.regs.get(rid).model_dump()) == "REFUND_PENDING"
    (update,) = world.payments.finish_refunds()  # later, charge.refund.updated: succeeded
    assert world.ledger.provider_refund(refund_from(update.data)) == "refund succeeded"
    assert world.ledger.provider_refund(refund_from(update.data)) == "refund succeeded"  # a redelivery: no change
    assert world.ledger_store.refunds(rid)[0].status == RefundPhase.SUCCEEDED
    assert ledger_state(world.regs.get(rid).model_dump()) == "PARTLY_REFUNDED"


def test_a_refund_that_fails_later_gives_its_amount_back_in_the_ledger_and_the_stats_and_is_audited(world):
    rid = _confirmed(world, card="pm_card_refundFail")
    reg = world.regs.get(rid)
    stats = world.tables.stats[("race-1", reg.eventId)]
    view = world.ledger.refund(DIRECTOR, _race(world), rid, 2500, client_key="dialog-fail")
    assert view.refund.status == RefundPhase.SUCCEEDED and stats["refundedCents"] == 2500
    (update,) = world.payments.finish_refunds()  # later: the card was closed, the refund failed
    assert world.ledger.provider_refund(refund_from(update.data)) == "refund failed"
    (entry,) = world.ledger_store.refunds(rid)
    assert (entry.status, entry.failureReason) == (RefundPhase.FAILED, "expired_or_canceled_card")
    after = world.regs.get(rid)
    assert (after.ledgerRefundedCents, after.refundFailures, stats["refundedCents"]) == (0, 1, 0)
    assert ledger_state(after.model_dump()) == "PAID"
    failed = [a for a in world.tables.audit if a["action"] == "registration.refund.failed"]
    assert [(a["actor"], a["target"], a["amountCents"]) for a in failed] == [("payment-provider", rid, 2500)]
    # The amount can be refunded again (another way, e.g. after the runner gave a new card).
    assert world.ledger.refund(DIRECTOR, _race(world), rid, 2500).statement.leftCents == 0


def test_a_cancellation_whose_answer_was_lost_is_finished_by_the_sweeper(world):
    rid = _confirmed(world)
    world.payments.fail_after_next = 1
    with pytest.raises(Busy):
        world.cancellations.cancel(DIRECTOR, _race(world), rid)
    assert world.regs.get(rid).status == RegistrationPhase.CANCELLING
    world.payments.forget_keys()
    counts = world.ledger.settle_open(later(), resume_cancellation=world.cancellations.after_refund_settled)
    assert counts == {"succeeded": 1}
    assert world.regs.get(rid).status == RegistrationPhase.CANCELLED
    assert _books(world, rid) == (2500, 2500) and len(world.payments.refunds) == 1


# -- several payments per registration ---------------------------------------------------------
def _second_payment(world: World, rid: str, cents: int, purpose: str = "upgrade"):
    reg = world.regs.get(rid)
    metadata = {"registrationId": rid, "raceId": reg.raceId, "purpose": purpose}
    new = NewIntent(cents, reg.currency, metadata, "upgrade", payment_method="pm_card_visa", confirm=True)
    return world.payments.create_intent(new, idempotency_key=f"{purpose}-{rid}")


def test_a_second_payment_is_recorded_once_and_a_refund_goes_back_over_both_newest_first(world):
    rid = _confirmed(world)  # 2500 paid at entry
    upgrade = _second_payment(world, rid, 1000)
    assert world.ledger.record_payment(upgrade) == "recorded"
    assert world.ledger.record_payment(upgrade) == "already"  # the webhook, then reconciliation
    statement = world.ledger.statement(world.regs.get(rid))
    assert (statement.chargedCents, statement.leftCents) == (3500, 3500)
    assert [(e.kind, e.reason, e.amountCents) for e in statement.entries] == [
        ("payment", "entry", 2500), ("payment", "upgrade", 1000)
    ]  # fmt: skip
    view = world.ledger.refund(DIRECTOR, _race(world), rid, 1500, client_key="dialog-split")
    assert [(p.intentId, p.amountCents, p.status) for p in view.parts] == [
        (upgrade.id, 1000, RefundPhase.SUCCEEDED), (world.regs.get(rid).chargeId, 500, RefundPhase.SUCCEEDED)
    ]  # fmt: skip
    by_charge = {r.intent_id: r.amount_cents for r in world.payments.refunds}
    assert by_charge == {upgrade.id: 1000, world.regs.get(rid).chargeId: 500}  # each part on its own charge
    again = world.ledger.refund(DIRECTOR, _race(world), rid, 1500, client_key="dialog-split")  # a repeat
    assert [p.providerId for p in again.parts] == [p.providerId for p in view.parts]
    assert len(world.payments.refunds) == 2
    with pytest.raises(RefundTooLarge):
        world.ledger.refund(DIRECTOR, _race(world), rid, 2001)
    assert world.ledger.refund(DIRECTOR, _race(world), rid, 2000).statement.leftCents == 0


def test_a_payment_naming_no_registration_of_ours_is_an_orphan(world):
    rid = _confirmed(world)
    stray = _second_payment(world, rid, 700)
    assert world.ledger.record_payment(replace(stray, metadata={**stray.metadata, "registrationId": "reg_x"})) == (
        "orphan"
    )
    assert world.ledger.record_payment(replace(stray, currency="jpy")) == "orphan"  # no sum across currencies


def test_a_runners_cancel_asked_under_a_link_replaced_since_cancels_nothing(world):
    """The runner's link was checked, then the place was handed over (its link version bumped)
    before the cancellation began: it must not cancel the new runner's place (CI at 72fbfa2 saw
    both the transfer and the old runner's cancel answer 200). Refused on the re-read, and by the
    write's own condition when the hand-over lands between the read and the write."""
    from racecap.models import Actor
    from racecap.registration.links import LinkRevoked

    rid = _confirmed(world)
    world.tables.regs[rid] = world.regs.get(rid).model_copy(update={"linkVersion": 1})  # handed over
    with pytest.raises(LinkRevoked):
        world.cancellations.cancel(Actor.runner(rid), _race(world), rid, "by the runner", "NONE", 0, link_version=0)
    assert world.regs.get(rid).status == RegistrationPhase.CONFIRMED
    stale = world.cancel_store.begin_cancel_item(rid, "2030-01-01T00:00:00+00:00", "runner", link_version=0)
    current = world.cancel_store.begin_cancel_item(rid, "2030-01-01T00:00:00+00:00", "runner", link_version=1)
    with pytest.raises(ConditionFailed):
        world.tables.transact([stale])
    world.tables.transact([current])
    assert world.regs.get(rid).status == RegistrationPhase.CANCELLING


def test_a_transfer_fee_paid_after_the_cancellation_began_goes_back_once_from_the_cancelled_registration(world):
    """The runner cancelled (refunded the entry in full) while the new runner was paying the
    fee: the fee lands in the ledger after, and goes back on its own, once, on its own charge."""
    rid = _confirmed(world)
    world.cancellations.cancel(DIRECTOR, _race(world), rid)
    assert world.regs.get(rid).status == "CANCELLED"
    fee = _second_payment(world, rid, 800, purpose="transfer_fee")
    assert world.ledger.record_payment(fee) == "recorded"
    key = f"transfer-fee-back-{rid}-1"
    world.ledger.refund_lost_fee(world.regs.get(rid), fee, key)
    world.ledger.refund_lost_fee(world.regs.get(rid), fee, key)  # the webhook, then the confirm call
    assert [(r.intent_id, r.amount_cents) for r in world.payments.refunds if r.intent_id == fee.id] == [(fee.id, 800)]
    statement = world.ledger.statement(world.regs.get(rid))
    assert (statement.chargedCents, statement.refundedCents, statement.leftCents) == (3300, 3300, 0)
    # Nothing left to give (another key, the same money): refused quietly, nothing asked of the provider.
    world.ledger.refund_lost_fee(world.regs.get(rid), fee, f"transfer-fee-back-{rid}-2")
    assert len([r for r in world.payments.refunds if r.intent_id == fee.id]) == 1


@pytest.mark.parametrize("fault", ["fail_next", "rate_limit_next", "fail_after_next"])
def test_a_cancellation_left_half_way_is_finished_by_the_sweeper_and_refunded_once(world, fault):
    rid = _confirmed(world)
    setattr(world.payments, fault, 1)  # nothing reached the provider / its 429 / its answer lost
    with pytest.raises(Busy):
        world.cancellations.cancel(DIRECTOR, _race(world), rid, refund="AMOUNT", amount_cents=1500)
    assert world.regs.get(rid).status == RegistrationPhase.CANCELLING
    assert world.cancellations.finish_open(datetime.now(UTC) - timedelta(minutes=1)) == {}  # too recent
    assert world.cancellations.finish_open(later()) == {"finished": 1}
    assert world.regs.get(rid).status == RegistrationPhase.CANCELLED
    assert [r.amount_cents for r in world.payments.refunds] == [1500]  # once
    assert world.cancellations.finish_open(later()) == {}  # the mark went with the cancellation
    # A cancellation without a refund that stopped half-way is finished the same way.
    other = _confirmed(world, "bo@example.com")
    world.holds.get = _fails_once(world.holds.get)  # a crash between begin and finish
    with pytest.raises(RuntimeError):
        world.cancellations.cancel(DIRECTOR, _race(world), other, refund="NONE")
    assert world.cancellations.finish_open(later()) == {"finished": 1}
    assert world.regs.get(other).status == RegistrationPhase.CANCELLED


def _fails_once(real):
    calls = {"n": 0}

    def get(hold_id):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("injected: the function stopped between the cancellation's steps")
        return real(hold_id)

    return get


def test_any_idempotency_key_names_one_refund(world):
    rid = _confirmed(world)
    odd = "a key with spaces and ünïcode +p2"
    first = world.ledger.refund(DIRECTOR, _race(world), rid, 700, client_key=odd)
    again = world.ledger.refund(DIRECTOR, _race(world), rid, 700, client_key=odd)
    assert first.refund.providerId == again.refund.providerId and len(world.payments.refunds) == 1
    assert "+p2" not in first.refund.key and " " not in first.refund.key  # digested, not copied
