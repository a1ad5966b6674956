"""Race and event definitions in the Races table (keys: ``aws/keys.py``).

A race and its events share the race's partition, read in one query; listed races are
copied to the ``LISTING`` partition for the public list (one small partition, read through
the cache, never in bursts), whose version item moves on with every change to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from racecap.aws.items import from_item, query_all, to_item, values
from racecap.aws.keys import (
    EVENT_SK_PREFIX,
    LISTING_PK,
    RACE_SK,
    event_key,
    event_sk,
    listing_key,
    listing_sk,
    listing_version_key,
    owner_pk,
    race_key,
    race_pk,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact
from racecap.errors import Conflict
from racecap.races.models import Event, EventChanges, Race, RaceChanges


class RaceStore(Protocol):
    """Races and their events (the Races table): what runners read and directors change."""

    def get_race(self, race_id: str) -> tuple[Race, list[Event]] | None:
        """The race and its events in the director's order, read consistently; None: no race."""
        ...

    def race_version(self, race_id: str) -> int:
        """The race's version stamp; 0: no such race."""
        ...

    def list_published(self) -> list[Race]: ...

    def listing_version(self) -> int: ...

    def create(self, race: Race, events: list[Event], also: Sequence[TransactItem] = ()) -> None:
        """The race, its events and the listing in one transaction with ``also``; Conflict: the id exists."""
        ...

    def update_race(
        self,
        race_id: str,
        changes: RaceChanges,
        expected_version: int | None = None,
        also: Sequence[TransactItem] = (),
    ) -> Race: ...

    def apply_update(self, current: Race, changes: RaceChanges, also: Sequence[TransactItem] = ()) -> Race:
        """``changes`` and the next version, if the race is still at ``current.version``; else Conflict."""
        ...

    def list_by_owner(self, owner_id: str) -> list[Race]:
        """The owner's races, newest first."""
        ...

    def version_item(self, race: Race) -> TransactItem: ...

    def put_event_item(self, event: Event) -> TransactItem: ...

    def update_event_item(self, current: Event, changes: EventChanges) -> TransactItem: ...


class DynamoRaceStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def get_race(self, race_id: str) -> tuple[Race, list[Event]] | None:
        items = list(
            query_all(
                self._db,
                TableName=self._table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=values({":pk": race_pk(race_id)}),
                ConsistentRead=True,
            )
        )
        race = next((i for i in items if i["sk"] == RACE_SK), None)
        if race is None:
            return None
        events = sorted(
            (Event.model_validate(i) for i in items if i["sk"].startswith(EVENT_SK_PREFIX)), key=lambda e: e.position
        )
        return Race.model_validate(race), events

    def race_version(self, race_id: str) -> int:
        resp = self._db.get_item(
            TableName=self._table,
            Key=race_key(race_id),
            ProjectionExpression="version",
            ConsistentRead=True,
        )
        item = resp.get("Item")
        return int(from_item(item)["version"]) if item else 0

    def list_published(self) -> list[Race]:
        items = query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=values({":pk": LISTING_PK}),
        )
        races = (Race.model_validate(i) for i in items)
        return [r for r in races if r.listing == "LISTED"]

    def listing_version(self) -> int:
        resp = self._db.get_item(TableName=self._table, Key=listing_version_key())
        item = resp.get("Item")
        return int(from_item(item)["version"]) if item else 0

    def create(self, race: Race, events: list[Event], also: Sequence[TransactItem] = ()) -> None:
        now = datetime.now(UTC).isoformat()
        race_doc = race.model_dump(mode="json")
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            **race_doc,
                            "pk": race_pk(race.raceId),
                            "sk": RACE_SK,
                            "gsi1pk": owner_pk(race.ownerId),
                            "gsi1sk": f"{now}#{race.raceId}",
                            "createdAt": now,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            *(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": to_item(
                            {
                                **e.model_dump(mode="json"),
                                "pk": race_pk(race.raceId),
                                "sk": event_sk(e.eventId),
                            }
                        ),
                    }
                }
                for e in events
            ),
            self._bump_listing(),
            *also,
        ]
        if race.listing == "LISTED":
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": to_item({**race_doc, "pk": LISTING_PK, "sk": listing_sk(race.raceDate, race.raceId)}),
                    }
                }
            )
        try:
            transact(self._db, items)
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
        """Apply ``changes`` to the race, bump its version and keep the public listing in step.

        ``expected_version`` makes the edit optimistic: a director editing a stale copy
        gets a Conflict instead of silently overwriting someone else's change. ``also``
        joins other items (an audit entry, a guard) to the same transaction; if one of
        their conditions fails the edit does not happen and Conflict is raised.
        """
        found = self.get_race(race_id)
        if found is None:
            raise KeyError(race_id)
        current, _ = found
        if expected_version is not None and current.version != expected_version:
            raise Conflict("The race was changed meanwhile; reload it and try again.")
        return self.apply_update(current, changes, also)

    def apply_update(self, current: Race, changes: RaceChanges, also: Sequence[TransactItem] = ()) -> Race:
        """``update_race`` on a race already read (conditional on its version)."""
        race_id = current.raceId
        updated = current.model_copy(update={**changes, "version": current.version + 1})
        doc = updated.model_dump(mode="json")
        sets = {k: v for k, v in doc.items() if k not in ("raceId", "ownerId")}
        names = {f"#{i}": k for i, k in enumerate(sets)}
        vals = {f":{i}": v for i, v in enumerate(sets.values())} | {":cur": current.version}
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": race_key(race_id),
                    "UpdateExpression": "SET " + ", ".join(f"#{i} = :{i}" for i in range(len(sets))),
                    "ConditionExpression": "version = :cur",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values(vals),
                }
            },
            self._bump_listing(),
            *also,
        ]
        listed, was_listed = updated.listing == "LISTED", current.listing == "LISTED"
        if was_listed and (not listed or updated.raceDate != current.raceDate):
            items.append({"Delete": {"TableName": self._table, "Key": listing_key(current.raceDate, race_id)}})
        if listed:
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": to_item({**doc, "pk": LISTING_PK, "sk": listing_sk(updated.raceDate, race_id)}),
                    }
                }
            )
        try:
            transact(self._db, items)
        except ConditionFailed as exc:
            raise Conflict("The race was changed meanwhile; reload it and try again.") from exc
        return updated

    # -- what directors see and change ---------------------------------------------------
    def list_by_owner(self, owner_id: str) -> list[Race]:
        items = query_all(
            self._db,
            TableName=self._table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :o",
            ExpressionAttributeValues=values({":o": owner_pk(owner_id)}),
            ScanIndexForward=False,
        )
        return [Race.model_validate(i) for i in items]

    def version_item(self, race: Race) -> TransactItem:
        """Bump the race's version (orphaning every cached copy), if nobody else did first."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": race_key(race.raceId),
                "UpdateExpression": "SET version = :next",
                "ConditionExpression": "version = :cur",
                "ExpressionAttributeValues": values({":cur": race.version, ":next": race.version + 1}),
            }
        }

    def put_event_item(self, event: Event) -> TransactItem:
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {**event.model_dump(mode="json"), "pk": race_pk(event.raceId), "sk": event_sk(event.eventId)}
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def update_event_item(self, current: Event, changes: EventChanges) -> TransactItem:
        """Change an event, provided its cap is still the one read (caps move with shards)."""
        names = {f"#{i}": k for i, k in enumerate(changes)}
        vals = {f":{i}": v for i, v in enumerate(changes.values())} | {":cap0": current.cap}
        return {
            "Update": {
                "TableName": self._table,
                "Key": event_key(current.raceId, current.eventId),
                "UpdateExpression": "SET " + ", ".join(f"#{i} = :{i}" for i in range(len(changes))),
                "ConditionExpression": "attribute_exists(pk) AND cap = :cap0",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values(vals),
            }
        }

    def _bump_listing(self) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self._table,
                "Key": listing_version_key(),
                "UpdateExpression": "ADD version :one",
                "ExpressionAttributeValues": values({":one": 1}),
            }
        }
