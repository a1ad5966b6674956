"""What a runner's own cancellation refunds under the race's refund policy (issue 39): pure rules.

The amount is ``min(percent x paid - fee, what is left to refund)``, to the currency's unit as
the provider counts it (``racecap.money``):

* ``percent`` is the first tier whose last day (in the race's zone) is today or later; past the
  last tier it is 0, and a race without tiers refunds nothing;
* ``percent x paid`` is rounded **down** to the unit (a cent; a yen for a zero-decimal currency;
  ten of the thousandths for a three-decimal one, whose last digit the provider wants 0): a
  runner is never refunded more than the policy says, by rounding or otherwise;
* the fee comes off after the percentage, and the result is never below 0 nor above what is
  left after earlier refunds (a director's partial refund counts);
* below the provider's smallest amount in the currency, nothing is refunded: the runner is
  told so before confirming (``PolicyQuote.note``), never surprised after.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from racecap.money import THREE_DECIMAL, in_units, minimum_charge
from racecap.races.models import RefundPolicy


@dataclass(frozen=True)
class PolicyQuote:
    percent: int
    grossCents: int  # percent x paid, rounded down to the unit
    feeCents: int
    amountCents: int  # what the cancellation refunds
    note: str  # what the runner is told before confirming


def policy_refund(policy: RefundPolicy, paid_cents: int, left_cents: int, currency: str, today: date) -> PolicyQuote:
    """The quote for a runner cancelling ``today`` (a day in the race's zone)."""
    code = currency.upper()
    percent = next((t.percent for t in policy.tiers if date.fromisoformat(t.until) >= today), 0)
    gross = paid_cents * percent // 100
    if code in THREE_DECIMAL:
        gross -= gross % 10
    amount = max(0, min(gross - policy.feeCents, left_cents))
    least = minimum_charge(code) or 0
    if 0 < amount < least:
        note = (
            f"{in_units(amount, code)} {code} is less than the payment provider can refund "
            f"(at least {in_units(least, code)} {code}): nothing is refunded."
        )
        return PolicyQuote(percent, gross, policy.feeCents, 0, note)
    if amount == 0:
        return PolicyQuote(percent, gross, policy.feeCents, 0, "Nothing is refunded under the race's policy.")
    fee = f", less a {in_units(policy.feeCents, code)} {code} fee" if policy.feeCents else ""
    note = f"{in_units(amount, code)} {code} is refunded ({percent} % of what you paid{fee})."
    return PolicyQuote(percent, gross, policy.feeCents, amount, note)
