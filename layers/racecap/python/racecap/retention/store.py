"""What the retention job reads and deletes (``retention.service``; keys: ``aws/keys.py``).

Finding due races scans the Races table: it holds races and events only (a few items per
race, never bursts), the job runs hourly, and a filter keeps only unpurged race items whose
date is old enough; an index kept for this alone would cost a write on every race edit.
A race's registrations come from the event's bib index (gsi1, every attribute projected),
filtered to those not yet purged, so a resumed run reads past the done ones but writes
nothing for them.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from racecap.aws.items import from_item, query_raw, values
from racecap.aws.keys import (
    BALLOT_APP_PREFIX,
    BALLOT_APP_SHARDS,
    RACE_SK,
    WAITLIST_ENTRY_PREFIX,
    WAITLIST_OFFER_PREFIX,
    ballot_app_pk,
    ballot_claim_key,
    email_key,
    event_bib_pk,
    hold_key,
    race_key,
    reg_key,
    waitlist_pk,
)
from racecap.aws.transactions import TransactItem
from racecap.questions.rules import kept_after_purge, waiver_after_purge
from racecap.races.models import Race
from racecap.registration.models import Registration

# Records are written whole (model_dump), so a record not yet purged carries purgedAt as a
# NULL attribute, or none at all if it predates the field: either way, not a string.
_UNPURGED = "NOT attribute_type(purgedAt, :s)"


class DynamoRetention:
    def __init__(self, client: Any, races_table: str, inventory_table: str, registrations_table: str) -> None:
        self._db = client
        self._races = races_table
        self._inv = inventory_table
        self._regs = registrations_table

    def unpurged_races(self, raced_on_or_before: str) -> Iterator[Race]:
        kwargs: dict[str, Any] = {
            "TableName": self._races,
            "FilterExpression": f"sk = :race AND {_UNPURGED} AND raceDate <= :day",
            "ExpressionAttributeValues": values({":race": RACE_SK, ":day": raced_on_or_before, ":s": "S"}),
        }
        while True:
            page = self._db.scan(**kwargs)
            for item in page.get("Items", []):
                yield Race.model_validate(from_item(item))
            if not page.get("LastEvaluatedKey"):
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def unpurged_registrations(self, race_id: str, event_id: str) -> Iterator[Registration]:
        items = query_raw(
            self._db,
            TableName=self._regs,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :pk",
            FilterExpression=_UNPURGED,
            ExpressionAttributeValues=values({":pk": event_bib_pk(race_id, event_id), ":s": "S"}),
        )
        return (Registration.model_validate(from_item(i)) for i in items)

    def purge_items(self, reg: Registration, age: int | None, at: str) -> list[TransactItem]:
        # Emptied rather than removed: a Registration stays a valid record for every reader
        # (status, lists, results), and "" says "deleted" as plainly as a missing attribute.
        sets = "email = :empty, dateOfBirth = :empty, chargeId = :empty, purgedAt = :at"
        vals: dict[str, Any] = {":empty": "", ":at": at}
        if age is not None:
            sets += ", ageOnRaceDay = :age"
            vals[":age"] = age
        # A pending offer names its address (and details); a pending switch, the answers for its event.
        removes = "refundId, disputeId, transferOffer, pendingSwitch"
        kept = kept_after_purge(reg.answers)  # answers are personal data: all but the division go
        if kept is not None:
            sets += ", answers = :kept"
            vals[":kept"] = kept
        elif reg.answers is not None:
            removes += ", answers"
        if reg.waiver is not None:  # kept: which text was accepted, when; gone: the guardian's name
            sets += ", waiver = :waiver"
            vals[":waiver"] = waiver_after_purge(reg.waiver)
        return [
            {
                "Update": {
                    "TableName": self._regs,
                    "Key": reg_key(reg.registrationId),
                    "UpdateExpression": f"SET {sets} REMOVE {removes}",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": values(vals),
                }
            },
            # The claim's key is the email itself; the hold carries the payment attempt.
            {"Delete": {"TableName": self._inv, "Key": email_key(reg.raceId, reg.email)}},
            {"Delete": {"TableName": self._inv, "Key": hold_key(reg.holdId)}},
        ]

    def waitlist_items(self, race_id: str, event_id: str) -> list[TransactItem]:
        """Every entry and offer of the event's waitlist, deleted (each holds an address and a name;
        the line's counters, figures alone, stay)."""
        found: list[dict[str, Any]] = []
        for prefix in (WAITLIST_ENTRY_PREFIX, WAITLIST_OFFER_PREFIX):
            found += query_raw(
                self._db,
                TableName=self._inv,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
                ProjectionExpression="pk, sk",
                ExpressionAttributeValues=values({":pk": waitlist_pk(race_id, event_id), ":prefix": prefix}),
                ConsistentRead=True,
            )
        return [{"Delete": {"TableName": self._inv, "Key": {"pk": i["pk"], "sk": i["sk"]}}} for i in found]

    def ballot_items(self, race_id: str, event_id: str) -> Iterator[TransactItem]:
        """Every application of the event's ballot and its address's claim, deleted, streamed page
        by page (a million of them never sit in memory at once). The draw's pages (application ids,
        published) and its counters stay."""
        for shard in range(BALLOT_APP_SHARDS):
            for item in query_raw(
                self._db,
                TableName=self._inv,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :app)",
                ProjectionExpression="pk, sk, email",
                ExpressionAttributeValues=values(
                    {":pk": ballot_app_pk(race_id, event_id, shard), ":app": BALLOT_APP_PREFIX}
                ),
            ):
                yield {"Delete": {"TableName": self._inv, "Key": {"pk": item["pk"], "sk": item["sk"]}}}
                email = item.get("email", {}).get("S")
                if email:  # a withdrawn one has no address left, and no claim
                    yield {"Delete": {"TableName": self._inv, "Key": ballot_claim_key(race_id, email)}}

    def mark_purged_item(self, race: Race, at: datetime) -> TransactItem:
        return {
            "Update": {
                "TableName": self._races,
                "Key": race_key(race.raceId),
                "UpdateExpression": "SET purgedAt = :at",
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeValues": values({":at": at.isoformat()}),
            }
        }
