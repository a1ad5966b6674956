"""In-memory ``RaceStore``, ``Inventory``, ``WindowStore``, ``AuditStore`` and ``Workflow``
(``races.store``, ``places.store``), plus a cache with no Redis behind it.

They share one ``FakeTables`` with the hold and registration fakes (its lock, its cap
shards and its transaction runner), so an admin change and a hold meet on the same shards
as they do in DynamoDB. Each item keeps the DynamoDB adapter's condition and position, so a
failed condition raises the same ``ConditionFailed`` (or ``Conflict``) as the adapter;
``tests/contract`` runs the same cases against both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis
from racecap.audit.models import AuditEntry
from racecap.aws.keys import audit_sk, shard_sk
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.cache import TieredCache
from racecap.errors import Conflict
from racecap.places.models import Shard, ShardChange, ShardUsage
from racecap.races.models import Event, EventChanges, Race, RaceChanges
from racecap.window.models import WindowRecord

from tests.fakes.stores import FakeTables, fake_item

ALWAYS = lambda: True  # noqa: E731 - an item with no condition


def _stored(race: Race) -> Race:
    """What reading the race back gives (stored as JSON, as the adapter stores it)."""
    return Race.model_validate(race.model_dump(mode="json"))


class FakeRaceStore:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.races: dict[str, Race] = {}
        self.created: dict[str, str] = {}  # raceId -> createdAt (the owner index's order)
        self.events: dict[str, dict[str, Event]] = {}
        self.listing: dict[str, Race] = {}  # "<raceDate>#<raceId>" -> the race as listed
        self.listing_count = 0

    # -- reading ------------------------------------------------------------------------
    def get_race(self, race_id: str) -> tuple[Race, list[Event]] | None:
        with self.tables.lock:
            race = self.races.get(race_id)
            if race is None:
                return None
            by_key = sorted(self.events.get(race_id, {}).values(), key=lambda e: e.eventId)
            return race, sorted(by_key, key=lambda e: e.position)

    def race_version(self, race_id: str) -> int:
        with self.tables.lock:
            race = self.races.get(race_id)
            return race.version if race is not None else 0

    def list_published(self) -> list[Race]:
        with self.tables.lock:
            return [self.listing[k] for k in sorted(self.listing) if self.listing[k].listing == "LISTED"]

    def listing_version(self) -> int:
        return self.listing_count

    def list_by_owner(self, owner_id: str) -> list[Race]:
        with self.tables.lock:
            mine = [r for r in self.races.values() if r.ownerId == owner_id]
            return sorted(mine, key=lambda r: f"{self.created[r.raceId]}#{r.raceId}", reverse=True)

    # -- changing -----------------------------------------------------------------------
    def create(self, race: Race, events: list[Event], also: Sequence[TransactItem] = ()) -> None:
        stored = _stored(race)

        def put_race() -> None:
            self.races[race.raceId] = stored
            self.created[race.raceId] = datetime.now(UTC).isoformat()

        items = [
            fake_item(lambda: race.raceId not in self.races, put_race),
            *(fake_item(ALWAYS, lambda e=e: self._put_event(e)) for e in events),
            self._bump_listing(),
            *also,
        ]
        if race.listing == "LISTED":
            items.append(fake_item(ALWAYS, lambda: self.listing.__setitem__(f"{race.raceDate}#{race.raceId}", stored)))
        try:
            self.tables.transact(items)
        except ConditionFailed as exc:
            if exc.first == 0:
                raise Conflict(f"race {race.raceId} already exists") from exc
            raise

    def update_race(
        self,
        race_id: str,
        changes: RaceChanges,
        expected_version: int | None = None,
        also: Sequence[TransactItem] = (),
    ) -> Race:
        found = self.get_race(race_id)
        if found is None:
            raise KeyError(race_id)
        current, _ = found
        if expected_version is not None and current.version != expected_version:
            raise Conflict("The race was changed meanwhile; reload it and try again.")
        return self.apply_update(current, changes, also)

    def apply_update(self, current: Race, changes: RaceChanges, also: Sequence[TransactItem] = ()) -> Race:
        race_id = current.raceId
        updated = current.model_copy(update={**changes, "version": current.version + 1})
        stored = _stored(updated)
        items = [
            fake_item(
                lambda: race_id in self.races and self.races[race_id].version == current.version,
                lambda: self.races.__setitem__(race_id, stored),
            ),
            self._bump_listing(),
            *also,
        ]
        listed = updated.listing == "LISTED"
        if current.listing == "LISTED" and (not listed or updated.raceDate != current.raceDate):
            items.append(fake_item(ALWAYS, lambda: self.listing.pop(f"{current.raceDate}#{race_id}", None) and None))
        if listed:
            items.append(fake_item(ALWAYS, lambda: self.listing.__setitem__(f"{updated.raceDate}#{race_id}", stored)))
        try:
            self.tables.transact(items)
        except ConditionFailed as exc:
            raise Conflict("The race was changed meanwhile; reload it and try again.") from exc
        return updated

    def version_item(self, race: Race) -> TransactItem:
        def bump() -> None:
            current = self.races[race.raceId]
            self.races[race.raceId] = current.model_copy(update={"version": race.version + 1})

        return fake_item(
            lambda: race.raceId in self.races and self.races[race.raceId].version == race.version,
            bump,
        )

    def put_event_item(self, event: Event) -> TransactItem:
        return fake_item(lambda: event.eventId not in self.events.get(event.raceId, {}), lambda: self._put_event(event))

    def update_event_item(self, current: Event, changes: EventChanges) -> TransactItem:
        def ok() -> bool:
            found = self.events.get(current.raceId, {}).get(current.eventId)
            return found is not None and found.cap == current.cap

        def apply() -> None:
            found = self.events[current.raceId][current.eventId]
            self._put_event(Event.model_validate({**found.model_dump(mode="json"), **changes}))

        return fake_item(ok, apply)

    def _put_event(self, event: Event) -> None:
        self.events.setdefault(event.raceId, {})[event.eventId] = Event.model_validate(event.model_dump(mode="json"))

    def _bump_listing(self) -> TransactItem:
        return fake_item(ALWAYS, lambda: setattr(self, "listing_count", self.listing_count + 1))


class FakeInventory:
    """The cap shards, in ``FakeTables.shards`` (where ``FakeHolds`` claims its places)."""

    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables

    def create_event_shards(self, race_id: str, event_id: str, caps: list[int]) -> None:
        with self.tables.lock:
            shards = self.tables.shards.setdefault((race_id, event_id), {})
            for n, cap in enumerate(caps):
                sk = shard_sk(n)
                if sk in shards:
                    raise ConditionFailed([0])
                shards[sk] = [cap, 0]

    def usage(self, race_id: str, event_id: str, *, consistent: bool = False) -> ShardUsage:
        with self.tables.lock:
            found = self.tables.shards.get((race_id, event_id), {})
            shards = [Shard(sk=sk, cap=cap, taken=taken) for sk, (cap, taken) in sorted(found.items())]
        return ShardUsage(cap=sum(s.cap for s in shards), taken=sum(s.taken for s in shards), shards=shards)

    def cap_change_items(
        self, race_id: str, event_id: str, changes: list[ShardChange], pooled: Mapping[str, int] | None = None
    ) -> list[TransactItem]:
        shards = self.tables.shards.setdefault((race_id, event_id), {})
        items = []
        for c in changes:
            kept = (pooled or {}).get(c.sk, 0)
            if c.old_cap is None:
                items.append(
                    fake_item(
                        lambda c=c: c.sk not in shards, lambda c=c, k=kept: shards.__setitem__(c.sk, [c.new_cap, k])
                    )
                )
            else:

                def grow(c: ShardChange = c, k: int = kept) -> None:
                    shards[c.sk][0] = c.new_cap
                    shards[c.sk][1] += k

                items.append(
                    fake_item(
                        lambda c=c, k=kept: (
                            c.sk in shards and shards[c.sk][0] == c.old_cap and shards[c.sk][1] <= c.new_cap - k
                        ),
                        grow,
                    )
                )
        return items


class FakeWindows:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.records: dict[str, WindowRecord] = {}

    def get(self, race_id: str) -> WindowRecord | None:
        with self.tables.lock:
            return self.records.get(race_id)

    def replace_item(self, race_id: str, seq: int, window: WindowRecord) -> TransactItem:
        def ok() -> bool:
            found = self.records.get(race_id)
            return found is None or found.seq == seq

        stored = window.model_copy(update={"seq": seq + 1})
        return fake_item(ok, lambda: self.records.__setitem__(race_id, stored))

    def guard_item(self, race_id: str, execution: str) -> TransactItem:
        def ok() -> bool:
            found = self.records.get(race_id)
            return found is not None and found.execution == execution

        return fake_item(ok, lambda: None)


class FakeAuditStore:
    def __init__(self, tables: FakeTables) -> None:
        self.tables = tables
        self.entries: dict[str, dict[str, AuditEntry]] = {}  # raceId -> sort key -> entry

    def put_item(self, entry: AuditEntry) -> TransactItem:
        sk = audit_sk(entry.at.isoformat(), entry.entryId)
        stored = AuditEntry.model_validate(entry.model_dump(mode="json"))
        race = self.entries.setdefault(entry.raceId, {})
        return fake_item(lambda: sk not in race, lambda: race.__setitem__(sk, stored))

    def scrub_personal_data(self) -> int:
        return 0  # the trail in memory was always written without addresses (AuditTrail.item)

    def page(self, race_id: str, limit: int, before: str | None = None) -> tuple[list[AuditEntry], str | None]:
        with self.tables.lock:
            race = self.entries.get(race_id, {})
            keys = [k for k in sorted(race, reverse=True) if before is None or k < before][:limit]
            entries = [race[k] for k in keys]
        # As DynamoDB: a page that reached its Limit says there may be more.
        return entries, (keys[-1] if keys and len(keys) == limit else None)

    def actions(self, race_id: str) -> list[str]:
        """The race's audited actions, oldest first (for assertions)."""
        with self.tables.lock:
            race = self.entries.get(race_id, {})
            return [race[k].action for k in sorted(race)]


class FakeWorkflow:
    """Executions by name; ``finish`` ends one as the state machine would, and
    ``fail_next_stop`` makes the next StopExecution fail (a lost call)."""

    ARN = "arn:aws:states:us-east-1:000000000000:stateMachine:RegistrationWindow"

    def __init__(self) -> None:
        self.executions: dict[str, dict[str, Any]] = {}
        self.stopped: list[str] = []
        self.fail_next_stop = 0

    def execution_arn(self, name: str) -> str:
        return self.ARN.replace(":stateMachine:", ":execution:", 1) + f":{name}"

    def start(self, name: str, payload: Mapping[str, str]) -> str:
        self.executions.setdefault(name, {"input": dict(payload), "status": "RUNNING"})
        return self.execution_arn(name)

    def stop(self, name: str, cause: str) -> None:
        if self.fail_next_stop:
            self.fail_next_stop -= 1
            raise RuntimeError("injected: StopExecution failed")
        found = self.executions.get(name)
        if found is not None and found["status"] == "RUNNING":
            found["status"] = "ABORTED"
            self.stopped.append(name)

    def status(self, name: str) -> str:
        found = self.executions.get(name)
        return str(found["status"]) if found is not None else "UNKNOWN"

    def finish(self, name: str, status: str = "SUCCEEDED") -> None:
        self.executions[name]["status"] = status

    def running(self) -> list[str]:
        return [n for n, e in self.executions.items() if e["status"] == "RUNNING"]


def _no_redis() -> redis.Redis:
    raise redis.ConnectionError("unit tests have no Redis: the cache reads through")


def local_cache() -> TieredCache:
    """The real caching hierarchy with its shared tier down (as when Redis is unavailable):
    values live in the in-process tier only, and nothing opens a socket."""
    return TieredCache(_no_redis, stamp_ttl=0.0)
