"""aws.attributes speaks DynamoDB's attribute-value format exactly as boto3's
TypeSerializer/TypeDeserializer do (it replaces them to keep boto3 off the cold path)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer
from racecap.aws.attributes import deserialize, serialize

VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -17,
    2**63,
    Decimal("12.50"),
    Decimal("1e-5"),
    "",
    "Ünïcode ✓",
    b"\x00\x01",
    bytearray(b"ab"),
    {"a", "b"},
    {1, 2, Decimal("3.5")},
    {b"x", b"y"},
    [],
    [1, "two", None, [True], {"k": "v"}],
    (1, 2),
    {},
    {"pk": "RACE#1", "n": 3, "nested": {"list": [Decimal("0.1"), "s"], "flag": False, "none": None}},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_given_a_python_value_when_serialized_then_it_is_what_boto3_writes(value: Any) -> None:
    expected = TypeSerializer().serialize(value)
    got = serialize(value)
    for kind in ("SS", "NS", "BS"):  # set order is arbitrary on both sides
        if kind in expected:
            expected, got = {kind: sorted(expected[kind])}, {kind: sorted(got[kind])}
    assert got == expected


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_given_an_attribute_value_when_deserialized_then_it_is_what_boto3_reads(value: Any) -> None:
    wire = TypeSerializer().serialize(value)
    expected = TypeDeserializer().deserialize(wire)

    def unwrap(v: Any) -> Any:  # boto3 wraps binary in Binary; ours is plain bytes
        if isinstance(v, Binary):
            return v.value
        if isinstance(v, set):
            return {unwrap(x) for x in v}
        if isinstance(v, list):
            return [unwrap(x) for x in v]
        if isinstance(v, dict):
            return {k: unwrap(x) for k, x in v.items()}
        return v

    assert deserialize(wire) == unwrap(expected)


@pytest.mark.parametrize("bad", [1.5, Decimal("Infinity"), Decimal("NaN"), Decimal("1" * 39), object()], ids=repr)
def test_given_a_value_dynamodb_cannot_store_when_serialized_then_both_refuse_it(bad: Any) -> None:
    refused = (TypeError, ArithmeticError)  # a decimal trap (Inexact, Rounded...) for numbers
    with pytest.raises(refused) as boto_error:
        TypeSerializer().serialize(bad)
    with pytest.raises(type(boto_error.value)):
        serialize(bad)
