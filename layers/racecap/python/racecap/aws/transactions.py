"""The one transaction runner: every ``TransactWriteItems`` in the data layer goes through it.

An admin change and its audit entry, a claim on a cap shard and the hold, a cancellation
that moves a place, a batch of confirmations and the bib counter: each is one transaction
so no crash can leave half of it. Adapters build their items; ``transact`` runs them,
retries contention (``TransactionConflict`` and throttling, with jitter, see
``aws/retry.py``) and turns the cancellation reasons into ``ConditionFailed`` naming the
items whose condition did not hold, for the adapter to map to its domain outcome.
"""

from __future__ import annotations

from typing import Any

from racecap.aws.items import values
from racecap.aws.retry import cancellation_codes, retry_contention

TransactItem = dict[str, Any]


class ConditionFailed(Exception):
    """Some item's condition did not hold; ``indexes`` are the failed items' positions."""

    def __init__(self, indexes: list[int]) -> None:
        super().__init__(f"condition failed on items {indexes}")
        self.indexes = indexes

    @property
    def first(self) -> int:
        return self.indexes[0]


def update_item(
    table: str,
    key: dict[str, Any],
    expression: str,
    *,
    condition: str | None = None,
    names: dict[str, str] | None = None,
    vals: dict[str, Any] | None = None,
) -> TransactItem:
    """One ``Update`` of a transaction (``vals`` as plain values), in the shape every
    adapter's Update items share; absent parts are left out, as DynamoDB wants them."""
    update: dict[str, Any] = {"TableName": table, "Key": key, "UpdateExpression": expression}
    if condition is not None:
        update["ConditionExpression"] = condition
    if names:
        update["ExpressionAttributeNames"] = names
    if vals:
        update["ExpressionAttributeValues"] = values(vals)
    return {"Update": update}


# A one-item "transaction" is the item's own conditional write: as atomic, and DynamoDB
# bills a transactional write twice (2 WCU per KB against 1). An adapter that sometimes has
# one item (a hold paid by a client with no hold limit to free) still calls ``transact``.
_SINGLE_WRITES = {"Put": "put_item", "Update": "update_item", "Delete": "delete_item"}


def transact(client: Any, items: list[TransactItem]) -> None:
    """Run the items as one transaction, retrying only contention (never a failed condition)."""
    if len(items) == 1 and len(items[0]) == 1 and next(iter(items[0])) in _SINGLE_WRITES:
        _write_one(client, items[0])
        return

    def attempt() -> None:
        try:
            client.transact_write_items(TransactItems=items)
        except client.exceptions.TransactionCanceledException as exc:
            failed = [i for i, code in enumerate(cancellation_codes(exc)) if code == "ConditionalCheckFailed"]
            if failed:
                raise ConditionFailed(failed) from exc
            raise

    retry_contention(attempt)


def _write_one(client: Any, item: TransactItem) -> None:
    ((kind, params),) = item.items()
    write = getattr(client, _SINGLE_WRITES[kind])

    def attempt() -> None:
        try:
            write(**params)
        except client.exceptions.ConditionalCheckFailedException as exc:
            raise ConditionFailed([0]) from exc

    retry_contention(attempt)
