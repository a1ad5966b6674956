"""Discount arithmetic and a code's shards: the parts with no I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from racecap.codes.models import MAX_SHARDS, MAX_USES, CodeDraft, CodeTerms
from racecap.codes.service import discounted, shard_caps


@given(st.integers(min_value=1, max_value=MAX_USES))
def test_a_codes_shards_add_up_to_its_uses_and_none_is_empty(uses: int) -> None:
    caps = shard_caps(uses)
    assert sum(caps) == uses
    assert 1 <= len(caps) <= MAX_SHARDS and min(caps) >= 1


def test_a_code_without_a_limit_still_counts_its_uses_on_shards() -> None:
    assert len(shard_caps(None)) > 1


def _pct(p: int) -> CodeTerms:
    return CodeTerms(kind="PERCENT", percent=p)


@pytest.mark.parametrize(
    ("price", "currency", "percent", "expected"),
    [
        (3000, "EUR", 20, 2400),
        (2999, "USD", 10, 2699),  # 299.9 off rounds up to 300: the runner pays less
        (2999, "JPY", 15, 2549),  # zero-decimal: 449.85 yen off rounds up to 450
        (12_340, "KWD", 5, 11_720),  # three-decimal: 617 off rounds up to 620, the provider takes tens only
        (3000, "EUR", 100, 0),
    ],
)
def test_a_percentage_rounds_in_the_runners_favour_to_the_currencys_unit(
    price: int, currency: str, percent: int, expected: int
) -> None:
    assert discounted(price, currency, _pct(percent)) == expected


@given(st.integers(min_value=0, max_value=10_000_000), st.integers(min_value=1, max_value=100))
def test_a_discount_never_raises_the_price_nor_takes_it_below_zero(price: int, percent: int) -> None:
    after = discounted(price, "USD", _pct(percent))
    assert 0 <= after <= price
    assert after <= price - price * percent / 100  # never less off than the percentage says


def test_an_amount_off_bigger_than_the_price_makes_it_free() -> None:
    assert discounted(1000, "EUR", CodeTerms(kind="AMOUNT", amountCents=5000)) == 0


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "PERCENT"},
        {"kind": "PERCENT", "percent": 10, "amountCents": 100},
        {"kind": "AMOUNT", "percent": 10},
        {"kind": "PERCENT", "percent": 10, "validFrom": "2026-05-02T00:00:00Z", "validTo": "2026-05-01T00:00:00Z"},
    ],
)
def test_terms_that_contradict_themselves_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        CodeTerms.model_validate(body)


def test_codes_are_kept_in_capitals_and_times_without_an_offset_are_the_races() -> None:
    draft = CodeDraft.model_validate(
        {"code": "spring-10", "kind": "PERCENT", "percent": 10, "validTo": "2026-05-01T09:00:00"}
    )
    assert draft.code == "SPRING-10"
    local = draft.in_zone("America/New_York")
    assert local.validTo is not None and local.validTo.isoformat() == "2026-05-01T13:00:00+00:00"
