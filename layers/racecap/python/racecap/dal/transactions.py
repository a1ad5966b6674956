"""One DynamoDB transaction made of items from several adapters.

An admin change and its audit entry, a cap change across shards and the event, a
cancellation that moves a place, an email claim and the counters: each is one
``TransactWriteItems`` so no crash can leave half of it. Adapters build their items
(``*_item`` methods); this module runs them and says which condition failed.
"""

from __future__ import annotations

from typing import Any

from racecap.retry import cancellation_codes, retry_contention

TransactItem = dict[str, Any]


class ConditionFailed(Exception):
    """Some item's condition did not hold; ``indexes`` are the failed items' positions."""

    def __init__(self, indexes: list[int]) -> None:
        super().__init__(f"condition failed on items {indexes}")
        self.indexes = indexes


def transact(client: Any, items: list[TransactItem]) -> None:
    """Run the items as one transaction, retrying only contention (never a failed condition)."""

    def attempt() -> None:
        try:
            client.transact_write_items(TransactItems=items)
        except client.exceptions.TransactionCanceledException as exc:
            failed = [i for i, code in enumerate(cancellation_codes(exc)) if code == "ConditionalCheckFailed"]
            if failed:
                raise ConditionFailed(failed) from exc
            raise

    retry_contention(attempt)
