"""A runner's own cancellation under the race's refund policy: the amount to the cent in each
tier, rounding down in every kind of currency, the fee, the provider's minimum, and what is
left after a director's refunds; the director's setting, validated and copied with the race."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st
from racecap.errors import ValidationFailed
from racecap.ledger.policy import policy_refund
from racecap.money import THREE_DECIMAL, minimum_charge
from racecap.races.models import RefundPolicy, RefundTier
from racecap.setup.models import CopyRequest, RacePatch

from tests.unit.admin_world import DANA, AdminWorld

POLICY = RefundPolicy(
    runnersMayCancel=True,
    tiers=[RefundTier(until="2027-03-01", percent=100), RefundTier(until="2027-05-01", percent=50)],
    feeCents=500,
)


@pytest.mark.parametrize(
    ("today", "currency", "paid", "left", "expected"),
    [
        ("2027-02-10", "EUR", 4500, 4500, 4000),  # 100 % less the 5.00 fee
        ("2027-03-01", "EUR", 4500, 4500, 4000),  # the tier's last day still counts
        ("2027-03-02", "EUR", 4599, 4599, 1799),  # 50 % of 45.99 is 22.995: 22.99 (down), less 5.00
        ("2027-05-02", "EUR", 4500, 4500, 0),  # after the last tier: nothing
        ("2027-02-10", "EUR", 4500, 1000, 1000),  # a director refunded 35.00 already: what is left
        ("2027-03-02", "JPY", 6001, 6001, 2500),  # zero-decimal: 3000 yen (down from 3000.5) less 500
        ("2027-03-02", "KWD", 12345, 12345, 5670),  # three-decimal: 6.1725 -> 6.170, less 0.500
        ("2027-03-02", "USD", 1100, 1100, 50),  # 5.50 - 5.00 = 0.50: the provider's minimum, refunded
    ],
)
def test_the_amount_in_each_tier_to_the_cent(today, currency, paid, left, expected):
    quote = policy_refund(POLICY, paid, left, currency, date.fromisoformat(today))
    assert quote.amountCents == expected, quote


def test_below_the_providers_smallest_refund_nothing_is_refunded_and_the_runner_is_told():
    quote = policy_refund(POLICY, 1040, 1040, "EUR", date(2027, 3, 2))  # 5.20 - 5.00 = 0.20 < 0.50
    assert (quote.amountCents, quote.grossCents) == (0, 520)
    assert "less than the payment provider can refund" in quote.note


@given(
    paid=st.integers(min_value=0, max_value=10_000_000),
    spent=st.integers(min_value=0, max_value=10_000_000),
    fee=st.integers(min_value=0, max_value=100_000),
    percent=st.integers(min_value=0, max_value=100),
    currency=st.sampled_from(["USD", "EUR", "JPY", "KWD", "CHF", "XOF"]),
)
def test_never_more_than_the_policy_or_what_is_left_never_below_zero(paid, spent, fee, percent, currency):
    left = max(0, paid - spent)
    policy = RefundPolicy(tiers=[RefundTier(until="2030-01-01", percent=percent)], feeCents=fee)
    quote = policy_refund(policy, paid, left, currency, date(2029, 1, 1))
    assert 0 <= quote.amountCents <= left
    assert quote.amountCents <= max(0, paid * percent // 100 - fee)  # rounding never adds a unit
    if quote.amountCents:
        assert quote.amountCents >= (minimum_charge(currency) or 0)
    if currency in THREE_DECIMAL:
        assert quote.grossCents % 10 == 0


def test_the_director_sets_the_policy_it_is_validated_and_a_copy_moves_its_days():
    w = AdminWorld()
    race = w.create(5)  # raced on its world's default date
    day = race.raceDate
    good = {"runnersMayCancel": True, "tiers": [{"until": day, "percent": 50}], "feeCents": 300, "editUntil": day,
            "transfersUntil": day, "transferFeeCents": 500, "transferredRefundable": False,
            "switchesUntil": day, "deferralsUntil": day, "deferralFeeCents": 1000}  # fmt: skip
    view = w.admin.update_race(DANA, race.raceId, RacePatch.model_validate({"refundPolicy": good}))
    assert view.refundPolicy.model_dump() == good
    for bad in (
        {"transfersUntil": "2999-01-01"},  # after the race
        {"switchesUntil": "2999-01-01"},
        {"transferFeeCents": 10},  # under the provider's minimum charge (0.50 in USD)
        {"tiers": [{"until": "2999-01-01", "percent": 50}]},  # after the race
        {"tiers": [{"until": day, "percent": 50}, {"until": day, "percent": 10}]},  # one tier per day
        {"tiers": [{"until": day, "percent": 101}]},
        {"feeCents": -1},
        {"surprise": 1},
    ):
        with pytest.raises((ValidationFailed, ValueError)):
            w.admin.update_race(DANA, race.raceId, RacePatch.model_validate({"refundPolicy": bad}))
    copy = w.admin.copy_race(DANA, race.raceId, CopyRequest())
    shifted = w.admin.get(DANA, copy.raceId).refundPolicy
    moved = (date.fromisoformat(copy.raceDate) - date.fromisoformat(day)).days
    assert shifted.tiers[0].until == date.fromordinal(date.fromisoformat(day).toordinal() + moved).isoformat()
    assert (shifted.feeCents, shifted.runnersMayCancel) == (300, True)
    assert shifted.transfersUntil == shifted.tiers[0].until and shifted.transferFeeCents == 500
    assert shifted.switchesUntil == shifted.tiers[0].until == shifted.deferralsUntil


def test_a_day_after_the_race_is_named_by_its_field_so_the_console_shows_it_beside_the_tier():
    w = AdminWorld()
    race = w.create(5)
    after = (date.fromisoformat(race.raceDate).toordinal() + 1, date.fromisoformat(race.raceDate).toordinal() + 2)
    late = [date.fromordinal(d).isoformat() for d in after]
    bad = {"tiers": [{"until": race.raceDate, "percent": 100}, {"until": late[0], "percent": 50}], "editUntil": late[1]}
    with pytest.raises(ValidationFailed) as refused:
        w.admin.update_race(DANA, race.raceId, RacePatch.model_validate({"refundPolicy": bad}))
    assert refused.value.fields == {
        "refundPolicy.tiers.1.until": f"After the race date ({race.raceDate}).",
        "refundPolicy.editUntil": f"After the race date ({race.raceDate}).",
    }
    # Moving the race date before a tier names the tier too (the policy stays as it was).
    w.admin.update_race(DANA, race.raceId, RacePatch.model_validate({"refundPolicy": {"tiers": bad["tiers"][:1]}}))
    earlier = date.fromordinal(date.fromisoformat(race.raceDate).toordinal() - 1).isoformat()
    with pytest.raises(ValidationFailed) as moved:
        w.admin.update_race(DANA, race.raceId, RacePatch.model_validate({"raceDate": earlier}))
    assert moved.value.fields == {"refundPolicy.tiers.0.until": f"After the race date ({earlier})."}
