"""Small helpers over the low-level DynamoDB client (faster than the resource API)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from racecap.aws.attributes import deserialize, serialize


def to_item(data: dict[str, Any]) -> dict[str, Any]:
    return {k: serialize(v) for k, v in data.items() if v is not None}


def from_item(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _plain(deserialize(v)) for k, v in item.items()}


def values(data: dict[str, Any]) -> dict[str, Any]:
    """Serialize ExpressionAttributeValues."""
    return {k: serialize(v) for k, v in data.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, set):
        return sorted(_plain(v) for v in value)
    return value


def query_raw(client: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item a query matches, page by page, in DynamoDB's wire format."""
    while True:
        page = client.query(**kwargs)
        yield from page.get("Items", [])
        last = page.get("LastEvaluatedKey")
        if not last:
            return
        kwargs["ExclusiveStartKey"] = last


def query_all(client: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item a query matches, as plain Python values."""
    return (from_item(item) for item in query_raw(client, **kwargs))


def get_all(client: Any, table: str, keys: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The items at ``keys`` (wire format) that exist, as plain Python values: strongly
    consistent BatchGetItem, 100 keys per call, unprocessed keys asked for again."""
    for start in range(0, len(keys), 100):
        request: dict[str, Any] = {table: {"Keys": keys[start : start + 100], "ConsistentRead": True}}
        while request:
            resp = client.batch_get_item(RequestItems=request)
            yield from (from_item(item) for item in resp["Responses"].get(table, []))
            request = resp.get("UnprocessedKeys") or {}


def is_conditional_failure(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code")
    return code == "ConditionalCheckFailedException"


def error_code(exc: Exception) -> str | None:
    return getattr(exc, "response", {}).get("Error", {}).get("Code")  # type: ignore[no-any-return]
