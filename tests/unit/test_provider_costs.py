"""The bench's payment-provider lines: calls per registration and fees per 1,000, apart
from AWS's cost (tools/bench/costs.provider_costs)."""

from __future__ import annotations

import pytest

from tools.bench.costs import PROVIDER_FEE, provider_costs


def test_given_the_providers_counts_when_costed_then_fees_are_per_successful_charge_on_the_price() -> None:
    provider = {
        "limit_per_second": 25.0,
        "api_calls": 330,
        "api_calls_by_route": {"POST /v1/payment_intents": 100, "POST /v1/payment_intents/:id/confirm": 110},
        "answered_429": 4,
        "charges_succeeded": 101,
        "amount_charged_cents": 101 * 6500,
    }

    costs = provider_costs(provider, registrations=100)

    assert costs is not None
    assert costs["api_calls_per_registration"] == 3.3
    assert costs["api_calls_per_registration_by_route"]["POST /v1/payment_intents/:id/confirm"] == 1.1
    assert costs["mean_price_charged_usd"] == 65.0
    # 2.9 % of $65 + $0.30 = $2.185 a charge: $2,185 per 1,000 registrations.
    assert costs["fees_per_1000_registrations_usd"] == pytest.approx(2185.0)
    assert costs["fee_model"] == PROVIDER_FEE
    assert costs["answered_429_during_the_burst"] == 4


def test_given_no_provider_figures_when_costed_then_there_is_no_line() -> None:
    assert provider_costs(None, registrations=10) is None
