"""Amounts as the payment provider counts them: minor units per currency and its minimum charge.

Every amount in Racecap (``priceCents``, ``amountCents``) is an integer in the currency's
smallest unit *as Stripe's API takes it*: cents for USD (2500 is $25.00), yen for JPY, a
zero-decimal currency (2500 is ¥2,500). The names say "cents" for history; this module is
the one place that knows what a unit is worth, so the director's price check, the stand-in's
refusals, the emails and the export all read the same table.

The figures are Stripe's documentation's (https://docs.stripe.com/currencies: "Zero-decimal
currencies", "Three-decimal currencies" and "Minimum and maximum charge amounts"). A charge
below the minimum is refused by Stripe with ``amount_too_small``; Racecap refuses such a price
when the director sets it, so no runner ever meets that refusal.
"""

from __future__ import annotations

from decimal import Decimal

# Stripe takes these amounts in whole units (no minor unit): 500 JPY is ¥500.
ZERO_DECIMAL = frozenset(
    {"BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF"}
)
# Three minor digits; Stripe requires the last one to be 0 (amounts round to the hundredth).
THREE_DECIMAL = frozenset({"BHD", "JOD", "KWD", "OMR", "TND"})

# The smallest charge per currency, in its API unit. Stripe documents these for the
# currencies it settles in; any other is "the equivalent of 0.50 USD" at the day's rate,
# which no table can hold (None).
MINIMUM_CHARGE: dict[str, int] = {
    "USD": 50,
    "AED": 200,
    "AUD": 50,
    "BGN": 100,
    "BRL": 50,
    "CAD": 50,
    "CHF": 50,
    "CZK": 1500,
    "DKK": 250,
    "EUR": 50,
    "GBP": 30,
    "HKD": 400,
    "HUF": 17500,
    "INR": 50,
    "JPY": 50,
    "MXN": 1000,
    "MYR": 200,
    "NOK": 300,
    "NZD": 50,
    "PLN": 200,
    "RON": 200,
    "SEK": 300,
    "SGD": 50,
    "THB": 1000,
}
# Stripe's amount field holds at most eight digits, in every currency.
MAXIMUM_CHARGE = 99_999_999


def decimals(currency: str) -> int:
    """How many minor digits an API amount of ``currency`` has (0, 2 or 3)."""
    code = currency.upper()
    if code in ZERO_DECIMAL:
        return 0
    return 3 if code in THREE_DECIMAL else 2


def in_units(amount: int, currency: str) -> Decimal:
    """``2500, "USD"`` → ``25.00``; ``2500, "JPY"`` → ``2500``: the amount as people write it."""
    places = decimals(currency)
    return Decimal(amount).scaleb(-places).quantize(Decimal(1).scaleb(-places))


def minimum_charge(currency: str) -> int | None:
    return MINIMUM_CHARGE.get(currency.upper())


def charge_problem(amount: int, currency: str) -> str | None:
    """Why the provider would refuse to charge ``amount`` (in its API unit), in words for the
    person who set it; None when it can be charged."""
    least = minimum_charge(currency)
    if least is not None and amount < least:
        return f"At least {in_units(least, currency)} {currency.upper()}, the payment provider's smallest charge."
    if amount > MAXIMUM_CHARGE:
        return f"At most {in_units(MAXIMUM_CHARGE, currency)} {currency.upper()}, the payment provider's largest."
    if currency.upper() in THREE_DECIMAL and amount % 10:
        return f"{currency.upper()} amounts must end in 0 (the payment provider rounds to the hundredth)."
    return None


__all__ = [
    "MAXIMUM_CHARGE",
    "MINIMUM_CHARGE",
    "THREE_DECIMAL",
    "ZERO_DECIMAL",
    "charge_problem",
    "decimals",
    "in_units",
    "minimum_charge",
]
