"""Confirmed registrations (Registrations table) and the counters the writer keeps.

Layout:
  Registrations  REG#<registrationId> / REG     gsi1 = EVENT#<raceId>#<eventId> / BIB#<bib:08d>
  Inventory      BIB#<raceId>#<eventId> / BIB   next bib to give (bibs start at 1)
  Inventory      STATS#<raceId>#<eventId> / STATS  confirmed, revenueCents

The writer confirms a whole batch for one event in ONE transaction: the bib counter
moves from n to n+k only together with the k registrations that take bibs n+1..n+k, so
bibs have no gaps and no duplicates whatever crashes or redeliveries happen.
"""

from __future__ import annotations

from typing import Any

from racecap.dal.dynamo import from_item, to_item, values
from racecap.dal.holds import email_key, hold_key
from racecap.retry import cancellation_codes, retry_contention

MAX_PER_TRANSACTION = 30  # 3 items per registration + counter + stats stays under 100


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
