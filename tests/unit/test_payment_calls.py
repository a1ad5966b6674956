"""A payment beyond the entry (a transfer's fee, a switch's upgrade) confirmed on the server and
told to the page, one rule for both (``payments.calls``), on the fake provider."""

from __future__ import annotations

import pytest
from racecap.errors import PaymentDeclined
from racecap.payments.calls import confirm_on_server, waiting
from racecap.payments.port import IntentStatus, NewIntent

from tests.fakes.payments import FakePaymentProvider


def _intent(payments: FakePaymentProvider):  # type: ignore[no-untyped-def]
    return payments.create_intent(
        NewIntent(amount_cents=1500, currency="eur", metadata={"purpose": "upgrade"}, description="a switch"),
        idempotency_key="upgrade-hold_1",
    )


def test_a_good_card_succeeds_and_a_repeat_replays_it() -> None:
    payments = FakePaymentProvider()
    intent = _intent(payments)
    assert waiting(intent) == "PAYMENT_REQUIRED"
    paid = confirm_on_server(payments, intent, "pm_card_visa", "hold_1", "try another card")
    assert paid.status == IntentStatus.SUCCEEDED
    assert confirm_on_server(payments, intent, "pm_card_visa", "hold_1", "try another card").id == paid.id


def test_a_refused_card_is_declined_in_the_callers_words_a_declined_one_is_paid_again_and_3ds_waits() -> None:
    payments = FakePaymentProvider()
    with pytest.raises(PaymentDeclined, match="Your registration is unchanged"):
        confirm_on_server(payments, _intent(payments), "pm_no_such_card", "hold_1", "Your registration is unchanged.")
    declined = confirm_on_server(payments, _intent(payments), "pm_card_chargeDeclined", "hold_1", "no")
    assert (waiting(declined), declined.decline_code) == ("PAYMENT_REQUIRED", "card_declined")
    asked = confirm_on_server(payments, _intent(payments), "pm_card_authenticationRequired", "hold_1", "no")
    assert waiting(asked) == "REQUIRES_ACTION"
