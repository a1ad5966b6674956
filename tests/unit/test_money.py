"""Amounts in the provider's units: what a unit is worth per currency and what can be charged."""

from __future__ import annotations

from decimal import Decimal

import pytest
from racecap.money import charge_problem, decimals, in_units


@pytest.mark.parametrize(
    ("amount", "currency", "units"),
    [(2500, "USD", "25.00"), (2500, "jpy", "2500"), (2500, "KRW", "2500"), (4500, "KWD", "4.500"), (5, "EUR", "0.05")],
)
def test_an_amount_in_the_currencys_own_units(amount, currency, units):
    assert in_units(amount, currency) == Decimal(units) and str(in_units(amount, currency)) == units


def test_zero_and_three_decimal_currencies_are_the_providers():
    assert (decimals("JPY"), decimals("USD"), decimals("BHD")) == (0, 2, 3)


@pytest.mark.parametrize(
    ("amount", "currency", "refused"),
    [
        (49, "USD", True),
        (50, "USD", False),
        (29, "GBP", True),
        (30, "GBP", False),
        (49, "JPY", True),
        (50, "JPY", False),
        (100_000_000, "USD", True),
        (99_999_999, "USD", False),
        (1005, "KWD", True),
        (1010, "KWD", False),
        (1, "XYZ", False),  # no documented minimum: the provider converts at the day's rate
    ],
)
def test_what_the_provider_refuses_to_charge(amount, currency, refused):
    assert (charge_problem(amount, currency) is not None) is refused
