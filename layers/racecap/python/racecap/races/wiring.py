"""The races capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.races.catalog import RaceCatalog
    from racecap.races.store import DynamoRaceStore


@lru_cache(maxsize=1)
def race_store() -> DynamoRaceStore:
    from racecap.races.store import DynamoRaceStore

    return DynamoRaceStore(clients.dynamodb(), get_settings().races_table)


@lru_cache(maxsize=1)
def catalog() -> RaceCatalog:
    from racecap.cache import shared as cache
    from racecap.places.wiring import inventory
    from racecap.races.catalog import RaceCatalog

    return RaceCatalog(race_store(), inventory(), cache())
