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

import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError

from racecap.aws.items import query_all, to_item, values
from racecap.emails.models import RenderedEmail

SENT_PREFIX = "SENT#"


def sent_sk(kind: str, ses_message_id: str) -> str:
    return f"{SENT_PREFIX}{kind}#{ses_message_id}"


@dataclass(frozen=True)
class Delivery:
    """One email SES accepted, as the log keeps it."""

    registration_id: str
    kind: str
    dedup_key: str
    ses_message_id: str
    at: datetime


class DeliveryLog(Protocol):
    def record(self, registration_id: str, kind: str, dedup_key: str, ses_message_id: str, at: datetime) -> None: ...

    def record_many(self, deliveries: Sequence[Delivery]) -> None: ...


class DynamoDeliveryLog:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def record(self, registration_id: str, kind: str, dedup_key: str, ses_message_id: str, at: datetime) -> None:
        # A plain put: one SES message id is one email, so a retried put rewrites the same item.
        self._db.put_item(
            TableName=self._table, Item=_item(Delivery(registration_id, kind, dedup_key, ses_message_id, at))
        )

    def record_many(self, deliveries: Sequence[Delivery]) -> None:
        """A batch's deliveries in as few requests as DynamoDB takes (25 puts each): the email
        sender logs each SQS batch once, not each email (issue 38: a write request per email)."""
        for start in range(0, len(deliveries), BATCH_WRITE_MAX):
            requests = [{"PutRequest": {"Item": _item(d)}} for d in deliveries[start : start + BATCH_WRITE_MAX]]
            for attempt in range(UNPROCESSED_TRIES):
                left = self._db.batch_write_item(RequestItems={self._table: requests}).get("UnprocessedItems") or {}
                requests = left.get(self._table) or []
                if not requests:
                    break
                time.sleep(min(0.05 * 2**attempt, 1.0) * random.random())  # throttled: back off, full jitter
            if requests:
                raise RuntimeError(f"{len(requests)} deliveries left unprocessed after {UNPROCESSED_TRIES} tries")

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


THROTTLING_CODES = frozenset(
    {"TooManyRequestsException", "Throttling", "ThrottlingException", "LimitExceededException"}
)


# SES tag names/values allow ASCII letters, digits, '_' and '-' only, at most 256 characters.
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class MailThrottled(Exception):
    """SES refused the send for rate reasons; try again later (never drop the mail)."""


class Mailer(Protocol):
    def send(self, to: str, rendered: RenderedEmail, tags: Mapping[str, str]) -> str: ...


class SesMailer:
    def __init__(self, client: Any, sender: str) -> None:
        self._ses = client
        self._sender = sender

    def send(self, to: str, rendered: RenderedEmail, tags: Mapping[str, str]) -> str:
        """Send one email; return SES's message id."""
        try:
            resp = self._ses.send_email(
                FromEmailAddress=self._sender,
                Destination={"ToAddresses": [to]},
                Content={
                    "Simple": {
                        "Subject": {"Data": rendered.subject, "Charset": "UTF-8"},
                        "Body": {
                            "Text": {"Data": rendered.text, "Charset": "UTF-8"},
                            "Html": {"Data": rendered.html, "Charset": "UTF-8"},
                        },
                    }
                },
                EmailTags=[{"Name": _tag(k), "Value": _tag(v)} for k, v in tags.items()],
            )
        except ClientError as exc:
            if is_throttling(exc):
                raise MailThrottled(str(exc)) from exc
            raise
        return str(resp["MessageId"])


def is_throttling(exc: ClientError) -> bool:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return error.get("Code") in THROTTLING_CODES or status == 429


def _tag(value: str) -> str:
    return _TAG_UNSAFE.sub("_", value)[:256] or "_"


BATCH_WRITE_MAX = 25  # DynamoDB's BatchWriteItem limit
UNPROCESSED_TRIES = 5


def _item(d: Delivery) -> dict[str, Any]:
    return to_item(
        {
            "pk": f"REG#{d.registration_id}",
            "sk": sent_sk(d.kind, d.ses_message_id),
            "kind": d.kind,
            "dedupKey": d.dedup_key,
            "sesMessageId": d.ses_message_id,
            "sentAt": d.at.isoformat(),
        }
    )
