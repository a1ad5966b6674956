"""aws.wiring."""

from __future__ import annotations

from typing import TYPE_CHECKING

from racecap import clients

if TYPE_CHECKING:
    from racecap.aws.transactions import TransactItem


# -- the race directors' admin API ----------------------------------------------------------
def transact(items: list[TransactItem]) -> None:
    from racecap.aws.transactions import transact as run_transaction

    run_transaction(clients.dynamodb(), items)
