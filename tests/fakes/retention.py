"""In-memory ``RetentionStore`` (``retention.service``), a view on ``FakeTables`` and
the races of a ``FakeCatalog`` as ``retention.store.DynamoRetention`` is on the tables; it
also answers the ``get_race`` the job asks of the race store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from racecap.aws.transactions import TransactItem
from racecap.questions.rules import kept_after_purge, waiver_after_purge
from racecap.races.models import Event, Race
from racecap.registration.models import Registration

from .catalog import FakeCatalog
from .stores import FakeTables, fake_item
from .waitlist import FakeWaitlist


class FakeRetention:
    def __init__(self, tables: FakeTables, catalog: FakeCatalog, waitlist: FakeWaitlist | None = None) -> None:
        self.tables = tables
        self.catalog = catalog
        self.waitlist = waitlist or FakeWaitlist()
        self.fail_after: int | None = None  # purges allowed before one raises (a crash mid-way)

    def get_race(self, race_id: str) -> tuple[Race, list[Event]] | None:
        return self.catalog.races.get(race_id)

    def unpurged_races(self, raced_on_or_before: str) -> Iterator[Race]:
        for race, _ in list(self.catalog.races.values()):
            if race.purgedAt is None and race.raceDate <= raced_on_or_before:
                yield race

    def unpurged_registrations(self, race_id: str, event_id: str) -> Iterator[Registration]:
        with self.tables.lock:
            regs = sorted(
                (r for r in self.tables.regs.values() if r.raceId == race_id and r.eventId == event_id),
                key=lambda r: r.bib,
            )
        return (r for r in regs if r.purgedAt is None)

    def purge_items(self, reg: Registration, age: int | None, at: str) -> list[TransactItem]:
        t = self.tables
        rid = reg.registrationId

        def purge() -> None:
            if self.fail_after is not None:
                if self.fail_after == 0:
                    raise RuntimeError("the job's process died")
                self.fail_after -= 1
            current = t.regs[rid]
            changes: dict[str, object] = {
                "email": "", "dateOfBirth": "", "chargeId": "", "purgedAt": at, "refundId": None, "disputeId": None,
            }  # fmt: skip
            if age is not None:
                changes["ageOnRaceDay"] = age
            changes["answers"] = kept_after_purge(current.answers)
            changes["waiver"] = waiver_after_purge(current.waiver)
            t.regs[rid] = current.model_copy(update=changes)
            t.emails.pop((reg.raceId, reg.email), None)
            t.holds.pop(reg.holdId, None)

        return [fake_item(lambda: rid in t.regs, purge)]

    def waitlist_items(self, race_id: str, event_id: str) -> list[TransactItem]:
        store = self.waitlist

        def delete(items: dict[tuple[str, str, str], Any], key: tuple[str, str, str]) -> TransactItem:
            return fake_item(lambda: True, lambda: items.pop(key, None))

        with store.lock:  # the entries and the offers (each holds an address), as DynamoRetention does
            return [
                delete(items, k)
                for items in (store.items, store.offer_items)
                for k in list(items)
                if k[:2] == (race_id, event_id)
            ]

    def ballot_items(self, race_id: str, event_id: str) -> Iterator[TransactItem]:
        return iter(())  # the unit world has no ballot store: its purge is test_retention_purge's (integration)

    def mark_purged_item(self, race: Race, at: datetime) -> TransactItem:
        def mark() -> None:
            stored, events = self.catalog.races[race.raceId]
            self.catalog.races[race.raceId] = (stored.model_copy(update={"purgedAt": at}), events)

        return fake_item(lambda: race.raceId in self.catalog.races, mark)
