"""races.wiring."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.races.catalog import RaceCatalog
    from racecap.races.store import DynamoRaceStore

from racecap.cache import shared as cache
from racecap.places.wiring import inventory


@lru_cache(maxsize=1)
def race_store() -> DynamoRaceStore:
    from racecap.races.store import DynamoRaceStore

    return DynamoRaceStore(clients.dynamodb(), get_settings().races_table)


@lru_cache(maxsize=1)
def catalog() -> RaceCatalog:
    from racecap.races.catalog import RaceCatalog

    return RaceCatalog(race_store(), inventory(), cache())
