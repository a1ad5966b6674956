"""The aws capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from racecap import clients

if TYPE_CHECKING:
    from racecap.aws.transactions import TransactItem


# -- the race directors' admin API ----------------------------------------------------------
def transact(items: list[TransactItem]) -> None:
    from racecap.aws.transactions import transact as run_transaction

    run_transaction(clients.dynamodb(), items)
