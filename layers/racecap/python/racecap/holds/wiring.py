"""The holds capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.holds.code_tally import CodeTally
    from racecap.holds.service import HoldService
    from racecap.holds.snapshots import HoldSnapshots
    from racecap.holds.store import DynamoHolds


@lru_cache(maxsize=1)
def holds() -> DynamoHolds:
    from racecap.holds.store import DynamoHolds

    return DynamoHolds(clients.dynamodb(), get_settings().inventory_table, code_tally())


@lru_cache(maxsize=1)
def code_tally() -> CodeTally:
    """Each discount code's uses as a Redis copy kept as they move (``holds.code_tally``)."""
    from racecap.cache import shared as cache
    from racecap.holds.code_tally import CodeTally

    return CodeTally(cache().shared)


@lru_cache(maxsize=1)
def hold_service() -> HoldService:
    from racecap.cache import shared as cache
    from racecap.holds.service import HoldService
    from racecap.races.wiring import catalog

    return HoldService(catalog(), holds(), cache(), hold_snapshots())


@lru_cache(maxsize=1)
def hold_snapshots() -> HoldSnapshots:
    """The hold as the last step of a runner's flow wrote it (``holds.snapshots``)."""
    from racecap.cache import shared as cache
    from racecap.holds.snapshots import HoldSnapshots

    return HoldSnapshots(cache())
