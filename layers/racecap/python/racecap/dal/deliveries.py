"""The email sender's durable delivery log: one item per email SES accepted.

The sender's deduplication records (in the cache) expire after the queue's retention
(days), so they cannot tell an auditor, weeks later or on a deployed stage without the
local mailbox, which emails really went out. This log can: one item per accepted send,
kept beside the registration it is about (Registrations table, ``REG#<id> /
SENT#<kind>#<SES message id>``), never expiring while the registration exists, with no
address or name in it (the registration holds those). Two items of one kind for one
registration mean two emails were sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from racecap.dal.dynamo import query_all, to_item, values

SENT_PREFIX = "SENT#"


def sent_sk(kind: str, ses_message_id: str) -> str:
    return f"{SENT_PREFIX}{kind}#{ses_message_id}"


class DeliveryLog(Protocol):
    def record(self, registration_id: str, kind: str, dedup_key: str, ses_message_id: str, at: datetime) -> None: ...


class DynamoDeliveryLog:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def record(self, registration_id: str, kind: str, dedup_key: str, ses_message_id: str, at: datetime) -> None:
        # A plain put: one SES message id is one email, so a retried put rewrites the same item.
        self._db.put_item(
            TableName=self._table,
            Item=to_item(
                {
                    "pk": f"REG#{registration_id}",
                    "sk": sent_sk(kind, ses_message_id),
                    "kind": kind,
                    "dedupKey": dedup_key,
                    "sesMessageId": ses_message_id,
                    "sentAt": at.isoformat(),
                }
            ),
        )

    def sent(self, registration_id: str, kind: str) -> list[dict[str, Any]]:
        """The emails of ``kind`` sent about one registration, oldest id first."""
        return list(
            query_all(
                self._db,
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :sent)",
                ExpressionAttributeValues=values({":pk": f"REG#{registration_id}", ":sent": f"{SENT_PREFIX}{kind}#"}),
                ConsistentRead=True,
            )
        )

    def sent_counts(self, registration_ids: Sequence[str], kind: str) -> dict[str, int]:
        return {rid: len(self.sent(rid, kind)) for rid in registration_ids}
