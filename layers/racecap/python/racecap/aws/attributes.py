"""DynamoDB's attribute-value format, both ways, with boto3's rules.

``boto3.dynamodb.types`` would do it, but importing anything under ``boto3`` runs
``boto3/__init__``, which imports ``s3transfer`` and boto3's resource and docs machinery:
~50 ms of every cold start for two small functions (issue 14). The clients are
botocore's (``racecap.clients``), so nothing on the cold path needs boto3 any more. A unit
test checks this module against boto3's serializer and deserializer value by value.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from decimal import Clamped, Context, Decimal, Inexact, Overflow, Rounded, Underflow
from typing import Any

# boto3's DYNAMODB_CONTEXT: a number DynamoDB would store differently is an error, not a rounding.
_CONTEXT = Context(Emin=-128, Emax=126, prec=38, traps=[Clamped, Overflow, Inexact, Rounded, Underflow])


def _number(value: int | Decimal) -> str:
    number = str(_CONTEXT.create_decimal(value))
    if number in ("Infinity", "NaN", "-Infinity", "sNaN"):
        raise TypeError("Infinity and NaN not supported")
    return number


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        raise TypeError("Float types are not supported. Use Decimal types instead.")
    return isinstance(value, int | Decimal)


def serialize(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value (``{"S": ...}``, ``{"N": ...}``, ...)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if _is_number(value):
        return {"N": _number(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, bytes | bytearray):
        return {"B": bytes(value)}
    if isinstance(value, Set):
        if all(_is_number(v) for v in value):
            return {"NS": [_number(v) for v in value]}
        if all(isinstance(v, str) for v in value):
            return {"SS": list(value)}
        if all(isinstance(v, bytes | bytearray) for v in value):
            return {"BS": [bytes(v) for v in value]}
    elif isinstance(value, Mapping):
        return {"M": {k: serialize(v) for k, v in value.items()}}
    elif isinstance(value, list | tuple):
        return {"L": [serialize(v) for v in value]}
    raise TypeError(f"Unsupported type {type(value)!r} for value {value!r}")


def deserialize(attribute: Mapping[str, Any]) -> Any:
    """A DynamoDB attribute value as Python: numbers as ``Decimal``, sets as ``set``, binary as
    ``bytes`` (boto3 wraps it in its ``Binary``; Racecap stores none)."""
    if len(attribute) != 1:
        raise TypeError("Value must be a nonempty dictionary whose key is a valid dynamodb type.")
    ((kind, value),) = attribute.items()
    if kind in {"S", "BOOL", "B"}:
        return value
    if kind == "N":
        return _CONTEXT.create_decimal(value)
    if kind == "NULL":
        return None
    if kind == "M":
        return {k: deserialize(v) for k, v in value.items()}
    if kind == "L":
        return [deserialize(v) for v in value]
    if kind in {"SS", "BS"}:
        return set(value)
    if kind == "NS":
        return {_CONTEXT.create_decimal(v) for v in value}
    raise TypeError(f"Dynamodb type {kind} is not supported")
