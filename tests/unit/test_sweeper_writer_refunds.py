"""The sweeper, the writer and cancellations on fakes: every branch, in milliseconds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from racecap.errors import Busy, Conflict, RefundFailed, RegistrationNotFound
from racecap.holds.models import Hold, HoldPhase
from racecap.holds.service import hold_id_for
from racecap.payments.port import IntentNotCancelable, IntentStatus, PaymentRejected, PaymentUnavailable
from racecap.races.catalog import sold_out_flag
from racecap.registration import writer as writer_module
from racecap.registration.models import RegistrationPhase
from racecap.registration.service import REQUEUE_AFTER
from racecap.registration.store import CounterMoved, DuplicateRegistration
from racecap.registration.sweeper import THREE_DS_EXTENSION, HoldSweeper

from tests.fakes.catalog import open_race
from tests.unit.core_world import DIRECTOR, World, request

LATER = datetime.now(UTC) + timedelta(minutes=30)


@pytest.fixture
def world() -> World:
    w = World()
    w.race(caps=(3,))
    return w


def _hold(world: World) -> str:
    return world.hold_service.hold("race-1", "ev0").holdId


def _stranded(world: World, card: str | None = "pm_card_visa", email: str = "ann@example.com") -> Hold:
    """A runner who sent the details, paid in the browser (or not: ``card=None``) and closed the tab."""
    hold_id = _hold(world)
    world.registration.register(hold_id, request(email, card=None))
    hold = world.holds.get(hold_id)
    if card is not None:
        world.payments.confirm_intent(hold.intentId, payment_method=card, idempotency_key=f"browser-{hold_id}")
    return hold


# -- the sweeper ------------------------------------------------------------------------------
def test_expired_held_places_go_back_and_clear_sold_out(world):
    hold_id = _hold(world)
    world.flags.flag(sold_out_flag("race-1", "ev0"), 5)
    assert world.sweeper.sweep(LATER) == {"released": 1, "recovered": 0, "abandoned": 0, "waiting": 0, "resent": 0}
    assert world.holds.get(hold_id).status == HoldPhase.EXPIRED
    assert world.tables.taken("race-1", "ev0") == 0 and not world.flags.flags
    assert world.sweeper.sweep(LATER)["released"] == 0


def test_a_switchs_hold_is_settled_by_the_switches_not_released_by_the_sweeper(world):
    hold_id = _hold(world)
    with world.tables.lock:  # the switch's own kind of hold (ledger.switch): its upgrade may be paid
        world.tables.holds[hold_id] = world.tables.holds[hold_id].model_copy(update={"switchOf": "reg-1"})
    asked: list[str] = []

    def settle(hold: Hold, now: datetime) -> str | None:
        asked.append(hold.holdId)
        return "waiting"

    assert world.sweeper.sweep(LATER, switches=settle)["waiting"] == 1
    assert asked == [hold_id] and world.holds.get(hold_id).status == HoldPhase.HELD
    assert world.sweeper.sweep(LATER)["released"] == 1  # no switches given (an older caller): released as held


def test_a_hold_not_yet_expired_is_left_alone(world):
    hold_id = _hold(world)
    world.registration.register(_hold(world), request(card=None))
    assert world.sweeper.sweep() == {"released": 0, "recovered": 0, "abandoned": 0, "waiting": 0, "resent": 0}
    assert world.holds.get(hold_id).status == HoldPhase.HELD


def test_a_paid_runner_who_closed_the_tab_is_queued_not_freed(world):
    hold = _stranded(world)
    assert world.sweeper.sweep(LATER)["recovered"] == 1
    (message,) = world.queue.sent
    assert (message.registrationId, message.chargeId) == (hold.registrationId, world.payments.succeeded[0].id)
    assert world.holds.get(hold.holdId).status == HoldPhase.QUEUED
    assert world.write_queued() == []
    assert world.regs.get(hold.registrationId).bib == 1
    assert world.payments.refunds == []


def test_an_unpaid_intent_is_cancelled_before_place_and_email_are_freed(world):
    hold = _stranded(world, card=None)
    assert world.sweeper.sweep(LATER)["abandoned"] == 1
    assert world.payments.intents[0].status == IntentStatus.CANCELED  # no browser can charge it now
    assert world.holds.get(hold.holdId).status == HoldPhase.EXPIRED
    assert world.tables.taken("race-1", "ev0") == 0
    assert world.registration.register(_hold(world), request()).status == "QUEUED"  # the email is free


def test_a_declined_intent_is_cancelled_then_freed(world):
    hold = _stranded(world, card="pm_card_chargeDeclined")
    assert world.sweeper.sweep(LATER)["abandoned"] == 1
    assert world.holds.get(hold.holdId).status == HoldPhase.EXPIRED


def test_an_intent_whose_creation_answer_was_lost_leaves_the_hold_held_and_its_place_is_released(world):
    hold_id = _hold(world)
    world.payments.fail_after_next = 1  # created, but the answer was lost: nothing written
    with pytest.raises(Busy):
        world.registration.register(hold_id, request(card=None))
    assert (world.holds.get(hold_id).status, world.holds.get(hold_id).intentId) == (HoldPhase.HELD, None)
    assert world.sweeper.sweep(LATER)["released"] == 1  # its client secret was never handed out
    assert world.tables.taken("race-1", "ev0") == 0


def test_a_paying_hold_with_no_intent_recorded_has_it_found_by_its_metadata(world):
    """Holds that began paying before the begin recorded the intent (issue 38) recorded it
    after: one whose call crashed in between is PAYING with none, and the provider is asked."""
    hold_id = _hold(world)
    world.registration.register(hold_id, request(card=None))
    world.tables.holds[hold_id] = world.tables.holds[hold_id].model_copy(update={"intentId": None})
    assert world.sweeper.sweep(LATER)["abandoned"] == 1
    assert world.payments.intents[0].status == IntentStatus.CANCELED


def test_a_payment_waiting_for_3d_secure_is_extended_once_then_cancelled(world):
    hold = _stranded(world, card="pm_card_authenticationRequired")
    assert world.sweeper.sweep(hold.expiresAt + timedelta(seconds=1))["waiting"] == 1
    extended = world.holds.get(hold.holdId)
    assert extended.extended and extended.expiresAt == hold.expiresAt + timedelta(seconds=1) + THREE_DS_EXTENSION
    assert world.sweeper.sweep(hold.expiresAt + timedelta(seconds=2))["waiting"] == 0  # not due again yet
    assert world.sweeper.sweep(extended.expiresAt + timedelta(seconds=1))["abandoned"] == 1  # once only
    assert world.payments.intents[0].status == IntentStatus.CANCELED


def test_a_payment_still_processing_is_asked_again_later(world):
    hold = _stranded(world, card=None)
    world.payments.put_intent(replace(world.payments.intents[0], status=IntentStatus.PROCESSING))
    assert world.sweeper.sweep(LATER)["waiting"] == 1
    assert world.holds.get(hold.holdId).status == HoldPhase.PAYING


def test_a_payment_that_succeeds_while_being_cancelled_is_queued(world, monkeypatch):
    hold = _stranded(world, card=None)
    paid = replace(world.payments.intents[0], status=IntentStatus.SUCCEEDED)

    def too_late(intent_id: str, *, idempotency_key: str):
        raise IntentNotCancelable(paid)

    monkeypatch.setattr(world.payments, "cancel_intent", too_late)
    assert world.sweeper.sweep(LATER)["recovered"] == 1
    assert world.queue.sent[0].chargeId == paid.id
    assert world.holds.get(hold.holdId).status == HoldPhase.QUEUED


def test_an_unreachable_provider_means_ask_again_never_guess(world):
    hold = _stranded(world)
    world.payments.rate_limit_next = 1
    assert world.sweeper.sweep(LATER)["waiting"] == 1
    assert world.holds.get(hold.holdId).status == HoldPhase.PAYING


def test_one_hold_failing_does_not_stop_the_sweep(world, monkeypatch):
    stranded = _stranded(world)
    held = _hold(world)

    def broken(race_id: str):
        raise RuntimeError("catalog down")

    monkeypatch.setattr(world.catalog, "definition", broken)
    counts = world.sweeper.sweep(LATER)
    assert counts["released"] == 1 and counts["recovered"] == 0
    assert world.holds.get(held).status == HoldPhase.EXPIRED
    assert world.holds.get(stranded.holdId).status == HoldPhase.PAYING


def test_an_expiry_wave_is_settled_side_by_side_with_every_outcome_counted_once():
    # The wave after a burst: abandoned payments (provider calls each), paid ones whose tab
    # closed, plain holds; settled on 8 threads, each hold exactly once.
    world = World()
    world.race(caps=(40,))
    paid = [_stranded(world, email=f"paid{i}@example.com") for i in range(10)]
    unpaid = [_stranded(world, card=None, email=f"left{i}@example.com") for i in range(10)]
    held = [_hold(world) for _ in range(15)]
    sweeper = HoldSweeper(world.attempts, world.payments, world.registration, world.catalog, world.flags, workers=8)  # type: ignore[arg-type]
    counts = sweeper.sweep(LATER)
    assert counts == {"released": 15, "recovered": 10, "abandoned": 10, "waiting": 0, "resent": 0}
    assert {world.holds.get(h).status for h in held} == {HoldPhase.EXPIRED}
    assert {world.holds.get(h.holdId).status for h in paid} == {HoldPhase.QUEUED}
    assert {world.payments.retrieve_intent(h.intentId).status for h in unpaid} == {IntentStatus.CANCELED}
    assert sweeper.sweep(LATER)["released"] == 0


def test_a_hold_the_index_still_lists_after_it_moved_on_is_skipped(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request())
    assert world.write_queued() == []
    world.tables.live.add(hold_id)  # the index lags the item
    assert world.sweeper.sweep(LATER) == {"released": 0, "recovered": 0, "abandoned": 0, "waiting": 0, "resent": 0}


# -- the backstop for a lost registration message --------------------------------------------------
def _queued(world: World, email: str = "ann@example.com") -> Hold:
    accepted = world.registration.register(_hold(world), request(email))
    assert accepted.status == "QUEUED"
    hold = world.holds.get(hold_id_for(accepted.registrationId))
    assert hold.status == HoldPhase.QUEUED and hold.requeueAt == hold.queuedAt + REQUEUE_AFTER
    return hold


def _due(hold: Hold) -> datetime:
    """When the sweeper first re-sends a queued hold: its expiry (where the index keeps it), or
    its re-send time if later."""
    assert hold.requeueAt is not None
    return max(hold.expiresAt, hold.requeueAt)


def test_a_paid_registration_whose_message_was_lost_is_sent_again_when_due_and_confirmed_once(world):
    hold = _queued(world)
    world.queue.sent.clear()  # the queue took the message, then lost it
    assert world.sweeper.sweep(_due(hold) - timedelta(seconds=1))["resent"] == 0  # not due yet
    assert world.sweeper.sweep(_due(hold))["resent"] == 1
    (message,) = world.queue.sent
    assert (message.registrationId, message.chargeId, message.email) == (
        hold.registrationId,
        hold.chargeId,
        "ann@example.com",
    )
    assert world.sweeper.sweep(_due(hold))["resent"] == 0  # claimed: not sent twice
    assert world.write_queued() == []
    assert world.regs.get(hold.registrationId).bib == 1
    assert world.holds.get(hold.holdId).status == HoldPhase.CONFIRMED
    # Confirmed: never sent again, however late the sweeper looks.
    assert world.sweeper.sweep(_due(hold) + timedelta(days=3))["resent"] == 0
    assert world.queue.sent == []


def test_a_late_original_and_its_resend_make_one_registration_one_email_and_no_bib_gap(world):
    hold = _queued(world)  # the original is only late, not lost
    assert world.sweeper.sweep(_due(hold))["resent"] == 1
    assert len(world.queue.sent) == 2
    assert world.write_queued() == []
    assert [r.registrationId for r in world.regs.tables.regs.values()] == [hold.registrationId]
    assert len(world.emails.sent) == 1
    later = _queued(world, "bo@example.com")
    assert world.write_queued() == []
    assert world.regs.get(later.registrationId).bib == 2


def test_resends_back_off_so_a_long_backlog_is_not_flooded(world):
    hold = _queued(world)
    first = _due(hold)
    assert world.sweeper.sweep(first)["resent"] == 1
    second = world.holds.get(hold.holdId).requeueAt
    assert second == first + 2 * REQUEUE_AFTER
    assert world.sweeper.sweep(second - timedelta(seconds=1))["resent"] == 0
    assert world.sweeper.sweep(second)["resent"] == 1
    assert world.holds.get(hold.holdId).requeueAt == second + 4 * REQUEUE_AFTER
    assert world.holds.get(hold.holdId).requeues == 2


def test_a_resend_the_queue_refuses_is_tried_again_at_the_next_due_time(world):
    hold = _queued(world)
    world.queue.sent.clear()
    world.queue.fail_next = 1
    assert world.sweeper.sweep(_due(hold))["resent"] == 0  # logged; the sweep goes on
    again = world.holds.get(hold.holdId).requeueAt
    assert world.sweeper.sweep(again)["resent"] == 1
    assert world.write_queued() == []
    assert world.regs.get(hold.registrationId) is not None


def test_a_hold_paid_late_in_its_hold_is_resent_at_its_resend_time_not_at_its_expiry(world):
    """Paid a minute before its expiry: the sweeper finds it there (the index keeps a queued hold
    at its expiry) while the writer may just be slow, so nothing is sent until its re-send time."""
    hold = _queued(world)
    world.queue.sent.clear()  # lost
    late = hold.expiresAt - timedelta(minutes=1)
    world.tables.holds[hold.holdId] = hold.model_copy(update={"queuedAt": late, "requeueAt": late + REQUEUE_AFTER})
    assert world.sweeper.sweep(hold.expiresAt)["resent"] == 0  # found at its expiry: not due
    assert world.queue.sent == []
    assert world.sweeper.sweep(late + REQUEUE_AFTER - timedelta(seconds=1))["resent"] == 0
    assert world.sweeper.sweep(late + REQUEUE_AFTER)["resent"] == 1
    assert world.write_queued() == []
    assert world.holds.get(hold.holdId).status == HoldPhase.CONFIRMED


# -- the writer -------------------------------------------------------------------------------------
def _queue_paid(world: World, n: int) -> list[str]:
    rids = []
    for i in range(n):
        rids.append(world.registration.register(_hold(world), request(f"r{i}@example.com")).registrationId)
    return rids


def test_paid_registrations_get_consecutive_bibs_and_one_email_each(world):
    rids = _queue_paid(world, 3)
    assert world.write_queued() == []
    assert sorted(world.regs.get(r).bib for r in rids) == [1, 2, 3]
    assert sorted(m.dedupKey for m in world.emails.sent) == sorted(f"confirmation:{r}" for r in rids)
    assert world.emails.sent[0].data["bib"] in (1, 2, 3)


def test_a_redelivery_is_confirmed_once_and_its_email_enqueued_again(world):
    (rid,) = _queue_paid(world, 1)
    message = world.queue.sent[0]
    world.write_queued()
    world.queue.sent.extend([message, message])
    assert world.write_queued() == []
    assert world.regs.get(rid).bib == 1 and world.regs.next_bib("race-1", "ev0") == 2
    assert [m.dedupKey for m in world.emails.sent] == [f"confirmation:{rid}"] * 2


def test_a_malformed_message_is_failed_not_dropped(world):
    _queue_paid(world, 1)
    records = [{"messageId": "bad", "body": "{not json"}, {"messageId": "worse", "body": '{"holdId": 1}'}]
    records.append({"messageId": "good", "body": world.queue.sent[0].model_dump_json()})
    assert world.writer.process(records) == ["bad", "worse"]


def test_a_moved_counter_or_a_duplicate_is_retried(world, monkeypatch):
    rids = _queue_paid(world, 2)
    real = world.regs.confirm_batch
    faults = [CounterMoved(), DuplicateRegistration()]

    def flaky(race_id, event_id, first_bib, paid, confirmed_at):
        if faults:
            fault = faults.pop(0)
            if isinstance(fault, DuplicateRegistration):
                real(race_id, event_id, first_bib, paid[:1], confirmed_at)  # another writer took the first
            raise fault
        return real(race_id, event_id, first_bib, paid, confirmed_at)

    monkeypatch.setattr(world.regs, "confirm_batch", flaky)
    assert world.write_queued() == []
    assert sorted(world.regs.get(r).bib for r in rids) == [1, 2]


def test_a_counter_that_keeps_moving_fails_the_batch_for_redelivery(world, monkeypatch):
    _queue_paid(world, 1)

    def always_moved(*args):
        raise CounterMoved()

    monkeypatch.setattr(world.regs, "confirm_batch", always_moved)
    assert world.write_queued() == ["m0"]
    assert writer_module.MAX_TRIES > 1


def test_a_duplicate_batch_that_is_all_done_ends_quietly(world, monkeypatch):
    (rid,) = _queue_paid(world, 1)
    message = world.queue.sent[0]
    world.write_queued()
    monkeypatch.setattr(
        world.regs,
        "existing",
        lambda ids, _calls=[]: _calls.append(1) or ({} if len(_calls) == 1 else {rid: world.tables.regs[rid]}),
    )
    world.queue.sent.append(message)
    assert world.write_queued() == []


# -- cancellations ---------------------------------------------------------------------------------
def _confirmed(world: World) -> str:
    (rid,) = _queue_paid(world, 1)
    world.write_queued()
    world.emails.sent.clear()
    return rid


def _race(world: World):
    return world.catalog.definition("race-1")[0]


def test_a_cancellation_refunds_once_frees_the_place_and_tells_the_runner(world):
    rid = _confirmed(world)
    view = world.cancellations.cancel(DIRECTOR, _race(world), rid, "injured")
    assert (view.status, view.changed, view.amountCents) == ("CANCELLED", True, 2500)
    assert world.tables.taken("race-1", "ev0") == 0
    assert world.catalog.came_back == [("race-1", "ev0")]
    assert world.tables.audit[0]["action"] == "registration.cancel" and world.tables.audit[0]["reason"] == "injured"
    again = world.cancellations.cancel(DIRECTOR, _race(world), rid)
    assert (again.changed, again.refundId) == (False, view.refundId)
    assert len(world.payments.refunds) == 1
    assert [m.dedupKey for m in world.emails.sent] == [f"refund:{rid}"] * 2


def test_a_payment_refunded_elsewhere_still_cancels(world):
    rid = _confirmed(world)
    world.payments.refund(intent_id=world.regs.get(rid).chargeId, idempotency_key="by-hand")
    assert world.cancellations.cancel(DIRECTOR, _race(world), rid).refundId == "refunded-elsewhere"


def test_an_unreachable_provider_leaves_the_cancellation_pending(world):
    rid = _confirmed(world)
    world.payments.fail_next = 1
    with pytest.raises(Busy):
        world.cancellations.cancel(DIRECTOR, _race(world), rid)
    assert world.regs.get(rid).status == RegistrationPhase.CANCELLING
    assert world.cancellations.cancel(DIRECTOR, _race(world), rid).changed  # the retry finishes it


def test_a_refused_refund_changes_nothing(world, monkeypatch):
    rid = _confirmed(world)

    def refuse(**kwargs):
        raise PaymentRejected("charge_disputed", "disputed", 400)

    monkeypatch.setattr(world.payments, "refund", refuse)
    with pytest.raises(RefundFailed, match="charge_disputed"):
        world.cancellations.cancel(DIRECTOR, _race(world), rid)
    assert world.regs.get(rid).status == RegistrationPhase.CONFIRMED
    assert world.tables.taken("race-1", "ev0") == 1


def test_only_this_races_registrations_can_be_cancelled(world):
    rid = _confirmed(world)
    other, _ = open_race("race-2")
    for race, target in ((other, rid), (_race(world), "reg_nope")):
        with pytest.raises(RegistrationNotFound):
            world.cancellations.cancel(DIRECTOR, race, target)


def test_a_registration_without_its_hold_is_an_error(world):
    rid = _confirmed(world)
    world.tables.holds.pop(world.regs.get(rid).holdId)
    with pytest.raises(RuntimeError, match="has no hold"):
        world.cancellations.cancel(DIRECTOR, _race(world), rid)


def test_concurrent_cancellations_end_with_one_refund(world, monkeypatch):
    rid = _confirmed(world)
    real = world.tables.transact
    calls = {"n": 0}

    def racing(items):
        calls["n"] += 1
        if calls["n"] in (1, 3):  # another call commits the same step just before this one
            real(items)
        real(items)

    monkeypatch.setattr(world.cancellations, "_transact", racing)
    assert world.cancellations.cancel(DIRECTOR, _race(world), rid).status == "CANCELLED"
    assert len(world.payments.refunds) == 1


def test_a_registration_that_keeps_changing_is_a_conflict(world, monkeypatch):
    rid = _confirmed(world)
    monkeypatch.setattr(world.cancellations, "_transact", lambda items: None)  # nothing ever sticks
    with pytest.raises(Conflict, match="kept changing"):
        world.cancellations.cancel(DIRECTOR, _race(world), rid)


def test_an_unavailable_provider_is_never_a_rejection():
    assert not issubclass(PaymentUnavailable, PaymentRejected)
