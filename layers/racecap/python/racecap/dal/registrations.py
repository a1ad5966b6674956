"""Confirmed registrations (Registrations table) and the counters the writer keeps.

Layout:
  Registrations  REG#<registrationId> / REG     gsi1 = EVENT#<raceId>#<eventId> / BIB#<bib:08d>
  Inventory      BIB#<raceId>#<eventId> / BIB   next bib to give (bibs start at 1)
  Inventory      STATS#<raceId>#<eventId> / STATS  confirmed, revenueCents, cancelled, refundedCents
  Inventory      STATS#<raceId>#<eventId> / MIN#<YYYY-MM-DDTHH:MM>  confirmed in that UTC minute

The writer confirms a whole batch for one event in ONE transaction: the bib counter
moves from n to n+k only together with the k registrations that take bibs n+1..n+k, so
bibs have no gaps and no duplicates whatever crashes or redeliveries happen.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from racecap.dal.dynamo import from_item, query_all, query_raw, to_item, values
from racecap.dal.holds import email_key, hold_key, shard_key
from racecap.dal.transactions import TransactItem
from racecap.retry import cancellation_codes, retry_contention

MAX_PER_TRANSACTION = 30  # 3 items per registration + counter + stats + minute stays under 100


def stats_pk(race_id: str, event_id: str) -> str:
    return f"STATS#{race_id}#{event_id}"


def minute_sk(at_iso: str) -> str:
    """``MIN#YYYY-MM-DDTHH:MM`` (UTC) of an ISO timestamp."""
    return "MIN#" + datetime.fromisoformat(at_iso).astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def reg_key(registration_id: str) -> dict[str, Any]:
    return to_item({"pk": f"REG#{registration_id}", "sk": "REG"})


class CounterMoved(Exception):
    """Another writer took bibs first; read the counter again."""


class DuplicateRegistration(Exception):
    """A registration in the batch was confirmed meanwhile; drop it and retry."""


class DynamoRegistrations:
    def __init__(self, client: Any, registrations_table: str, inventory_table: str) -> None:
        self._db = client
        self._regs = registrations_table
        self._inv = inventory_table

    def get(self, registration_id: str, consistent: bool = True) -> dict[str, Any] | None:
        resp = self._db.get_item(TableName=self._regs, Key=reg_key(registration_id), ConsistentRead=consistent)
        return from_item(resp["Item"]) if "Item" in resp else None

    def existing(self, registration_ids: list[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(registration_ids), 100):
            keys = [reg_key(r) for r in registration_ids[start : start + 100]]
            request: dict[str, Any] = {self._regs: {"Keys": keys, "ConsistentRead": True}}
            while request:
                resp = self._db.batch_get_item(RequestItems=request)
                for item in resp["Responses"].get(self._regs, []):
                    doc = from_item(item)
                    found[doc["registrationId"]] = doc
                request = resp.get("UnprocessedKeys") or {}
        return found

    def next_bib(self, race_id: str, event_id: str) -> int:
        resp = self._db.get_item(
            TableName=self._inv,
            Key=to_item({"pk": f"BIB#{race_id}#{event_id}", "sk": "BIB"}),
            ConsistentRead=True,
        )
        return int(from_item(resp["Item"])["next"]) if "Item" in resp else 1

    def confirm_batch(self, race_id: str, event_id: str, first_bib: int, regs: list[dict[str, Any]]) -> None:
        """Write ``regs`` with bibs first_bib.. in one transaction (see module doc)."""
        k = len(regs)
        counter_key = to_item({"pk": f"BIB#{race_id}#{event_id}", "sk": "BIB"})
        counter_cond = "attribute_not_exists(pk)" if first_bib == 1 else "#n = :cur"
        counter_vals = {":next": first_bib + k} | ({} if first_bib == 1 else {":cur": first_bib})
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": counter_key,
                    "UpdateExpression": "SET #n = :next",
                    "ConditionExpression": counter_cond,
                    "ExpressionAttributeNames": {"#n": "next"},
                    "ExpressionAttributeValues": values(counter_vals),
                }
            },
            # Registrations per minute for directors' live stats: one counter per minute,
            # written as often as the STATS item (once per batch), never per runner.
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": to_item({"pk": stats_pk(race_id, event_id), "sk": minute_sk(regs[0]["confirmedAt"])}),
                    "UpdateExpression": "ADD confirmed :k",
                    "ExpressionAttributeValues": values({":k": k}),
                }
            },
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": to_item({"pk": f"STATS#{race_id}#{event_id}", "sk": "STATS"}),
                    "UpdateExpression": "ADD confirmed :k, revenueCents :r",
                    "ExpressionAttributeValues": values({":k": k, ":r": sum(int(r["amountCents"]) for r in regs)}),
                }
            },
        ]
        for offset, reg in enumerate(regs):
            bib = first_bib + offset
            rid = reg["registrationId"]
            items += [
                {
                    "Put": {
                        "TableName": self._regs,
                        "Item": to_item(
                            {
                                **reg,
                                "pk": f"REG#{rid}",
                                "sk": "REG",
                                "bib": bib,
                                "status": "CONFIRMED",
                                "gsi1pk": f"EVENT#{race_id}#{event_id}",
                                "gsi1sk": f"BIB#{bib:08d}",
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
                {
                    "Update": {
                        "TableName": self._inv,
                        "Key": hold_key(reg["holdId"]),
                        "UpdateExpression": "SET #s = :confirmed, bib = :bib REMOVE gsi1pk, gsi1sk",
                        "ConditionExpression": "registrationId = :rid",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": values({":confirmed": "CONFIRMED", ":bib": bib, ":rid": rid}),
                    }
                },
                {
                    "Update": {
                        "TableName": self._inv,
                        "Key": email_key(race_id, reg["email"]),
                        "UpdateExpression": "SET #s = :confirmed",
                        "ConditionExpression": "registrationId = :rid",
                        "ExpressionAttributeNames": {"#s": "status"},
                        "ExpressionAttributeValues": values({":confirmed": "CONFIRMED", ":rid": rid}),
                    }
                },
            ]

        def attempt() -> None:
            try:
                self._db.transact_write_items(TransactItems=items)
            except self._db.exceptions.TransactionCanceledException as exc:
                codes = cancellation_codes(exc)
                if codes and codes[0] == "ConditionalCheckFailed":
                    raise CounterMoved() from exc
                if "ConditionalCheckFailed" in codes:
                    raise DuplicateRegistration() from exc
                raise

        retry_contention(attempt)

    # -- directors: reading -------------------------------------------------------------------
    def event_page(self, race_id: str, event_id: str, after_bib: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` registrations of one event in bib order after ``after_bib``
        (flat dicts of ``ROW_FIELDS``); and whether the event has more."""
        resp = self._db.query(**self._after_bib(race_id, event_id, after_bib), Limit=limit)
        return [flat(i) for i in resp.get("Items", [])], bool(resp.get("LastEvaluatedKey"))

    def event_rows(self, race_id: str, event_id: str, after_bib: int = 0) -> Iterator[dict[str, Any]]:
        """Every registration of one event after ``after_bib``, in bib order, page by page."""
        yield from (flat(i) for i in query_raw(self._db, **self._after_bib(race_id, event_id, after_bib)))

    def _after_bib(self, race_id: str, event_id: str, after_bib: int) -> dict[str, Any]:
        """One event's registrations in bib order, after ``after_bib`` (the gsi1 query)."""
        return {
            "TableName": self._regs,
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk AND gsi1sk > :after",
            "ExpressionAttributeValues": values(
                {":pk": f"EVENT#{race_id}#{event_id}", ":after": f"BIB#{after_bib:08d}"}
            ),
            "ProjectionExpression": _PROJECTION,
            "ExpressionAttributeNames": _PROJECTION_NAMES,
        }

    def by_bib(self, race_id: str, event_id: str, bib: int) -> dict[str, Any] | None:
        resp = self._db.query(
            TableName=self._regs,
            IndexName="gsi1",
            KeyConditionExpression="gsi1pk = :pk AND gsi1sk = :bib",
            ExpressionAttributeValues=values({":pk": f"EVENT#{race_id}#{event_id}", ":bib": f"BIB#{bib:08d}"}),
            ProjectionExpression=_PROJECTION,
            ExpressionAttributeNames=_PROJECTION_NAMES,
        )
        items = resp.get("Items", [])
        return flat(items[0]) if items else None

    def by_email(self, race_id: str, email: str) -> dict[str, Any] | None:
        """The race's registration for an email, through the email's claim (one read each)."""
        resp = self._db.get_item(TableName=self._inv, Key=email_key(race_id, email), ConsistentRead=True)
        claim = from_item(resp["Item"]) if "Item" in resp else None
        if claim is None or claim.get("status") != "CONFIRMED":
            return None
        return self.get(claim["registrationId"])

    def stats(self, race_id: str, event_id: str) -> dict[str, int]:
        resp = self._db.get_item(
            TableName=self._inv, Key=to_item({"pk": stats_pk(race_id, event_id), "sk": "STATS"}), ConsistentRead=True
        )
        item = from_item(resp["Item"]) if "Item" in resp else {}
        return {k: int(item.get(k, 0)) for k in ("confirmed", "revenueCents", "cancelled", "refundedCents")}

    def per_minute(self, race_id: str, event_id: str, since: str) -> dict[str, int]:
        """Confirmations per minute from ``since`` (``YYYY-MM-DDTHH:MM``) on."""
        items = query_all(
            self._db,
            TableName=self._inv,
            KeyConditionExpression="pk = :pk AND sk >= :since",
            ExpressionAttributeValues=values({":pk": stats_pk(race_id, event_id), ":since": f"MIN#{since}"}),
        )
        return {i["sk"].removeprefix("MIN#"): int(i["confirmed"]) for i in items if i["sk"].startswith("MIN#")}

    # -- directors: cancelling -----------------------------------------------------------------
    def begin_cancel_item(self, registration_id: str, now: str, by: str) -> TransactItem:
        """CONFIRMED → CANCELLING: the director's decision, recorded before any money moves."""
        return {
            "Update": {
                "TableName": self._regs,
                "Key": reg_key(registration_id),
                "UpdateExpression": "SET #s = :cancelling, cancelRequestedAt = :now, cancelledBy = :by",
                "ConditionExpression": "#s = :confirmed",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": values(
                    {":cancelling": "CANCELLING", ":confirmed": "CONFIRMED", ":now": now, ":by": by}
                ),
            }
        }

    def undo_cancel_item(self, registration_id: str) -> TransactItem:
        return {
            "Update": {
                "TableName": self._regs,
                "Key": reg_key(registration_id),
                "UpdateExpression": "SET #s = :confirmed REMOVE cancelRequestedAt, cancelledBy",
                "ConditionExpression": "#s = :cancelling",
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": values({":cancelling": "CANCELLING", ":confirmed": "CONFIRMED"}),
            }
        }

    def finish_cancel_items(
        self, reg: dict[str, Any], hold: dict[str, Any], refund_id: str, now: str
    ) -> list[TransactItem]:
        """Refunded: the registration is CANCELLED, its place goes back to its shard, its
        email may register again, and the counters move — all or nothing, exactly once
        (the registration's CANCELLING state is the condition)."""
        rid, race_id, event_id = reg["registrationId"], reg["raceId"], reg["eventId"]
        amount = int(reg["amountCents"])
        return [
            {
                "Update": {
                    "TableName": self._regs,
                    "Key": reg_key(rid),
                    "UpdateExpression": "SET #s = :cancelled, cancelledAt = :now, refundId = :refund",
                    "ConditionExpression": "#s = :cancelling",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": values(
                        {":cancelled": "CANCELLED", ":cancelling": "CANCELLING", ":now": now, ":refund": refund_id}
                    ),
                }
            },
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": hold_key(hold["holdId"]),
                    "UpdateExpression": "SET #s = :cancelled",
                    "ConditionExpression": "registrationId = :rid AND #s = :confirmed",
                    "ExpressionAttributeNames": {"#s": "status"},
                    "ExpressionAttributeValues": values(
                        {":cancelled": "CANCELLED", ":confirmed": "CONFIRMED", ":rid": rid}
                    ),
                }
            },
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": shard_key(race_id, event_id, hold["shard"]),
                    "UpdateExpression": "SET taken = taken - :one",
                    "ConditionExpression": "taken >= :one",
                    "ExpressionAttributeValues": values({":one": 1}),
                }
            },
            {
                "Delete": {
                    "TableName": self._inv,
                    "Key": email_key(race_id, reg["email"]),
                    "ConditionExpression": "attribute_not_exists(pk) OR registrationId = :rid",
                    "ExpressionAttributeValues": values({":rid": rid}),
                }
            },
            {
                "Update": {
                    "TableName": self._inv,
                    "Key": to_item({"pk": stats_pk(race_id, event_id), "sk": "STATS"}),
                    "UpdateExpression": "ADD confirmed :minus, revenueCents :lost, cancelled :one, refundedCents :amt",
                    "ExpressionAttributeValues": values({":minus": -1, ":lost": -amount, ":one": 1, ":amt": amount}),
                }
            },
        ]


# What directors see of a registration (lists, search, CSV): a projection keeps 50,000
# rows to a few MB of reads and skips the slow generic deserializer.
ROW_FIELDS = (
    "registrationId",
    "eventId",
    "eventName",
    "bib",
    "status",
    "firstName",
    "lastName",
    "email",
    "dateOfBirth",
    "amountCents",
    "currency",
    "confirmedAt",
    "cancelledAt",
    "refundId",
)
_PROJECTION_NAMES = {f"#f{i}": name for i, name in enumerate(ROW_FIELDS)}
_PROJECTION = ", ".join(_PROJECTION_NAMES)


def flat(item: dict[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as plain values: strings and numbers directly, the rest generically."""
    out: dict[str, Any] = {}
    for key, typed in item.items():
        if "S" in typed:
            out[key] = typed["S"]
        elif "N" in typed:
            number = typed["N"]
            out[key] = int(number) if number.lstrip("-").isdigit() else float(number)
        else:
            out[key] = from_item({key: typed})[key]
    return out
