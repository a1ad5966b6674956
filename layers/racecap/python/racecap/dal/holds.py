"""Holds, payment attempts and email claims in the Inventory table.

Layout (pk / sk):
  HOLD#<holdId>              / HOLD   a held place; gsi1 = LIVE#<n> / <expiresAt> while
                                      it can still expire (sparse: removed once queued)
  EMAIL#<raceId>#<email>     / EMAIL  at most one per race: the email's claim
  CAP#<raceId>#<eventId>     / SHARD#<nn>  the cap counter shards (see inventory.py)

Every state change that moves a place or an email is one DynamoDB transaction, so a
crash between two writes can never leak a place or strand an email claim.

Hold states: HELD → PAYING → QUEUED → CONFIRMED, or HELD/PAYING → RELEASED | EXPIRED,
and PAYING → HELD on a declined card (the runner may try another).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from racecap.dal.dynamo import from_item, query_all, to_item, values
from racecap.dal.inventory import cap_pk
from racecap.retry import cancellation_codes, retry_contention

LIVE_PARTITIONS = 8  # spreads the sweeper's index over 8 GSI partitions
TTL_AFTER_EXPIRY = timedelta(days=30)  # backstop clean-up of old hold records only


def hold_key(hold_id: str) -> dict[str, Any]:
    return to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"})


def email_key(race_id: str, email: str) -> dict[str, Any]:
    return to_item({"pk": f"EMAIL#{race_id}#{email}", "sk": "EMAIL"})


def shard_key(race_id: str, event_id: str, shard: str) -> dict[str, Any]:
    return to_item({"pk": cap_pk(race_id, event_id), "sk": shard})


def live_partition(hold_id: str) -> str:
    n = int(hashlib.sha256(hold_id.encode()).hexdigest()[:8], 16) % LIVE_PARTITIONS
    return f"LIVE#{n}"


@dataclass(frozen=True)
class Attempt:
    """One try at paying for a hold: same runner + same card = same attempt (same key)."""

    key: str
    email: str
    firstName: str
    lastName: str
    dateOfBirth: str
    amountCents: int
    currency: str
    startedAt: str


class BeginOutcome:
    STARTED = "STARTED"
    HOLD_GONE = "HOLD_GONE"
    EMAIL_TAKEN = "EMAIL_TAKEN"


class DynamoHolds:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    # -- places -------------------------------------------------------------------------
    def claim(
        self,
        race_id: str,
        event_id: str,
        shards: list[str],
        hold: dict[str, Any],
        avoid: set[str] | None = None,
    ) -> str | None:
        """Take one place on some shard with room; None when every shard is full."""
        order = random.sample(shards, len(shards))
        if avoid:  # shards seen full recently go last, not never: places come back
            order.sort(key=lambda s: s in avoid)
        item = {
            **hold,
            "pk": f"HOLD#{hold['holdId']}",
            "sk": "HOLD",
            "gsi1pk": live_partition(hold["holdId"]),
            "gsi1sk": hold["expiresAt"],
            "ttl": int(datetime.fromisoformat(hold["expiresAt"]).timestamp() + TTL_AFTER_EXPIRY.total_seconds()),
        }
        for shard in order:
            item["shard"] = shard
            if self._claim_on(race_id, event_id, shard, item):
                return shard
            if avoid is not None:
                avoid.add(shard)
        return None

    def _claim_on(self, race_id: str, event_id: str, shard: str, item: dict[str, Any]) -> bool:
        def attempt() -> bool:
            try:
                self._db.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self._table,
                                "Key": shard_key(race_id, event_id, shard),
                                "UpdateExpression": "SET taken = taken + :one",
                                "ConditionExpression": "taken < cap",
                                "ExpressionAttributeValues": values({":one": 1}),
                            }
                        },
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": to_item(item),
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ]
                )
                return True
            except self._db.exceptions.TransactionCanceledException as exc:
                if cancellation_codes(exc)[:1] == ["ConditionalCheckFailed"]:
                    return False  # this shard is full
                raise

        return retry_contention(attempt)

    def get(self, hold_id: str) -> dict[str, Any] | None:
        resp = self._db.get_item(TableName=self._table, Key=hold_key(hold_id), ConsistentRead=True)
        return from_item(resp["Item"]) if "Item" in resp else None

    def release(self, hold: dict[str, Any], new_status: str, *, now: datetime | None = None) -> bool:
        """Give a HELD hold's place back (runner cancelled, or it expired)."""
        condition = "#s = :held"
        vals: dict[str, Any] = {":held": "HELD", ":new": new_status}
        if new_status == "EXPIRED":
            condition += " AND expiresAt <= :now"
            vals[":now"] = (now or datetime.now(UTC)).isoformat()
        return self._transition_and_return_place(hold, condition, vals)

    def _transition_and_return_place(
        self,
        hold: dict[str, Any],
        condition: str,
        vals: dict[str, Any],
        extra: list[dict[str, Any]] | None = None,
    ) -> bool:
        names = {"#s": "status", **({"#k": "key"} if "#k" in condition else {})}

        def attempt() -> bool:
            try:
                self._db.transact_write_items(
                    TransactItems=[
                        {
                            "Update": {
                                "TableName": self._table,
                                "Key": hold_key(hold["holdId"]),
                                "UpdateExpression": "SET #s = :new REMOVE gsi1pk, gsi1sk",
                                "ConditionExpression": condition,
                                "ExpressionAttributeNames": names,
                                "ExpressionAttributeValues": values(vals),
                            }
                        },
                        {
                            "Update": {
                                "TableName": self._table,
                                "Key": shard_key(hold["raceId"], hold["eventId"], hold["shard"]),
                                "UpdateExpression": "SET taken = taken + :minus",
                                "ExpressionAttributeValues": values({":minus": -1}),
                            }
                        },
                        *(extra or []),
                    ]
                )
                return True
            except self._db.exceptions.TransactionCanceledException as exc:
                if cancellation_codes(exc)[:1] == ["ConditionalCheckFailed"]:
                    return False  # someone else moved the hold first
                raise

        return retry_contention(attempt)

    # -- paying -------------------------------------------------------------------------------
    def begin_payment(self, hold: dict[str, Any], attempt: Attempt, now: datetime) -> str:
        """Claim the email for the race and move the hold to PAYING, atomically.

        The same attempt may begin again (a retry after a crash or a lost response);
        a different attempt cannot while one is paying.
        """
        email_owner = "attribute_not_exists(pk) OR registrationId = :rid"
        items = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": hold_key(hold["holdId"]),
                    "UpdateExpression": "SET #s = :paying, attempt = :attempt",
                    "ConditionExpression": (
                        "(#s = :held AND expiresAt > :now) OR (#s = :paying AND attempt.#k = :key)"
                    ),
                    "ExpressionAttributeNames": {"#s": "status", "#k": "key"},
                    "ExpressionAttributeValues": values(
                        {
                            ":paying": "PAYING",
                            ":held": "HELD",
                            ":now": now.isoformat(),
                            ":attempt": attempt.__dict__,
                            ":key": attempt.key,
                        }
                    ),
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            "pk": f"EMAIL#{hold['raceId']}#{attempt.email}",
                            "sk": "EMAIL",
                            "registrationId": hold["registrationId"],
                            "holdId": hold["holdId"],
                            "eventId": hold["eventId"],
                            "status": "CLAIMED",
                        }
                    ),
                    "ConditionExpression": email_owner,
                    "ExpressionAttributeValues": values({":rid": hold["registrationId"]}),
                }
            },
        ]

        def attempt_once() -> str:
            try:
                self._db.transact_write_items(TransactItems=items)
                return BeginOutcome.STARTED
            except self._db.exceptions.TransactionCanceledException as exc:
                codes = cancellation_codes(exc)
                if codes and codes[0] == "ConditionalCheckFailed":
                    return BeginOutcome.HOLD_GONE
                if len(codes) > 1 and codes[1] == "ConditionalCheckFailed":
                    return BeginOutcome.EMAIL_TAKEN
                raise

        return retry_contention(attempt_once)

    def payment_declined(self, hold: dict[str, Any], attempt: Attempt) -> None:
        """Back to HELD, email released: the runner keeps the place and may try another card."""
        self._run(
            [
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": hold_key(hold["holdId"]),
                        "UpdateExpression": "SET #s = :held, lastDecline = :now REMOVE attempt",
                        "ConditionExpression": "#s = :paying AND attempt.#k = :key",
                        "ExpressionAttributeNames": {"#s": "status", "#k": "key"},
                        "ExpressionAttributeValues": values(
                            {
                                ":held": "HELD",
                                ":paying": "PAYING",
                                ":key": attempt.key,
                                ":now": datetime.now(UTC).isoformat(),
                            }
                        ),
                    }
                },
                self._release_email(hold, attempt.email),
            ]
        )

    def abandon_payment(self, hold: dict[str, Any], attempt: Attempt) -> bool:
        """An attempt that never charged, found after the hold expired: release all of it."""
        vals = {":paying": "PAYING", ":key": attempt.key, ":new": "EXPIRED"}
        return self._transition_and_return_place(
            hold,
            "#s = :paying AND attempt.#k = :key",
            vals,
            extra=[self._release_email(hold, attempt.email)],
        )

    def _release_email(self, hold: dict[str, Any], email: str) -> dict[str, Any]:
        return {
            "Delete": {
                "TableName": self._table,
                "Key": email_key(hold["raceId"], email),
                "ConditionExpression": "registrationId = :rid AND #s = :claimed",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": values({":rid": hold["registrationId"], ":claimed": "CLAIMED"}),
            }
        }

    def mark_queued(self, hold: dict[str, Any], attempt: Attempt, charge_id: str, now: datetime) -> None:
        """Paid and on the queue: the hold can no longer expire (leaves the sweeper's index)."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=hold_key(hold["holdId"]),
                UpdateExpression=("SET #s = :queued, chargeId = :charge, queuedAt = :now REMOVE gsi1pk, gsi1sk"),
                ConditionExpression="#s = :paying AND attempt.#k = :key",
                ExpressionAttributeNames={"#s": "status", "#k": "key"},
                ExpressionAttributeValues=values(
                    {
                        ":queued": "QUEUED",
                        ":paying": "PAYING",
                        ":key": attempt.key,
                        ":charge": charge_id,
                        ":now": now.isoformat(),
                    }
                ),
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            pass  # already QUEUED/CONFIRMED by a concurrent retry or the writer: same outcome

    def _run(self, items: list[dict[str, Any]]) -> None:
        retry_contention(lambda: self._db.transact_write_items(TransactItems=items))

    # -- the sweeper's view ----------------------------------------------------------------------
    def expired(self, now: datetime, limit_per_partition: int = 500) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for n in range(LIVE_PARTITIONS):
            page = query_all(
                self._db,
                TableName=self._table,
                IndexName="gsi1",
                KeyConditionExpression="gsi1pk = :p AND gsi1sk <= :now",
                ExpressionAttributeValues=values({":p": f"LIVE#{n}", ":now": now.isoformat()}),
                Limit=limit_per_partition,
            )
            out.extend(page)
        return out


def attempt_from(item: dict[str, Any]) -> Attempt:
    return Attempt(**{k: item[k] for k in Attempt.__dataclass_fields__})


def expiry(now: datetime, minutes: int) -> datetime:
    return now + timedelta(minutes=minutes)


def live_counts(client: Any, table: str, race_id: str) -> dict[str, int]:
    """Places held right now (HELD or PAYING) per event of one race, for directors' stats.

    Reads the sweeper's sparse index (only holds that can still expire are in it), so it
    costs reads in proportion to the holds live across all races at this moment: cheap
    on a quiet day, a few MB at the peak of a burst — the stats are cached briefly.
    """
    counts: dict[str, int] = {}
    for n in range(LIVE_PARTITIONS):
        for item in query_all(
            client,
            TableName=table,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :p",
            FilterExpression="raceId = :r",
            ProjectionExpression="eventId",
            ExpressionAttributeValues=values({":p": f"LIVE#{n}", ":r": race_id}),
        ):
            counts[item["eventId"]] = counts.get(item["eventId"], 0) + 1
    return counts
