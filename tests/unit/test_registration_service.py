"""RegistrationService on fakes: every branch of register and of the waiting screen."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from racecap.errors import (
    Busy,
    Conflict,
    EmailAlreadyRegistered,
    HoldExpired,
    HoldNotFound,
    PaymentDeclined,
    PaymentNotStarted,
    PaymentPending,
    PaymentRefused,
    RegistrationNotFound,
    TooManyHolds,
)
from racecap.holds.models import HoldPhase
from racecap.payments.port import IntentStatus, NewIntent, PaymentUnavailable
from racecap.registration.models import PaidRegistration, RegistrationAccepted
from racecap.registration.status import Backlog, paper_wait_s

from tests.unit.core_world import DIRECTOR, World, request


@pytest.fixture
def world() -> World:
    w = World()
    w.race(caps=(3,))
    return w


def _hold(world: World) -> str:
    return world.hold_service.hold("race-1", "ev0").holdId


def test_given_a_good_card_then_paid_queued_and_charged_once(world):
    hold_id = _hold(world)
    accepted = world.registration.register(hold_id, request())
    assert accepted.status == "QUEUED"
    (message,) = world.queue.sent
    assert isinstance(message, PaidRegistration)
    assert (message.email, message.amountCents, message.eventName) == ("ann@example.com", 2500, "10K")
    hold = world.holds.get(hold_id)
    assert hold is not None and hold.status == HoldPhase.QUEUED and hold.chargeId == message.chargeId
    (intent,) = world.payments.succeeded
    assert dict(intent.metadata) == {
        "holdId": hold_id,
        "registrationId": accepted.registrationId,
        "raceId": "race-1",
        "eventId": "ev0",
        "email": "ann@example.com",
    }
    again = world.registration.register(hold_id, request())  # a repeat: same answer, no new charge
    assert again == accepted
    assert len(world.payments.intents) == 1 and len(world.queue.sent) == 1


def test_a_confirmed_hold_answers_confirmed(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request())
    assert world.write_queued() == []
    assert world.registration.register(hold_id, request()).status == "CONFIRMED"


def test_a_used_hold_refuses_another_runner(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request())
    with pytest.raises(Conflict, match="another registration"):
        world.registration.register(hold_id, request("bo@example.com"))


def test_an_unknown_hold_is_not_found(world):
    with pytest.raises(HoldNotFound):
        world.registration.register("hold_nope", request())


def test_a_released_or_timed_out_hold_has_expired(world):
    released = _hold(world)
    world.hold_service.release(released)
    with pytest.raises(HoldExpired):
        world.registration.register(released, request())
    late = _hold(world)
    with pytest.raises(HoldExpired):
        world.registration.register(late, request(), now=datetime.now(UTC) + timedelta(minutes=11))
    assert world.payments.intents == []


def test_an_email_registered_on_another_hold_is_refused(world):
    world.registration.register(_hold(world), request())
    other = _hold(world)
    with pytest.raises(EmailAlreadyRegistered):
        world.registration.register(other, request())
    assert world.holds.get(other).status == HoldPhase.HELD


def test_a_hold_paying_under_another_email_is_a_conflict(world):
    hold_id = _hold(world)
    assert world.registration.register(hold_id, request(card=None)).status == "PAYMENT_REQUIRED"
    with pytest.raises(Conflict, match="in progress"):
        world.registration.register(hold_id, request("bo@example.com", card="pm_card_visa"))
    # Its intent was created and recorded nowhere: never handed out, never charged.
    assert world.holds.get(hold_id).attempt.email == "ann@example.com"
    assert world.payments.succeeded == [] and world.queue.sent == []


def test_a_provider_that_fails_before_the_payment_began_leaves_the_hold_to_anyone_with_it(world):
    """The intent comes before anything is written: a provider that does not answer leaves
    the hold HELD, as it was, and the next send (this runner's or another's) begins."""
    hold_id = _hold(world)
    world.payments.fail_next = 1
    with pytest.raises(Busy):
        world.registration.register(hold_id, request(card="pm_card_visa"))
    hold = world.holds.get(hold_id)
    assert (hold.status, hold.attempt, hold.intentId) == (HoldPhase.HELD, None, None)
    assert world.registration.register(hold_id, request("bo@example.com")).status == "QUEUED"
    assert len(world.payments.succeeded) == 1


def test_a_hold_gone_meanwhile_but_paid_by_this_runner_answers_its_registration(world, monkeypatch):
    hold_id = _hold(world)
    world.registration.register(hold_id, request())
    queued = world.holds.get(hold_id)
    stale = queued.model_copy(update={"status": HoldPhase.HELD})
    reads = iter([stale, queued])  # read before the payment began, then after it
    monkeypatch.setattr(world.holds, "get", lambda _h: next(reads))
    assert world.registration.register(hold_id, request(card="pm_card_visa")).status == "QUEUED"


def test_a_hold_gone_meanwhile_and_expired_has_expired(world, monkeypatch):
    hold_id = _hold(world)
    held = world.holds.get(hold_id)
    world.hold_service.release(hold_id)
    gone = world.holds.get(hold_id)
    reads = iter([held, gone])
    monkeypatch.setattr(world.holds, "get", lambda _h: next(reads))
    with pytest.raises(HoldExpired):
        world.registration.register(hold_id, request())


def test_a_declined_card_keeps_the_place_and_the_intent(world):
    hold_id = _hold(world)
    with pytest.raises(PaymentDeclined, match="declined"):
        world.registration.register(hold_id, request(card="pm_card_chargeDeclined"))
    hold = world.holds.get(hold_id)
    assert hold.status == HoldPhase.PAYING and hold.intentId is not None and world.queue.sent == []
    # Re-sending the details (a reload) answers the same intent's secret, not the old decline.
    again = world.registration.register(hold_id, request(card=None))
    assert again.status == "PAYMENT_REQUIRED" and again.clientSecret
    assert world.registration.register(hold_id, request()).status == "QUEUED"  # another card works
    assert len(world.payments.intents) == 1 and len(world.payments.succeeded) == 1


def test_a_refused_card_is_a_decline(world):
    hold_id = _hold(world)
    with pytest.raises(PaymentDeclined, match="not accepted"):
        world.registration.register(hold_id, request(card="pm_unknown"))
    assert world.holds.get(hold_id).status == HoldPhase.PAYING and world.queue.sent == []


def test_the_price_is_the_one_fixed_on_the_hold_whatever_the_director_changes_meanwhile(world):
    race, events = world.catalog.races["race-1"]
    held = _hold(world)
    assert (world.holds.get(held).amountCents, world.holds.get(held).currency) == (2500, "USD")
    world.catalog.races["race-1"] = (race, [events[0].model_copy(update={"priceCents": 9900})])
    later = _hold(world)
    assert world.registration.register(held, request()).status == "QUEUED"
    assert world.registration.register(later, request("bo@example.com")).status == "QUEUED"
    assert sorted(i.amount_cents for i in world.payments.succeeded) == [2500, 9900]
    assert sorted(m.amountCents for m in world.queue.sent) == [2500, 9900]


def test_a_hold_taken_before_prices_rode_on_holds_pays_the_events_price(world):
    held = _hold(world)
    world.tables.holds[held] = world.tables.holds[held].model_copy(update={"amountCents": None, "currency": None})
    assert world.registration.register(held, request()).status == "QUEUED"
    assert [i.amount_cents for i in world.payments.succeeded] == [2500]


def test_a_price_the_provider_refuses_is_a_clear_refusal_and_keeps_the_place(world):
    """An event priced under the provider's minimum before prices were checked when set: the
    provider's amount_too_small is a 409 saying so (it was a 500), nothing charged."""
    race, events = world.catalog.races["race-1"]
    world.catalog.races["race-1"] = (race, [events[0].model_copy(update={"priceCents": 49})])
    hold_id = _hold(world)
    with pytest.raises(PaymentRefused, match="amount_too_small") as refused:
        world.registration.register(hold_id, request())
    assert refused.value.status == 409 and refused.value.code == "PAYMENT_REFUSED"
    hold = world.holds.get(hold_id)
    assert (hold.status, hold.attempt, hold.intentId) == (HoldPhase.HELD, None, None)  # nothing written
    assert world.payments.intents == [] and world.queue.sent == []


def test_an_unknown_outcome_keeps_paying_and_the_retry_charges_once(world, monkeypatch):
    hold_id = _hold(world)
    confirm = world.payments.confirm_intent

    def charged_but_the_answer_lost(*args, **kwargs):
        confirm(*args, **kwargs)
        raise PaymentUnavailable("connection reset")

    monkeypatch.setattr(world.payments, "confirm_intent", charged_but_the_answer_lost)
    with pytest.raises(Busy) as busy:
        world.registration.register(hold_id, request())
    assert busy.value.retry_after == 5
    monkeypatch.undo()
    assert world.holds.get(hold_id).status == HoldPhase.PAYING
    assert world.registration.register(hold_id, request()).status == "QUEUED"
    assert len(world.payments.succeeded) == 1


def test_an_intent_whose_creation_answer_was_lost_is_replayed_by_the_retry(world):
    hold_id = _hold(world)
    world.payments.fail_after_next = 1  # created, but the answer was lost
    with pytest.raises(Busy):
        world.registration.register(hold_id, request())
    assert world.holds.get(hold_id).status == HoldPhase.HELD  # nothing written yet
    assert world.registration.register(hold_id, request()).status == "QUEUED"
    assert len(world.payments.intents) == 1 and len(world.payments.succeeded) == 1


def test_a_rate_limited_provider_asks_the_runner_to_come_back(world):
    hold_id = _hold(world)
    world.payments.rate_limit_next = 1
    with pytest.raises(Busy) as busy:
        world.registration.register(hold_id, request())
    assert busy.value.retry_after == 1
    assert world.holds.get(hold_id).status == HoldPhase.HELD  # the intent's creation refused: nothing written
    assert world.registration.register(hold_id, request()).status == "QUEUED"


def test_a_spent_provider_budget_refuses_the_send_before_anything_is_written(world):
    # An opening's peak: the 429's retry finds the hold as it was (no begun payment ended again:
    # two writes a refusal, hundreds of refusals a burst), then goes through.
    hold_id = _hold(world)
    world.payments.budget_refuses = 1
    with pytest.raises(Busy) as busy:
        world.registration.register(hold_id, request())
    assert busy.value.retry_after == 2
    hold = world.holds.get(hold_id)
    assert (hold.status, hold.attempt, world.payments.calls) == (HoldPhase.HELD, None, [])
    assert world.registration.register(hold_id, request()).status == "QUEUED"
    assert len(world.payments.succeeded) == 1


def test_a_payment_waiting_for_3ds_keeps_paying_and_hands_the_secret_back(world):
    hold_id = _hold(world)
    answer = world.registration.register(hold_id, request(card="pm_card_authenticationRequired"))
    assert answer.status == "REQUIRES_ACTION" and answer.clientSecret
    assert world.holds.get(hold_id).status == HoldPhase.PAYING
    assert world.payments.intents[0].status == IntentStatus.REQUIRES_ACTION
    with pytest.raises(PaymentPending):
        world.registration.confirm(hold_id)


# -- the browser confirms: details → client secret → Stripe.js → confirm ---------------------------
def test_details_claim_the_email_and_answer_the_holds_one_intent(world):
    hold_id = _hold(world)
    first = world.registration.register(hold_id, request(card=None))
    assert (first.status, first.amountCents, first.currency) == ("PAYMENT_REQUIRED", 2500, "USD")
    second = world.registration.register(hold_id, request(card=None))  # a second tab
    assert second.clientSecret == first.clientSecret and len(world.payments.intents) == 1
    (intent,) = world.payments.intents
    assert intent.amount_cents == 2500 and world.holds.get(hold_id).intentId == intent.id
    # The email is claimed before any card can be charged: another hold cannot take it.
    with pytest.raises(EmailAlreadyRegistered):
        world.registration.register(_hold(world), request(card=None))


def test_confirm_registers_only_what_the_provider_says_succeeded(world):
    hold_id = _hold(world)
    with pytest.raises(PaymentNotStarted):
        world.registration.confirm(hold_id)
    world.registration.register(hold_id, request(card=None))
    with pytest.raises(PaymentPending):  # the browser has not paid: its word is not taken
        world.registration.confirm(hold_id)
    (intent,) = world.payments.intents
    world.payments.confirm_intent(intent.id, payment_method="pm_card_chargeDeclined", idempotency_key="b1")
    with pytest.raises(PaymentDeclined):
        world.registration.confirm(hold_id)
    world.payments.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="b2")
    assert world.registration.confirm(hold_id).status == "QUEUED"
    assert world.registration.confirm(hold_id).status == "QUEUED"  # a repeat changes nothing
    assert len(world.queue.sent) == 1


def test_a_webhook_and_a_confirm_queue_the_registration_once(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request(card=None))
    (intent,) = world.payments.intents
    paid = world.payments.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="b")
    assert world.registration.payment_succeeded(paid) == "queued"
    assert world.registration.payment_succeeded(paid) == "already"
    assert world.registration.confirm(hold_id).status == "QUEUED"
    assert len(world.queue.sent) == 1


def test_a_late_webhook_after_the_writer_outran_the_api_is_not_an_orphan(world, monkeypatch):
    """The writer confirms the hold before the API's own mark_queued runs (a fast queue): the
    hold never passes through QUEUED with its chargeId, and the webhook must still see it as paid."""
    hold_id = _hold(world)
    monkeypatch.setattr(world.attempts, "mark_queued", lambda *a, **k: None)  # the API is still on its way
    world.registration.register(hold_id, request())
    assert world.write_queued() == []
    hold = world.holds.get(hold_id)
    assert hold.status == HoldPhase.CONFIRMED
    (paid,) = world.payments.succeeded
    assert world.registration.payment_succeeded(paid) == "already"


def test_a_payment_for_a_hold_that_is_gone_is_an_orphan(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request(card=None))
    (intent,) = world.payments.intents
    other = world.payments.create_intent(
        NewIntent(amount_cents=2500, currency="usd", metadata=dict(intent.metadata), description="d"),
        idempotency_key="x",
    )
    paid = world.payments.confirm_intent(other.id, payment_method="pm_card_visa", idempotency_key="c")
    assert world.registration.payment_succeeded(paid) == "orphan"  # not the hold's intent
    gone = replace(paid, metadata={**paid.metadata, "holdId": "hold_gone"})
    assert world.registration.payment_succeeded(gone) == "orphan"
    assert world.queue.sent == []


# -- the waiting screen --------------------------------------------------------------------------
def test_the_waiting_screen_follows_the_registration(world):
    hold_id = _hold(world)
    rid = world.registration.register(hold_id, request()).registrationId
    now = datetime.now(UTC)
    status, retry = world.registration.status(rid, now=now)
    assert (status.status, retry) == ("QUEUED", 1)  # the writer is idle
    _, retry = world.registration.status(rid, now=now + timedelta(seconds=45))
    assert retry == 40  # long past its estimate: the paper's back-off
    world.write_queued()
    status, retry = world.registration.status(rid)
    assert (status.status, status.bib, status.eventName, retry) == ("CONFIRMED", 1, "10K", None)
    assert status.message is None and status.cancelledAt is None


def test_a_cancelled_registration_says_so_and_what_was_refunded(world):
    hold_id = _hold(world)
    rid = world.registration.register(hold_id, request()).registrationId
    world.write_queued()
    race = world.catalog.definition(world.regs.get(rid).raceId)[0]
    world.payments.fail_next = 1  # the refund's answer does not come: the cancellation waits
    with pytest.raises(Busy):
        world.cancellations.cancel(DIRECTOR, race, rid, refund="AMOUNT", amount_cents=1000)
    status, retry = world.registration.status(rid)
    assert (status.status, retry) == ("CANCELLING", None) and "being cancelled" in (status.message or "")
    world.cancellations.cancel(DIRECTOR, race, rid)
    status, _ = world.registration.status(rid)
    assert status.status == "CANCELLED" and status.cancelledAt is not None
    assert status.message is not None and status.message.endswith("Refunded: 10.00 USD.")


def test_a_failed_registration_says_so(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request(card=None))  # the card never came
    hold = world.holds.get(hold_id)
    world.attempts.abandon_payment(hold, hold.attempt)
    status, retry = world.registration.status(hold.registrationId)
    assert (status.status, retry) == ("FAILED", None)
    assert status.message


@pytest.mark.parametrize("rid", ["reg_nope", "nope", None])
def test_unknown_registrations_are_not_found(world, rid):
    if rid is None:  # a hold that never began paying has no registration yet
        rid = "reg_" + _hold(world).removeprefix("hold_")
    with pytest.raises(RegistrationNotFound):
        world.registration.status(rid)


@pytest.mark.parametrize(("seconds", "wait"), [(0, 10), (9, 10), (10, 20), (29, 20), (30, 40), (69, 40), (70, 60)])
def test_the_papers_back_off_schedule_is_the_ceiling(seconds, wait):
    assert paper_wait_s(seconds) == wait


def test_a_duplicate_while_the_first_call_creates_the_intent_replays_it_and_charges_once(world, monkeypatch):
    """No idempotency record and no turn on the hold: a duplicate arriving while the first call
    creates the intent replays the same intent (its key is the request's) and begins the same
    attempt; one intent, one charge, one message, and both answers the same."""
    hold_id = _hold(world)
    create = world.payments.create_intent
    duplicate: list[RegistrationAccepted] = []

    def create_while_a_duplicate_arrives(new, **kwargs):
        monkeypatch.setattr(world.payments, "create_intent", create)  # the duplicate's own call
        duplicate.append(world.registration.register(hold_id, request()))
        return create(new, **kwargs)

    monkeypatch.setattr(world.payments, "create_intent", create_while_a_duplicate_arrives)
    first = world.registration.register(hold_id, request())

    assert first.status == "QUEUED" and duplicate == [first]
    assert len(world.payments.intents) == 1 and len(world.payments.succeeded) == 1 and len(world.queue.sent) == 1
    assert world.registration.register(hold_id, request()) == first  # a late repeat: the same answer


def test_other_details_during_that_call_take_the_hold_first_and_the_first_is_refused(world, monkeypatch):
    """Two runners with one hold's link at once: the first to begin pays; the other's intent is
    recorded nowhere, so it is never handed out or charged."""
    hold_id = _hold(world)
    create = world.payments.create_intent
    other: list[RegistrationAccepted] = []

    def create_while_another_runner_tries(new, **kwargs):
        monkeypatch.setattr(world.payments, "create_intent", create)
        other.append(world.registration.register(hold_id, request("bo@example.com")))
        return create(new, **kwargs)

    monkeypatch.setattr(world.payments, "create_intent", create_while_another_runner_tries)
    with pytest.raises(Conflict, match="another registration"):
        world.registration.register(hold_id, request())
    assert [a.status for a in other] == ["QUEUED"]
    assert world.holds.get(hold_id).attempt.email == "bo@example.com"
    assert len(world.payments.intents) == 2 and len(world.payments.succeeded) == 1 and len(world.queue.sent) == 1


def test_a_failed_call_hands_the_hold_back_to_the_retry_at_once(world):
    hold_id = _hold(world)
    world.payments.rate_limit_next = 1
    with pytest.raises(Busy):
        world.registration.register(hold_id, request())
    hold = world.holds.get(hold_id)
    assert (hold.status, hold.attempt, hold.intentId) == (HoldPhase.HELD, None, None)
    assert world.registration.register(hold_id, request()).status == "QUEUED"
    assert len(world.payments.succeeded) == 1


def test_the_writer_tells_the_waiting_screen_its_pace(world):
    hold_id = _hold(world)
    world.registration.register(hold_id, request())
    assert world.write_queued() == []
    ((confirmed, latency_s),) = world.pace.recorded
    assert confirmed == 1 and 1.4 <= latency_s < 10


def test_a_queued_registrations_wait_follows_the_writers_backlog_and_the_paper_without_it(world):
    hold_id = _hold(world)
    rid = world.registration.register(hold_id, request()).registrationId
    assert world.registration.status(rid)[1] == 1  # an idle writer: ask again in a second
    world.pace.backlog_now = Backlog(waiting=300, per_second=50.0, latency_s=2.0)
    assert world.registration.status(rid)[1] == 6  # 300 ahead at 50 a second
    world.pace.broken = True
    assert world.registration.status(rid)[1] == 10  # the estimate lost: the paper's first step
    world.write_queued()
    assert world.registration.status(rid) == (world.registration.status(rid)[0], None)  # confirmed: no wait


# -- free entries (price 0) -----------------------------------------------------------------------
def test_a_free_entry_is_queued_from_its_details_and_cancelled_without_any_provider_call():
    from tests.unit.core_world import DIRECTOR

    w = World()
    w.race("race-free", caps=(2,), price_cents=0)
    hold_id = w.hold_service.hold("race-free", "ev0").holdId
    accepted = w.registration.register(hold_id, request(card=None))
    assert (accepted.status, accepted.amountCents, accepted.clientSecret) == ("QUEUED", 0, None)
    assert w.write_queued() == []
    reg = w.regs.get(accepted.registrationId)
    assert (reg.status, reg.amountCents, reg.chargeId) == ("CONFIRMED", 0, "")
    # A repeat of the details (a second tab) answers the same, still without the provider.
    assert w.registration.register(hold_id, request(card=None)).status in ("QUEUED", "CONFIRMED")
    assert w.registration.payment_step(hold_id).status == "CONFIRMED"

    race = w.catalog.definition("race-free")[0]
    view = w.cancellations.cancel(DIRECTOR, race, accepted.registrationId)
    assert (view.status, view.refundedCents, view.refundId) == ("CANCELLED", 0, "")
    assert w.tables.taken("race-free", "ev0") == 0
    assert w.payments.calls == []  # no intent, no card step, no refund: the provider never asked


def test_a_free_entry_counts_against_the_clients_hold_limit():
    w = World()
    w.race("race-free", caps=(5,), price_cents=0)
    w.hold_service.hold("race-free", "ev0", limits={"device#d1": 1})
    with pytest.raises(TooManyHolds):
        w.hold_service.hold("race-free", "ev0", limits={"device#d1": 1})


def test_a_free_entry_whose_details_call_stopped_is_abandoned_at_expiry_without_the_provider(monkeypatch):
    w = World()
    w.race("race-free", caps=(2,), price_cents=0)
    hold_id = w.hold_service.hold("race-free", "ev0").holdId
    monkeypatch.setattr(w.registration, "_register_free", lambda *a: (_ for _ in ()).throw(RuntimeError("crash")))
    with pytest.raises(RuntimeError):
        w.registration.register(hold_id, request(card=None))
    assert w.holds.get(hold_id).status == HoldPhase.PAYING
    later = datetime.now(UTC) + timedelta(hours=2)
    w.sweeper.sweep(later)
    assert w.holds.get(hold_id).status != HoldPhase.PAYING and w.payments.calls == []
