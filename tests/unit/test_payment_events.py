"""PaymentEvents on fakes: webhooks verified and applied once by state, unmatched payments
refunded with an email, outside refunds and disputes, and the scheduled reconciliation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from racecap.errors import InvalidSignature
from racecap.holds.models import HoldPhase
from racecap.ledger.events import NotYet, PaymentEvents, intent_from
from racecap.payments.port import NewIntent, PaymentIntent
from racecap.registration.models import RegistrationPhase

from tests.unit.core_world import DIRECTOR, World, request


@dataclass
class FakeLog:
    applied: dict[str, str] = field(default_factory=dict)
    marked: int | None = None

    def seen(self, event_id: str) -> bool:
        return event_id in self.applied

    def remember(self, event_id: str, event_type: str) -> None:
        self.applied[event_id] = event_type

    def mark(self) -> int | None:
        return self.marked

    def set_mark(self, created: int) -> None:
        self.marked = created


@pytest.fixture
def world() -> World:
    w = World()
    w.race(caps=(3,))
    return w


@pytest.fixture
def log() -> FakeLog:
    return FakeLog()


@pytest.fixture
def events(world: World, log: FakeLog) -> PaymentEvents:
    return PaymentEvents(
        world.payments,
        world.registration,
        world.holds,
        world.cancel_store,
        world.cancellations,
        world.emails,
        log,
        lambda race_id: "Harbor 10K" if race_id == "race-1" else None,
        world.ledger_store,
        world.ledger.provider_refund,
        world.ledger.record_payment,
    )


def _delivery(world: World, kind: str, obj: dict[str, Any], event_id: str = "evt_1") -> tuple[bytes, str]:
    body = json.dumps({"id": event_id, "type": kind, "created": 1, "data": {"object": obj}}).encode()
    return body, world.payments.sign(body)


def _as_event(intent: PaymentIntent) -> dict[str, Any]:
    return {
        "id": intent.id,
        "object": "payment_intent",
        "status": str(intent.status),
        "amount": intent.amount_cents,
        "currency": intent.currency,
        "metadata": dict(intent.metadata),
        "latest_charge": intent.latest_charge,
    }


def _paid_in_browser(world: World, email: str = "ann@example.com") -> tuple[str, PaymentIntent]:
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    world.registration.register(hold_id, request(email, card=None))
    intent_id = world.holds.get(hold_id).intentId
    paid = world.payments.confirm_intent(
        intent_id, payment_method="pm_card_visa", idempotency_key=f"browser-{intent_id}"
    )
    return hold_id, paid


def test_a_bad_or_missing_signature_is_refused_and_changes_nothing(world, events, log):
    hold_id, paid = _paid_in_browser(world)
    body, _ = _delivery(world, "payment_intent.succeeded", _as_event(paid))
    for signature in (None, "t=1,v1=deadbeef", "garbage"):
        with pytest.raises(InvalidSignature):
            events.receive(body, signature)
    assert world.queue.sent == [] and log.applied == {}
    assert world.holds.get(hold_id).status == HoldPhase.PAYING


def test_succeeded_queues_once_and_a_duplicate_costs_nothing(world, events, log):
    hold_id, paid = _paid_in_browser(world)
    body, signature = _delivery(world, "payment_intent.succeeded", _as_event(paid))
    assert events.receive(body, signature) == "queued"
    # The hold is the log (issue 14): the repeat finds it queued, and no event id is written.
    assert events.receive(body, signature) == "already"
    assert log.applied == {}
    other_body, other_sig = _delivery(world, "payment_intent.succeeded", _as_event(paid), "evt_2")
    assert events.receive(other_body, other_sig) == "already"  # the same payment, another event id
    assert len(world.queue.sent) == 1 and world.holds.get(hold_id).status == HoldPhase.QUEUED
    assert world.payments.refunds == []


def test_event_types_racecap_does_not_use_are_acknowledged(world, events, log):
    body, signature = _delivery(world, "customer.created", {"id": "cus_1"})
    assert events.receive(body, signature) == "ignored"
    assert log.applied == {}


def test_a_failed_payment_changes_nothing(world, events):
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    world.registration.register(hold_id, request(card=None))
    intent = world.payments.confirm_intent(
        world.holds.get(hold_id).intentId, payment_method="pm_card_chargeDeclined", idempotency_key="b"
    )
    body, signature = _delivery(world, "payment_intent.payment_failed", _as_event(intent))
    assert events.receive(body, signature) == "declined"
    assert world.holds.get(hold_id).status == HoldPhase.PAYING


def test_a_payment_for_a_released_hold_is_refunded_once_with_an_email(world, events):
    hold_id, paid = _paid_in_browser(world)
    world.attempts.abandon_payment(world.holds.get(hold_id), world.holds.get(hold_id).attempt)
    assert events.succeeded(paid) == "orphan"
    assert events.succeeded(paid) == "orphan"  # again (a duplicate): the refund is not made twice
    assert [r.intent_id for r in world.payments.refunds] == [paid.id]
    mails = [m for m in world.emails.sent if m.kind == "unmatched_refund"]
    assert {m.dedupKey for m in mails} == {f"unmatched-refund:{paid.id}"}
    assert mails[0].to == "ann@example.com" and mails[0].data["raceName"] == "Harbor 10K"
    assert world.queue.sent == []


def test_a_payment_that_is_not_racecaps_is_left_alone(world, events):
    stranger = world.payments.create_intent(
        NewIntent(amount_cents=100, currency="usd", metadata={}, description="elsewhere"), idempotency_key="s"
    )
    paid = world.payments.confirm_intent(stranger.id, payment_method="pm_card_visa", idempotency_key="s2")
    assert events.succeeded(paid) == "ignored"
    assert world.payments.refunds == []


def _registered(world: World) -> tuple[str, PaymentIntent]:
    hold_id, paid = _paid_in_browser(world)
    world.registration.confirm(hold_id)
    assert world.write_queued() == []
    return world.holds.get(hold_id).registrationId, paid


def test_an_outside_refund_cancels_returns_the_place_and_is_audited(world, events):
    rid, paid = _registered(world)
    world.payments.refund(intent_id=paid.id, idempotency_key="dashboard")
    charge = {"id": "ch_1", "payment_intent": paid.id, "metadata": dict(paid.metadata)}
    body, signature = _delivery(world, "charge.refunded", charge)
    assert events.receive(body, signature) == "cancelled"
    reg = world.regs.get(rid)
    assert reg.status == RegistrationPhase.CANCELLED and reg.cancelledBy == "payment-provider"
    assert world.tables.taken("race-1", "ev0") == 0
    assert [e["action"] for e in world.tables.audit] == ["registration.cancel"]
    assert len(world.payments.refunds) == 1  # nothing refunded twice


def _charge(paid: PaymentIntent, refunded: int) -> dict[str, Any]:
    return {
        "id": "ch_1", "payment_intent": paid.id, "metadata": dict(paid.metadata), "amount": paid.amount_cents,
        "amount_refunded": refunded, "refunded": refunded >= paid.amount_cents,
    }  # fmt: skip


def test_racecaps_own_partial_refund_is_recorded_and_the_runner_stays_registered(world, events):
    rid, paid = _registered(world)
    race = world.catalog.definition("race-1")[0]
    world.ledger.refund(DIRECTOR, race, rid, 1000, "late start")
    assert events.apply(_event("charge.refunded", _charge(paid, 1000))) == "recorded"
    world.ledger.refund(DIRECTOR, race, rid, paid.amount_cents - 1000)  # the rest, in part too
    assert events.apply(_event("charge.refunded", _charge(paid, paid.amount_cents))) == "recorded"
    assert world.regs.get(rid).status == RegistrationPhase.CONFIRMED
    assert len(world.payments.refunds) == 2


def test_an_outside_partial_refund_is_flagged_and_leaves_the_runner_registered(world, events):
    rid, paid = _registered(world)
    world.payments.refund(intent_id=paid.id, idempotency_key="dashboard", amount_cents=500)
    assert events.apply(_event("charge.refunded", _charge(paid, 500))) == "flagged"
    reg = world.regs.get(rid)
    assert reg.status == RegistrationPhase.CONFIRMED and len(world.payments.refunds) == 1
    # In the ledger, flagged on the registration (the export), the stats and the audit trail.
    assert (reg.ledgerRefundedCents, reg.outsideRefunds) == (500, 1)
    assert [(e.amountCents, e.actor) for e in world.ledger_store.refunds(rid)] == [(500, "payment-provider")]
    assert world.regs.stats("race-1", reg.eventId)["outsideRefunds"] == 1
    assert [(a["action"], a["amountCents"]) for a in world.tables.audit] == [("registration.refund.outside", 500)]
    # The same refund told again (another delivery, another event id) is recorded once.
    assert events.apply(_event("charge.refunded", _charge(paid, 500))) == "recorded"
    assert world.regs.get(rid).outsideRefunds == 1 and len(world.tables.audit) == 1


def test_an_outside_refund_of_the_rest_after_ours_cancels(world, events):
    rid, paid = _registered(world)
    world.ledger.refund(DIRECTOR, world.catalog.definition("race-1")[0], rid, 1000)
    world.payments.refund(intent_id=paid.id, idempotency_key="dashboard")
    assert events.apply(_event("charge.refunded", _charge(paid, paid.amount_cents))) == "cancelled"
    reg = world.regs.get(rid)
    assert reg.status == RegistrationPhase.CANCELLED
    # The rest, refunded outside, is in the ledger; the cancellation itself refunded nothing.
    assert (reg.ledgerRefundedCents, reg.outsideRefunds, reg.cancelRefund) == (paid.amount_cents, 1, "NONE")
    assert len(world.payments.refunds) == 2


def test_an_outside_refund_after_a_cancellation_without_refund_is_in_the_ledger(world, events):
    rid, paid = _registered(world)
    world.cancellations.cancel(DIRECTOR, world.catalog.definition("race-1")[0], rid, refund="NONE")
    world.payments.refund(intent_id=paid.id, idempotency_key="dashboard")
    assert events.apply(_event("charge.refunded", _charge(paid, paid.amount_cents))) == "cancelled"
    reg = world.regs.get(rid)
    assert (reg.status, reg.ledgerRefundedCents, reg.outsideRefunds) == ("CANCELLED", paid.amount_cents, 1)


def test_a_refund_of_a_registration_still_being_written_is_delivered_again(world, events):
    hold_id, paid = _paid_in_browser(world)
    world.registration.confirm(hold_id)  # queued, not yet written
    charge = {"id": "ch_1", "payment_intent": paid.id, "metadata": dict(paid.metadata)}
    with pytest.raises(NotYet):
        events.apply(_event("charge.refunded", charge))


def test_a_refund_with_no_registration_behind_it_is_ignored(world, events):
    _, paid = _paid_in_browser(world)
    charge = {"id": "ch_1", "payment_intent": paid.id, "metadata": {"holdId": "hold_x", "registrationId": "reg_x"}}
    assert events.apply(_event("charge.refunded", charge)) == "ignored"


def _event(kind: str, obj: dict[str, Any]) -> Any:
    from racecap.payments.port import ProviderEvent

    return ProviderEvent(id="evt_x", type=kind, created=1, data=obj)


def test_a_dispute_is_flagged_on_the_registration(world, events):
    rid, paid = _registered(world)
    dispute = {"id": "dp_1", "payment_intent": paid.id}
    assert events.apply(_event("charge.dispute.created", dispute)) == "flagged"
    assert world.regs.get(rid).disputeId == "dp_1"
    assert events.apply(_event("charge.dispute.created", {"id": "dp_2", "payment_intent": ""})) == "ignored"


def test_a_dispute_before_the_registration_is_written_is_delivered_again(world, events):
    hold_id, paid = _paid_in_browser(world)
    world.registration.confirm(hold_id)
    with pytest.raises(NotYet):
        events.apply(_event("charge.dispute.created", {"id": "dp_1", "payment_intent": paid.id}))


def test_reconciliation_queues_what_no_one_queued_and_remembers_where_it_got_to(world, events, log):
    hold_id, _ = _paid_in_browser(world)  # paid, then the API crashed and no webhook came
    counts = events.reconcile(datetime.now(UTC))
    assert counts == {"queued": 1}
    assert world.holds.get(hold_id).status == HoldPhase.QUEUED and log.marked is not None
    assert events.reconcile(datetime.now(UTC)) == {"already": 1}  # the overlap: applied again, no change
    assert len(world.queue.sent) == 1


def test_reconciliation_reads_the_holds_of_settled_payments_together_not_one_by_one(world, events, log, monkeypatch):
    settled = []
    for n in range(2):  # paid and queued by the browser's confirm, long before the run
        hold_id, _ = _paid_in_browser(world, f"runner{n}@example.com")
        world.registration.confirm(hold_id)
        settled.append(hold_id)
    unqueued, _ = _paid_in_browser(world, "late@example.com")  # paid; the API crashed, no webhook came
    read_one_by_one: list[str] = []
    for store in (world.holds, world.attempts):  # the ledger's reads and the payment step's, one table
        get = store.get
        monkeypatch.setattr(store, "get", lambda hold_id, get=get: read_one_by_one.append(hold_id) or get(hold_id))

    assert events.reconcile(datetime.now(UTC)) == {"already": 2, "queued": 1}

    assert read_one_by_one == [unqueued]  # only the payment that still had work to do
    assert world.holds.get(unqueued).status == HoldPhase.QUEUED
    assert len(world.queue.sent) == 3


def test_reconciliation_is_postponed_when_the_provider_is_busy(world, events, log):
    world.payments.rate_limit_next = 1
    assert events.reconcile() == {"postponed": 1}
    assert log.marked is None


def test_an_intent_from_an_event_reads_its_last_error():
    intent = intent_from(
        {
            "id": "pi_1",
            "status": "requires_payment_method",
            "amount": 2500,
            "currency": "usd",
            "metadata": {"holdId": "h"},
            "last_payment_error": {"code": "card_declined", "decline_code": "insufficient_funds"},
        }
    )
    assert (intent.decline_code, intent.metadata["holdId"]) == ("insufficient_funds", "h")


def test_the_unmatched_refund_email_says_why_and_how_much():
    from racecap.emails.models import EmailMessage
    from racecap.emails.templates import render

    mail = render(
        EmailMessage(
            kind="unmatched_refund",
            dedupKey="unmatched-refund:pi_1",
            to="ann@example.com",
            data={"raceName": "Harbor <10K>", "registrationId": "reg_1", "amountCents": 2500, "currency": "usd"},
        )
    )
    assert mail.subject == "Your payment for Harbor <10K> was refunded: $25.00"
    assert "could not register" in mail.text and "$25.00" in mail.text
    assert "Harbor &lt;10K&gt;" in mail.html


def test_a_payment_of_another_purpose_goes_in_its_registrations_ledger_not_back_as_an_orphan(world, events):
    rid, _ = _registered(world)
    reg = world.regs.get(rid)

    def pay(metadata: dict[str, str], key: str) -> PaymentIntent:
        new = NewIntent(1000, reg.currency, metadata, "upgrade", payment_method="pm_card_visa", confirm=True)
        return world.payments.create_intent(new, idempotency_key=key)

    upgrade = pay({"registrationId": rid, "raceId": reg.raceId, "purpose": "upgrade"}, "up-1")
    body, sig = _delivery(world, "payment_intent.succeeded", _as_event(upgrade), "evt_up")
    assert events.receive(body, sig) == "recorded"
    assert events.receive(body, sig) == "already"  # a redelivery: nothing more
    assert world.ledger.statement(world.regs.get(rid)).chargedCents == reg.amountCents + 1000
    assert world.payments.refunds == []
    stray = pay({"registrationId": "reg_nobody", "raceId": reg.raceId, "purpose": "upgrade"}, "up-2")
    body, sig = _delivery(world, "payment_intent.succeeded", _as_event(stray), "evt_stray")
    assert events.receive(body, sig) == "orphan"
    assert [(r.intent_id, r.amount_cents) for r in world.payments.refunds] == [(stray.id, 1000)]
