"""The registration window's tasks, run by the RegistrationWindow state machine.

Exception class names are the contract with the ASL (``ErrorEquals``), like the saga
examples in STYLE.md: ``RaceGone`` ends the workflow without retries.
"""

from __future__ import annotations

from racecap.cache import TieredCache
from racecap.dal.inventory import DynamoInventory
from racecap.dal.races import RaceStore
from racecap.logic.races import RaceCatalog, sold_out_flag
from racecap.models import RegistrationState
from racecap.observability import logger


class RaceGone(Exception):
    """The race was deleted or never existed: nothing to open or close."""


class WindowTasks:
    def __init__(self, store: RaceStore, inventory: DynamoInventory, catalog: RaceCatalog, cache: TieredCache) -> None:
        self._store = store
        self._inventory = inventory
        self._catalog = catalog
        self._cache = cache

    def run(self, task: str, race_id: str) -> dict[str, object]:
        if task == "warm":
            return self.warm(race_id)
        if task in ("open", "close"):
            return self.set_state(race_id, "OPEN" if task == "open" else "CLOSED")
        raise ValueError(f"unknown task {task!r}")

    def warm(self, race_id: str) -> dict[str, object]:
        """Before the opening: every shard exists, caches hold the race, no stale flags."""
        found = self._store.get_race(race_id)
        if found is None:
            raise RaceGone(race_id)
        race, events = found
        shards = 0
        for event in events:
            usage = self._inventory.usage(race_id, event.eventId, consistent=True)
            if len(usage.shards) != event.shards:
                raise RuntimeError(f"event {event.eventId} has {len(usage.shards)} shards, expected {event.shards}")
            shards += len(usage.shards)
            self._cache.clear_flag(sold_out_flag(race_id, event.eventId))
        self._catalog.invalidate(race_id, race.version)
        self._catalog.get_race(race_id)  # fills the shared tier before the crowd arrives
        logger.info("warmed race", extra={"raceId": race_id, "shards": shards})
        return {"raceId": race_id, "events": len(events), "shards": shards}

    def set_state(self, race_id: str, state: RegistrationState) -> dict[str, object]:
        try:
            race = self._store.update_race(race_id, {"registrationState": state})
        except KeyError as exc:
            raise RaceGone(race_id) from exc
        self._catalog.invalidate(race_id, race.version)
        logger.info("registration state changed", extra={"raceId": race_id, "state": state})
        return {"raceId": race_id, "registrationState": state, "version": race.version}
