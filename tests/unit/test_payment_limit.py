"""The shared request budget in front of the payment provider, on the fake provider."""

from __future__ import annotations

import pytest
from racecap.payments.budget import LimitedPaymentProvider
from racecap.payments.port import IntentStatus, NewIntent, PaymentIntent, PaymentRateLimited

from tests.fakes.payments import FakePaymentProvider


class Slots:
    """A limiter that hands out the waits it is given, and counts reservations."""

    def __init__(self, *waits: float) -> None:
        self.waits = list(waits)
        self.reserved = 0

    def reserve(self, max_wait_s: float) -> float:
        self.reserved += 1
        return self.waits.pop(0) if self.waits else 0.0


def _create(p: LimitedPaymentProvider, key: str = "k1") -> PaymentIntent:
    return p.create_intent(
        NewIntent(amount_cents=2500, currency="usd", metadata={"holdId": key}, description="t"), idempotency_key=key
    )


def test_a_near_slot_is_waited_for_then_the_call_goes_through() -> None:
    slept: list[float] = []
    fake = FakePaymentProvider()
    p = LimitedPaymentProvider(fake, Slots(0.2).reserve, max_wait_s=0.5, sleep=slept.append)
    intent = _create(p)
    assert slept == [0.2]
    assert fake.retrieve_intent(intent.id).status == IntentStatus.REQUIRES_PAYMENT_METHOD


def test_a_far_slot_is_refused_with_retry_after_and_nothing_reaches_the_provider() -> None:
    fake = FakePaymentProvider()
    p = LimitedPaymentProvider(fake, Slots(3.0).reserve, max_wait_s=0.5, sleep=lambda _: None)
    with pytest.raises(PaymentRateLimited) as limited:
        _create(p, "hold-1")
    assert limited.value.retry_after == 3.0
    assert fake.find_intents(hold_id="hold-1") == []


def test_every_provider_call_reserves_a_slot_but_parsing_a_webhook_does_not() -> None:
    fake = FakePaymentProvider()
    slots = Slots()
    p = LimitedPaymentProvider(fake, slots.reserve, sleep=lambda _: None)
    intent = _create(p, "hold-2")
    p.retrieve_intent(intent.id)
    p.confirm_intent(intent.id, payment_method="pm_card_visa", idempotency_key="c")
    p.find_intents(hold_id="hold-2")
    p.refund(intent_id=intent.id, idempotency_key="r")
    assert len(list(p.list_events(types=["payment_intent.succeeded"], created_after=0))) >= 1
    assert slots.reserved == 6
    payload = b'{"id":"evt_1","type":"x","created":1,"data":{"object":{}}}'
    p.parse_webhook(payload, fake.sign(payload))
    assert slots.reserved == 6


def test_a_refused_reservation_takes_no_slot_so_the_next_caller_is_not_pushed_out() -> None:
    from racecap.ratelimit import LocalSlotLimiter

    now = [100.0]
    limiter = LocalSlotLimiter(2.0, clock=lambda: now[0])  # slots 0.5 s apart
    assert limiter.reserve(max_wait_s=0.6) == 0.0  # taken: now
    assert limiter.reserve(max_wait_s=0.6) == 0.5  # taken: 0.5 s out
    for _ in range(50):  # an opening's retries, each refused (1 s out > 0.6 s)
        assert limiter.reserve(max_wait_s=0.6) == pytest.approx(1.0)
    now[0] += 0.5
    # Half a second later the next slot is 0.5 s out, as if the refusals never happened.
    assert limiter.reserve(max_wait_s=0.6) == pytest.approx(0.5)
