"""Where a ballot lives, in the Inventory table (keys: ``aws/keys.py``).

* **Applications** spread over ``BALLOT_APP_SHARDS`` partitions per event (a digest of the id),
  so the window's opening minute writes to several partitions, and the draw reads each on a
  thread of its own.
* **One application per address per race's ballot** by a claim item keyed by a digest of race
  and address, written in the same transaction as the application(s) it names. A pending
  application's claim carries its TTL: an address that never confirmed may apply again once it
  lapsed (the condition reads the TTL; DynamoDB's deletion may come days later).
* **Counts** on ``BALLOT_COUNT_SHARDS`` counter items per event, moved in the confirmation's and
  the withdrawal's transactions: the director's figures are a handful of reads, whatever the
  number of applications, and never counted twice (the application's state is the condition).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, Protocol

from racecap.aws.items import from_item, get_all, query_all, to_item, values
from racecap.aws.keys import (
    BALLOT_APP_PREFIX,
    BALLOT_APP_SHARDS,
    BALLOT_COUNT_PREFIX,
    BALLOT_COUNT_SHARDS,
    BALLOT_DRAW_SK,
    BALLOT_DUE_PARTITION,
    BALLOT_LIST_PREFIX,
    BALLOT_ORDER_PREFIX,
    ballot_app_key,
    ballot_app_pk,
    ballot_claim_key,
    ballot_count_key,
    ballot_pk,
    ballot_seed_key,
    key,
)
from racecap.aws.transactions import ConditionFailed, TransactItem, transact, update_item
from racecap.ballot.models import Application, DrawRecord

_NAMES = {"#state": "state", "#ttl": "ttl"}
DAY_PREFIX = "d#"


class Counts:
    def __init__(self, confirmed: int = 0, withdrawn: int = 0, by_day: dict[str, int] | None = None) -> None:
        self.confirmed = confirmed
        self.withdrawn = withdrawn
        self.by_day = by_day or {}


class BallotStore(Protocol):
    def seed(self, race_id: str, event_id: str) -> tuple[str, str] | None: ...

    def keep_seed(self, race_id: str, event_id: str, seed: str, commitment: str, at: str) -> tuple[str, str]: ...

    def put_pending(self, apps: list[Application], now: int) -> None: ...

    def claim(self, race_id: str, email: str) -> tuple[str, str] | None: ...

    def get(self, race_id: str, event_id: str, application_id: str) -> Application | None: ...

    def confirm(self, app: Application, day: str, at: str) -> None: ...

    def withdraw(self, app: Application, at: str, confirmed_day: str | None) -> None: ...

    def counts(self, race_id: str, event_id: str) -> Counts: ...

    def schedule(self, race_id: str, event_id: str, draw_at: str) -> None: ...

    def draw_record(self, race_id: str, event_id: str) -> DrawRecord | None: ...

    def page(self, race_id: str, event_id: str, prefix: str, page: int) -> str | None: ...


class DrawStore(BallotStore, Protocol):
    """What the draw job adds (``ballot.job``)."""

    def ticket_rows(self, race_id: str, event_id: str, shard: int) -> Iterator[tuple[str, str | None]]: ...

    def applications(
        self, race_id: str, event_id: str, shard: int, *, confirmed_only: bool
    ) -> Iterator[Application]: ...

    def applications_by_id(self, race_id: str, event_id: str, ids: list[str]) -> dict[str, Application]: ...

    def due(self, now: str) -> list[tuple[str, str]]: ...

    def done(self, race_id: str, event_id: str) -> None: ...

    def put_draw(self, record: DrawRecord) -> None: ...

    def advance(self, record: DrawRecord, **moved: Any) -> DrawRecord: ...

    def put_page(self, race_id: str, event_id: str, prefix: str, page: int, rows: str) -> None: ...

    def shards(self) -> range: ...


class DynamoBallots:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    # -- the seed --------------------------------------------------------------------------------
    def seed(self, race_id: str, event_id: str) -> tuple[str, str] | None:
        """(seed, commitment), or None before the ballot was first set."""
        resp = self._db.get_item(TableName=self._table, Key=ballot_seed_key(race_id, event_id), ConsistentRead=True)
        if "Item" not in resp:
            return None
        item = from_item(resp["Item"])
        return str(item["seed"]), str(item["commitment"])

    def keep_seed(self, race_id: str, event_id: str, seed: str, commitment: str, at: str) -> tuple[str, str]:
        """Write the event's seed once; a second call (two directors' saves) keeps the first."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={
                    **ballot_seed_key(race_id, event_id),
                    **to_item({"seed": seed, "commitment": commitment, "createdAt": at}),
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
            return seed, commitment
        except self._db.exceptions.ConditionalCheckFailedException:
            kept = self.seed(race_id, event_id)
            assert kept is not None
            return kept

    # -- applications ------------------------------------------------------------------------------
    def put_pending(self, apps: list[Application], now: int) -> None:
        """Each application with its address's claim, all or none. ``ConditionFailed`` names the
        claims (even indexes) of addresses that have a live application already."""
        items: list[TransactItem] = []
        for app in apps:
            claim = {"applicationId": app.applicationId, "eventId": app.eventId, "ttl": app.ttl}
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {**ballot_claim_key(app.raceId, app.email), **to_item(claim)},
                        # An address's claim stays while its application is live: pending (until
                        # its TTL) or confirmed (no TTL).
                        "ConditionExpression": "attribute_not_exists(pk) OR #ttl < :now",
                        "ExpressionAttributeNames": {"#ttl": "ttl"},
                        "ExpressionAttributeValues": values({":now": now}),
                    }
                }
            )
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": {
                            **ballot_app_key(app.raceId, app.eventId, app.applicationId),
                            **to_item(app.model_dump(exclude_none=True)),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        transact(self._db, items)

    def claim(self, race_id: str, email: str) -> tuple[str, str] | None:
        """(applicationId, eventId) of the address's live application in the race's ballot."""
        resp = self._db.get_item(TableName=self._table, Key=ballot_claim_key(race_id, email), ConsistentRead=True)
        if "Item" not in resp:
            return None
        item = from_item(resp["Item"])
        return str(item["applicationId"]), str(item["eventId"])

    def get(self, race_id: str, event_id: str, application_id: str) -> Application | None:
        resp = self._db.get_item(
            TableName=self._table, Key=ballot_app_key(race_id, event_id, application_id), ConsistentRead=True
        )
        return Application.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def confirm(self, app: Application, day: str, at: str) -> None:
        """PENDING → CONFIRMED, its claim kept for good, counted on the day. ``ConditionFailed``:
        0 it was no longer PENDING."""
        transact(
            self._db,
            [
                update_item(
                    self._table,
                    ballot_app_key(app.raceId, app.eventId, app.applicationId),
                    "SET #state = :confirmed, confirmedAt = :at REMOVE #ttl",
                    condition="#state = :pending",
                    names=_NAMES,
                    vals={":confirmed": "CONFIRMED", ":pending": "PENDING", ":at": at},
                ),
                update_item(
                    self._table,
                    ballot_claim_key(app.raceId, app.email),
                    "REMOVE #ttl",
                    condition="applicationId = :app",
                    names={"#ttl": "ttl"},
                    vals={":app": app.applicationId},
                ),
                self._count(app, {"confirmed": 1, f"{DAY_PREFIX}{day}": 1}),
            ],
        )

    def withdraw(self, app: Application, at: str, confirmed_day: str | None) -> None:
        """Out of the ballot, its personal data dropped and its address free to apply again; a
        confirmed one uncounted from the day it was counted on. ``ConditionFailed``: 0 its state moved."""
        items = [
            update_item(
                self._table,
                ballot_app_key(app.raceId, app.eventId, app.applicationId),
                "SET #state = :withdrawn, withdrawnAt = :at, email = :blank, firstName = :blank, "
                "lastName = :blank, dateOfBirth = :blank REMOVE #ttl, answers, questionsVersion",
                condition="#state = :was",
                names=_NAMES,
                vals={":withdrawn": "WITHDRAWN", ":at": at, ":blank": "", ":was": app.state},
            ),
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": ballot_claim_key(app.raceId, app.email),
                    "ConditionExpression": "attribute_not_exists(pk) OR applicationId = :app",
                    "ExpressionAttributeValues": values({":app": app.applicationId}),
                }
            },
        ]
        if app.state == "CONFIRMED" and confirmed_day:
            items.append(self._count(app, {"confirmed": -1, "withdrawn": 1, f"{DAY_PREFIX}{confirmed_day}": -1}))
        transact(self._db, items)

    def _count(self, app: Application, moves: dict[str, int]) -> TransactItem:
        names = {f"#c{i}": name for i, name in enumerate(moves)}
        vals = {f":v{i}": n for i, n in enumerate(moves.values())}
        expression = "ADD " + ", ".join(f"#c{i} :v{i}" for i in range(len(moves)))
        shard = random.randrange(BALLOT_COUNT_SHARDS)
        return update_item(
            self._table, ballot_count_key(app.raceId, app.eventId, shard), expression, names=names, vals=vals
        )

    # -- reading for the director and the draw -----------------------------------------------------
    def counts(self, race_id: str, event_id: str) -> Counts:
        items = query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :count)",
            ExpressionAttributeValues=values({":pk": ballot_pk(race_id, event_id), ":count": BALLOT_COUNT_PREFIX}),
            ConsistentRead=True,
        )
        total = Counts()
        for item in items:
            total.confirmed += int(item.get("confirmed", 0))
            total.withdrawn += int(item.get("withdrawn", 0))
            for name, n in item.items():
                if name.startswith(DAY_PREFIX):
                    day = name[len(DAY_PREFIX) :]
                    total.by_day[day] = total.by_day.get(day, 0) + int(n)
        return total

    def applications(self, race_id: str, event_id: str, shard: int, *, confirmed_only: bool) -> Iterator[Application]:
        """One shard's applications, page by page (the export and the draw read each shard apart)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :app)",
            "ExpressionAttributeValues": values(
                {":pk": ballot_app_pk(race_id, event_id, shard), ":app": BALLOT_APP_PREFIX}
                | ({":confirmed": "CONFIRMED"} if confirmed_only else {})
            ),
        }
        if confirmed_only:
            kwargs["FilterExpression"] = "#state = :confirmed"
            kwargs["ExpressionAttributeNames"] = {"#state": "state"}
        for item in query_all(self._db, **kwargs):
            yield Application.model_validate(item)

    def ticket_rows(self, race_id: str, event_id: str, shard: int) -> Iterator[tuple[str, str | None]]:
        """(application id, group id) of one shard's confirmed applications: ids only, so a
        million of them fit a Lambda's memory (``docs/ballot.md``)."""
        for item in query_all(
            self._db,
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :app)",
            FilterExpression="#state = :confirmed",
            ProjectionExpression="applicationId, groupId",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values(
                {":pk": ballot_app_pk(race_id, event_id, shard), ":app": BALLOT_APP_PREFIX, ":confirmed": "CONFIRMED"}
            ),
        ):
            yield str(item["applicationId"]), (str(item["groupId"]) if item.get("groupId") else None)

    def applications_by_id(self, race_id: str, event_id: str, ids: list[str]) -> dict[str, Application]:
        keys = [ballot_app_key(race_id, event_id, i) for i in ids]
        found = (Application.model_validate(item) for item in get_all(self._db, self._table, keys))
        return {a.applicationId: a for a in found}

    # -- the draw ------------------------------------------------------------------------------------
    def schedule(self, race_id: str, event_id: str, draw_at: str) -> None:
        """The ballot is due at ``draw_at``: in the draw job's to-do list until its draw is done."""
        self._db.update_item(
            TableName=self._table,
            Key=ballot_seed_key(race_id, event_id),
            UpdateExpression="SET gsi1pk = :due, gsi1sk = :at, raceId = :race, eventId = :event",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=values(
                {
                    ":due": BALLOT_DUE_PARTITION,
                    ":at": f"{draw_at}#{race_id}#{event_id}",
                    ":race": race_id,
                    ":event": event_id,
                }
            ),
        )

    def due(self, now: str) -> list[tuple[str, str]]:
        """(raceId, eventId) of ballots whose draw time has come and whose draw is not done."""
        items = query_all(
            self._db,
            TableName=self._table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :due AND gsi1sk <= :now",
            ExpressionAttributeValues=values({":due": BALLOT_DUE_PARTITION, ":now": f"{now}#~"}),
        )
        return [(str(i["raceId"]), str(i["eventId"])) for i in items]

    def done(self, race_id: str, event_id: str) -> None:
        self._db.update_item(
            TableName=self._table, Key=ballot_seed_key(race_id, event_id), UpdateExpression="REMOVE gsi1pk, gsi1sk"
        )

    def draw_record(self, race_id: str, event_id: str) -> DrawRecord | None:
        resp = self._db.get_item(
            TableName=self._table, Key=key(ballot_pk(race_id, event_id), BALLOT_DRAW_SK), ConsistentRead=True
        )
        return DrawRecord.model_validate(from_item(resp["Item"])) if "Item" in resp else None

    def put_draw(self, record: DrawRecord) -> None:
        """The draw's record, once (a second run that drew the same finds it and goes on from it)."""
        try:
            self._db.put_item(
                TableName=self._table,
                Item={**key(ballot_pk(record.raceId, record.eventId), BALLOT_DRAW_SK), **to_item(record.model_dump())},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            pass

    def advance(self, record: DrawRecord, **moved: Any) -> DrawRecord:
        names = {f"#a{i}": k for i, k in enumerate(moved)}
        vals = {f":v{i}": v for i, v in enumerate(moved.values())}
        self._db.update_item(
            TableName=self._table,
            Key=key(ballot_pk(record.raceId, record.eventId), BALLOT_DRAW_SK),
            UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(moved))),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values(vals),
        )
        return record.model_copy(update=moved)

    def put_page(self, race_id: str, event_id: str, prefix: str, page: int, rows: str) -> None:
        self._db.put_item(
            TableName=self._table,
            Item={**key(ballot_pk(race_id, event_id), f"{prefix}{page:06d}"), **to_item({"rows": rows})},
        )

    def page(self, race_id: str, event_id: str, prefix: str, page: int) -> str | None:
        resp = self._db.get_item(TableName=self._table, Key=key(ballot_pk(race_id, event_id), f"{prefix}{page:06d}"))
        return str(from_item(resp["Item"])["rows"]) if "Item" in resp else None

    @staticmethod
    def shards() -> range:
        return range(BALLOT_APP_SHARDS)


ORDER, LIST = BALLOT_ORDER_PREFIX, BALLOT_LIST_PREFIX


__all__ = ["BallotStore", "ConditionFailed", "Counts", "DrawStore", "DynamoBallots"]
