"""The places capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.places.returns import DynamoPlaceReturns
    from racecap.places.store import DynamoInventory


@lru_cache(maxsize=1)
def inventory() -> DynamoInventory:
    from racecap.places.store import DynamoInventory

    return DynamoInventory(clients.dynamodb(), get_settings().inventory_table)


@lru_cache(maxsize=1)
def place_returns() -> DynamoPlaceReturns:
    from racecap.places.returns import DynamoPlaceReturns

    return DynamoPlaceReturns(clients.dynamodb(), get_settings().inventory_table)
