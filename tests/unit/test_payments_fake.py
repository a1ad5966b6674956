"""The in-memory payment provider keeps the provider's promises: a key charges once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from racecap.dal.payments import (
    ChargeAlreadyRefunded,
    IdempotencyKeyReused,
    InvalidPaymentToken,
    PaymentProvider,
    PaymentRejected,
    PaymentUnavailable,
)

from local.payments import TEST_TOKENS
from tests.fakes.payments import TOKENS, FakePaymentProvider


def _charge(provider: PaymentProvider, key: str = "reg-1", card: str = "tok_visa", **kw: Any):
    args: dict[str, Any] = {
        "amount_cents": 2500,
        "currency": "USD",
        "token": card,
        "idempotency_key": key,
        "description": "Test Race — 10K",
        "metadata": {"registrationId": key},
    }
    args.update(kw)
    return provider.charge(**args)


@pytest.fixture
def fake() -> FakePaymentProvider:
    return FakePaymentProvider()


def test_fake_knows_the_local_servers_test_tokens():
    assert set(TOKENS) == set(TEST_TOKENS)


def test_success(fake):
    charge = _charge(fake)
    assert charge.status == "succeeded"
    assert charge.succeeded
    assert (charge.amount_cents, charge.currency, charge.idempotency_key) == (2500, "USD", "reg-1")
    assert charge.decline_reason is None
    assert fake.succeeded == [charge]


def test_decline_is_a_result_not_an_exception(fake):
    charge = _charge(fake, card="tok_declined")
    assert charge.status == "declined"
    assert charge.decline_reason == "card_declined"
    assert fake.succeeded == []
    assert _charge(fake, card="tok_declined") == charge  # replayed, not charged again
    assert len(fake.charges) == 1


def test_slow_token_succeeds(fake):
    assert _charge(fake, card="tok_slow").status == "succeeded"


def test_unknown_token_is_rejected_and_records_nothing(fake):
    with pytest.raises(InvalidPaymentToken) as err:
        _charge(fake, card="tok_nope")
    assert err.value.code == "invalid_token"
    assert fake.charges == []
    assert fake.find_charge("reg-1") is None
    # Nothing was stored under the key, so the runner can fix the card and retry with it.
    assert _charge(fake, card="tok_visa").succeeded


def test_same_key_same_parameters_replays_the_charge(fake):
    first = _charge(fake)
    assert _charge(fake) == first
    assert len(fake.charges) == 1
    assert fake.charge_calls == 2


def test_same_key_other_parameters_is_refused(fake):
    first = _charge(fake)
    with pytest.raises(IdempotencyKeyReused):
        _charge(fake, amount_cents=9900)
    with pytest.raises(IdempotencyKeyReused):
        _charge(fake, card="tok_declined")
    assert fake.charges[0].charge == first
    assert len(fake.charges) == 1


def test_different_keys_are_different_charges(fake):
    a, b = _charge(fake, "reg-a"), _charge(fake, "reg-b")
    assert a.id != b.id
    assert len(fake.succeeded) == 2


def test_fail_next_charges_nothing_and_the_retry_charges_once(fake):
    fake.fail_next = 1
    with pytest.raises(PaymentUnavailable):
        _charge(fake)
    assert fake.charges == []
    assert fake.find_charge("reg-1") is None
    assert _charge(fake).succeeded
    assert len(fake.charges) == 1


def test_lost_answer_then_retry_returns_the_original_charge(fake):
    fake.fail_after_charge_next = 1
    with pytest.raises(PaymentUnavailable):
        _charge(fake)
    found = fake.find_charge("reg-1")
    assert found is not None
    assert found.succeeded
    assert _charge(fake) == found
    assert len(fake.charges) == 1


def test_unavailable_is_not_a_rejection():
    # ``except PaymentRejected`` must never swallow "we don't know whether it charged".
    assert not issubclass(PaymentUnavailable, PaymentRejected)


def test_find_charge(fake):
    assert fake.find_charge("reg-1") is None
    charge = _charge(fake)
    assert fake.find_charge("reg-1") == charge
    declined = _charge(fake, "reg-2", card="tok_declined")
    assert fake.find_charge("reg-2") == declined


def test_refund_is_idempotent_per_key(fake):
    charge = _charge(fake)
    refund = fake.refund(charge_id=charge.id, idempotency_key="refund-reg-1")
    assert (refund.charge_id, refund.amount_cents, refund.status) == (charge.id, 2500, "succeeded")
    assert fake.refund(charge_id=charge.id, idempotency_key="refund-reg-1") == refund
    assert fake.is_refunded(charge.id)
    assert len(fake.refunds) == 1
    with pytest.raises(ChargeAlreadyRefunded):
        fake.refund(charge_id=charge.id, idempotency_key="refund-reg-1-again")
    assert len(fake.refunds) == 1


def test_refund_rejections(fake):
    declined = _charge(fake, card="tok_declined")
    with pytest.raises(PaymentRejected) as err:
        fake.refund(charge_id=declined.id, idempotency_key="r1")
    assert err.value.code == "charge_not_refundable"
    with pytest.raises(PaymentRejected) as err:
        fake.refund(charge_id="ch_missing", idempotency_key="r2")
    assert err.value.code == "resource_missing"
    charge = _charge(fake, "reg-2")
    with pytest.raises(IdempotencyKeyReused):  # a charge's key cannot be reused for a refund
        fake.refund(charge_id=charge.id, idempotency_key="reg-2")


def test_concurrent_identical_charges_charge_once():
    fake = FakePaymentProvider(slow_seconds=0.05)
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: _charge(fake, card="tok_slow"), range(20)))
    assert len({c.id for c in results}) == 1
    assert len(fake.charges) == 1


def test_key_is_required(fake):
    with pytest.raises(ValueError, match="idempotency key"):
        _charge(fake, key="")
