"""In-memory stand-ins for what the registration core reads besides its stores: the race
definitions (``RaceDefinitions``), the shared flags (``Flags``) and the audit trail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from racecap.audit.service import without_personal_data
from racecap.aws.transactions import TransactItem
from racecap.errors import RaceNotFound
from racecap.models import Actor, Director
from racecap.races.models import Event, Race

from tests.fakes.stores import FakeTables, fake_item


def open_race(
    race_id: str = "race-1", *, caps: tuple[int, ...] = (2,), price_cents: int = 2500, **over: Any
) -> tuple[Race, list[Event]]:
    now = datetime.now(UTC)
    fields: dict[str, Any] = {
        "raceId": race_id,
        "ownerId": "dir-1",
        "name": "Harbour Run",
        "raceDate": "2027-05-01",
        "registrationOpensAt": now - timedelta(hours=1),
        "registrationClosesAt": now + timedelta(days=1),
        "registrationState": "OPEN",
    }
    race = Race(**(fields | over))
    events = [
        Event(raceId=race_id, eventId=f"ev{i}", name=f"{10 * (i + 1)}K", cap=cap, priceCents=price_cents, shards=1)
        for i, cap in enumerate(caps)
    ]
    return race, events


class FakeCatalog:
    def __init__(self, tables: FakeTables | None = None) -> None:
        self.tables = tables
        self.races: dict[str, tuple[Race, list[Event]]] = {}
        self.came_back: list[tuple[str, str]] = []

    def add(self, race: Race, events: list[Event]) -> None:
        self.races[race.raceId] = (race, events)
        if self.tables is not None:
            for e in events:
                self.tables.add_event(race.raceId, e.eventId, [e.cap])

    def definition(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]:
        if race_id not in self.races:
            raise RaceNotFound(f"No race {race_id}.")
        return self.races[race_id]

    def for_runners(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]:
        race, events = self.definition(race_id)
        if race.is_draft:
            raise RaceNotFound(f"No race {race_id}.")
        return race, events

    def places_came_back(self, race_id: str, event_id: str) -> None:
        self.came_back.append((race_id, event_id))


class FakeFlags:
    def __init__(self) -> None:
        self.flags: set[str] = set()

    def flag(self, key: str, ttl: float) -> None:
        self.flags.add(key)

    def has_flag(self, key: str, local_ttl: float = 1.0) -> bool:
        return key in self.flags

    def clear_flag(self, key: str) -> None:
        self.flags.discard(key)


class FakeAudit:
    """The audit trail's ``item``: an entry written in the same transaction as the change."""

    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables

    def item(self, actor: Director | Actor, race_id: str, action: str, target: str, **details: Any) -> TransactItem:
        who = Actor.of(actor)
        entry = {"raceId": race_id, "actor": who.id, "actorKind": who.kind, "action": action, "target": target}
        entry |= without_personal_data(details)
        return fake_item(lambda: True, lambda: self.tables.audit.append(entry))
