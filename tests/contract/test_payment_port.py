"""The payment port's contract: the same cases against the fake and every real adapter,
so the fake the unit tests use cannot drift from the providers it stands for."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from racecap.payments.port import (
    AlreadyRefunded,
    IntentNotCancelable,
    IntentStatus,
    InvalidWebhookSignature,
    NewIntent,
    PaymentIntent,
    PaymentRejected,
    PaymentUnavailable,
)

from tests.contract.payments_ports import PortUnderTest


@pytest.fixture
def hold_id() -> str:
    return f"hold_{uuid.uuid4().hex}"


def _metadata(hold_id: str) -> dict[str, str]:
    return {
        "holdId": hold_id,
        "registrationId": "reg_" + hold_id.removeprefix("hold_"),
        "raceId": "race-1",
        "eventId": "ev-1",
        "email": "ann@example.com",
    }


def _pay(port: PortUnderTest, hold_id: str, card: str = "ok", *, key: str | None = None, amount: int = 2500):
    return port.provider.create_intent(
        NewIntent(
            amount_cents=amount,
            currency="USD",
            metadata=_metadata(hold_id),
            description="Test Race — 10K",
            payment_method=port.cards[card],
            confirm=True,
        ),
        idempotency_key=key or f"charge-{hold_id}",
    )


def test_a_good_card_succeeds_and_reads_back_the_same(payment_port, hold_id):
    intent = _pay(payment_port, hold_id)
    assert intent.status == IntentStatus.SUCCEEDED
    assert (intent.amount_cents, intent.currency) == (2500, "usd")
    assert dict(intent.metadata) == _metadata(hold_id)
    assert intent.decline_code is None
    assert payment_port.provider.retrieve_intent(intent.id) == intent


def test_a_decline_is_a_result_not_an_exception(payment_port, hold_id):
    intent = _pay(payment_port, hold_id, "declined")
    assert intent.status == IntentStatus.REQUIRES_PAYMENT_METHOD
    assert intent.decline_code
    assert not [i for i in payment_port.provider.find_intents(hold_id=hold_id) if i.status == IntentStatus.SUCCEEDED]


def test_an_unknown_card_is_rejected_and_the_key_stays_usable(payment_port, hold_id):
    with pytest.raises(PaymentRejected):
        _pay(payment_port, hold_id, "invalid")
    assert payment_port.provider.find_intents(hold_id=hold_id) == []
    # Nothing was stored under the key: the runner fixes the card and retries with it.
    assert _pay(payment_port, hold_id).status == IntentStatus.SUCCEEDED


def test_the_same_key_replays_the_first_answer_and_charges_once(payment_port, hold_id):
    first = _pay(payment_port, hold_id)
    assert _pay(payment_port, hold_id) == first
    assert [i.id for i in payment_port.provider.find_intents(hold_id=hold_id)] == [first.id]


def test_the_same_key_with_other_parameters_is_rejected(payment_port, hold_id):
    first = _pay(payment_port, hold_id)
    with pytest.raises(PaymentRejected):
        _pay(payment_port, hold_id, amount=9900)
    assert [i.id for i in payment_port.provider.find_intents(hold_id=hold_id)] == [first.id]


@pytest.mark.parametrize(("currency", "least"), [("USD", 50), ("EUR", 50), ("GBP", 30), ("JPY", 50)])
def test_an_amount_under_the_currencys_minimum_is_refused_and_charges_nothing(payment_port, hold_id, currency, least):
    """Stripe's minimum per currency, in the currency's API unit (yen for JPY, zero-decimal)."""

    def create(amount: int, key: str) -> PaymentIntent:
        return payment_port.provider.create_intent(
            NewIntent(
                amount_cents=amount, currency=currency, metadata=_metadata(hold_id), description="Test Race — 10K"
            ),
            idempotency_key=key,
        )

    with pytest.raises(PaymentRejected) as exc:
        create(least - 1, f"small-{hold_id}")
    assert exc.value.code == "amount_too_small"
    assert payment_port.provider.find_intents(hold_id=hold_id) == []
    intent = create(least, f"least-{hold_id}")
    assert (intent.amount_cents, intent.currency) == (least, currency.lower())


def test_unavailable_is_never_a_rejection():
    # ``except PaymentRejected`` must never swallow "we don't know whether it charged".
    assert not issubclass(PaymentUnavailable, PaymentRejected)


def test_a_lost_answer_is_found_by_hold_and_replayed_by_key(payment_port, hold_id):
    payment_port.lose_next_answer()
    with pytest.raises(PaymentUnavailable):
        _pay(payment_port, hold_id)
    found = [i for i in payment_port.provider.find_intents(hold_id=hold_id) if i.status == IntentStatus.SUCCEEDED]
    assert len(found) == 1
    assert _pay(payment_port, hold_id) == found[0]


def test_find_intents_names_only_this_holds_intents(payment_port, hold_id):
    mine = [
        _pay(payment_port, hold_id, "declined", key=f"a-{hold_id}"),
        _pay(payment_port, hold_id, key=f"b-{hold_id}"),
    ]
    _pay(payment_port, hold_id + "x")
    found = {i.id: i.status for i in payment_port.provider.find_intents(hold_id=hold_id)}
    assert found == {i.id: i.status for i in mine}


def test_a_refund_is_once_per_key_and_once_per_payment(payment_port, hold_id):
    intent = _pay(payment_port, hold_id)
    refund = payment_port.provider.refund(intent_id=intent.id, idempotency_key=f"refund-{hold_id}")
    assert (refund.intent_id, refund.amount_cents, refund.status) == (intent.id, 2500, "succeeded")
    assert payment_port.provider.refund(intent_id=intent.id, idempotency_key=f"refund-{hold_id}") == refund
    with pytest.raises(AlreadyRefunded):
        payment_port.provider.refund(intent_id=intent.id, idempotency_key=f"refund-{hold_id}-other")


def test_a_partial_refund_takes_its_amount_each_under_its_own_key_never_more_than_charged(payment_port, hold_id):
    intent = _pay(payment_port, hold_id, amount=10_000)
    refund = payment_port.provider.refund
    first = refund(intent_id=intent.id, idempotency_key=f"re-a-{hold_id}", amount_cents=3000)
    assert (first.amount_cents, first.intent_id) == (3000, intent.id)
    assert refund(intent_id=intent.id, idempotency_key=f"re-a-{hold_id}", amount_cents=3000) == first  # a replay
    with pytest.raises(PaymentRejected) as reused:  # one key is never reused with another amount
        refund(intent_id=intent.id, idempotency_key=f"re-a-{hold_id}", amount_cents=2000)
    assert reused.value.code == "idempotency_key_reused"
    second = refund(intent_id=intent.id, idempotency_key=f"re-b-{hold_id}", amount_cents=3000)
    assert second.id != first.id
    with pytest.raises(PaymentRejected) as too_much:
        refund(intent_id=intent.id, idempotency_key=f"re-c-{hold_id}", amount_cents=4001)
    assert too_much.value.code == "amount_too_large"
    rest = refund(intent_id=intent.id, idempotency_key=f"re-d-{hold_id}")  # no amount: all that is left
    assert rest.amount_cents == 4000
    with pytest.raises(AlreadyRefunded):
        refund(intent_id=intent.id, idempotency_key=f"re-e-{hold_id}", amount_cents=1)


def test_a_refund_carries_its_metadata_and_is_found_again_by_listing_the_payments_refunds(payment_port, hold_id):
    """How a refund whose answer was lost is found once the provider may have forgotten its key."""
    intent = _pay(payment_port, hold_id, amount=5000)
    refund = payment_port.provider.refund
    mark = {"registrationId": "reg_1", "refundKey": f"refund-{hold_id}-a"}
    first = refund(intent_id=intent.id, idempotency_key=f"re-a-{hold_id}", amount_cents=1000, metadata=mark)
    second = refund(intent_id=intent.id, idempotency_key=f"re-b-{hold_id}", amount_cents=500)
    assert dict(first.metadata) == mark and second.metadata == {}
    listed = payment_port.provider.list_refunds(intent_id=intent.id)
    assert [(r.id, r.amount_cents, dict(r.metadata)) for r in listed] == [
        (second.id, 500, {}), (first.id, 1000, mark)
    ]  # fmt: skip
    assert payment_port.provider.list_refunds(intent_id=_pay(payment_port, hold_id + "x").id) == []
    assert payment_port.provider.admitted() is not None  # no budget here: the provider itself


def test_a_refund_of_a_pending_refund_card_starts_pending(payment_port, hold_id):
    intent = _pay(payment_port, hold_id, "pendingRefund")
    refund = payment_port.provider.refund(intent_id=intent.id, idempotency_key=f"re-{hold_id}", amount_cents=700)
    assert (refund.status, refund.amount_cents) == ("pending", 700)


def test_a_declined_payment_cannot_be_refunded(payment_port, hold_id):
    intent = _pay(payment_port, hold_id, "declined")
    with pytest.raises(PaymentRejected) as err:
        payment_port.provider.refund(intent_id=intent.id, idempotency_key=f"refund-{hold_id}")
    assert not isinstance(err.value, AlreadyRefunded)


def test_a_succeeded_payment_is_not_cancelable(payment_port, hold_id):
    intent = _pay(payment_port, hold_id)
    with pytest.raises(IntentNotCancelable) as err:
        payment_port.provider.cancel_intent(intent.id, idempotency_key=f"cancel-{hold_id}")
    assert err.value.intent.status == IntentStatus.SUCCEEDED


def test_an_unknown_intent_is_rejected(payment_port):
    with pytest.raises(PaymentRejected):
        payment_port.provider.retrieve_intent("pi_does_not_exist")


# -- what the Stripe flow adds (browser confirmation, cancel, events, webhooks) -----------------
def _create(port: PortUnderTest, hold_id: str) -> PaymentIntent:
    return port.provider.create_intent(
        NewIntent(amount_cents=2500, currency="usd", metadata=_metadata(hold_id), description="Test Race — 10K"),
        idempotency_key=f"intent-{hold_id}",
    )


def test_an_intent_confirmed_later_can_be_declined_then_paid(payment_port, hold_id):
    intent = _create(payment_port, hold_id)
    assert intent.status == IntentStatus.REQUIRES_PAYMENT_METHOD
    assert intent.client_secret
    p = payment_port.provider
    declined = p.confirm_intent(
        intent.id, payment_method=payment_port.cards["declined"], idempotency_key=f"c1-{hold_id}"
    )
    assert (declined.status, bool(declined.decline_code)) == (IntentStatus.REQUIRES_PAYMENT_METHOD, True)
    paid = p.confirm_intent(intent.id, payment_method=payment_port.cards["ok"], idempotency_key=f"c2-{hold_id}")
    assert paid.status == IntentStatus.SUCCEEDED
    assert p.retrieve_intent(intent.id).status == IntentStatus.SUCCEEDED


def test_an_unpaid_intents_amount_is_updated_in_place_and_then_charged(payment_port, hold_id):
    p = payment_port.provider
    intent = _create(payment_port, hold_id)
    updated = p.update_intent_amount(intent.id, 2000, idempotency_key=f"discount-{hold_id}")
    assert (updated.id, updated.amount_cents, updated.status) == (intent.id, 2000, IntentStatus.REQUIRES_PAYMENT_METHOD)
    assert p.update_intent_amount(intent.id, 2000, idempotency_key=f"discount-{hold_id}").amount_cents == 2000
    with pytest.raises(PaymentRejected) as small:
        p.update_intent_amount(intent.id, 49, idempotency_key=f"tiny-{hold_id}")
    assert small.value.code == "amount_too_small"
    assert p.retrieve_intent(intent.id).amount_cents == 2000  # the refusal changed nothing
    paid = p.confirm_intent(intent.id, payment_method=payment_port.cards["ok"], idempotency_key=f"c-{hold_id}")
    assert (paid.status, paid.amount_cents) == (IntentStatus.SUCCEEDED, 2000)


def test_a_paid_intents_amount_cannot_be_updated(payment_port, hold_id):
    paid = _pay(payment_port, hold_id)
    with pytest.raises(PaymentRejected) as exc:
        payment_port.provider.update_intent_amount(paid.id, 1000, idempotency_key=f"late-{hold_id}")
    assert exc.value.code == "payment_intent_unexpected_state"
    assert payment_port.provider.retrieve_intent(paid.id).amount_cents == 2500


def test_an_unpaid_intent_cancels_for_good(payment_port, hold_id):
    intent = _create(payment_port, hold_id)
    canceled = payment_port.provider.cancel_intent(intent.id, idempotency_key=f"cancel-{hold_id}")
    assert canceled.status == IntentStatus.CANCELED
    assert payment_port.provider.retrieve_intent(intent.id).status == IntentStatus.CANCELED


def test_the_events_list_names_each_success_after_the_given_time(payment_port, hold_id):
    since = int(time.time()) - 1
    intent = _pay(payment_port, hold_id)
    events = list(payment_port.provider.list_events(types=["payment_intent.succeeded"], created_after=since))
    assert [e.data["id"] for e in events if e.data["id"] == intent.id] == [intent.id]
    assert all(e.type == "payment_intent.succeeded" and e.created >= since for e in events)


def test_the_events_list_reads_every_page_oldest_first(payment_port, monkeypatch):
    # Pages of two: three successes span two pages (the real adapters walk them by
    # starting_after; the reconciliation needs them all, oldest first).
    from racecap.payments import stripe_provider

    monkeypatch.setattr(stripe_provider, "EVENTS_PAGE_SIZE", 2)
    since = int(time.time()) - 1
    paid = [_pay(payment_port, f"hold_{uuid.uuid4().hex}").id for _ in range(3)]
    events = list(payment_port.provider.list_events(types=["payment_intent.succeeded"], created_after=since))
    ours = [e.data["id"] for e in events if e.data["id"] in paid]
    assert sorted(ours) == sorted(paid)
    assert [e.created for e in events] == sorted(e.created for e in events)


def test_a_webhook_is_accepted_only_with_a_valid_signature(payment_port):
    assert payment_port.sign is not None
    body = {"id": "evt_1", "type": "payment_intent.succeeded", "created": int(time.time())}
    payload = json.dumps({**body, "data": {"object": {"id": "pi_1", "status": "succeeded"}}}).encode()
    event = payment_port.provider.parse_webhook(payload, payment_port.sign(payload))
    assert (event.id, event.type, event.data["id"]) == ("evt_1", "payment_intent.succeeded", "pi_1")
    with pytest.raises(InvalidWebhookSignature):
        payment_port.provider.parse_webhook(payload + b" ", payment_port.sign(payload))
    with pytest.raises(InvalidWebhookSignature):
        payment_port.provider.parse_webhook(payload, None)
