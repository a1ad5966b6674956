"""Where results live: the Results table (DynamoDB) and the uploads bucket (S3).

Layout of the Results table:
  RACE#<raceId>                    / POINTER#<eventId>  current version, published?, counts
  UPLOADS#<raceId>#<eventId>       / <uploadId>         one upload: status, report, who
  VERSION#<raceId>#<eventId>#<n>   / CHUNK#<i:03d>      version n, gzip JSON in <=350 KB parts

A version's chunks are written before the pointer names it and never change after, so a
reader that follows the pointer always finds a complete, immutable version. Two uploads
processed at once cannot both write one number: the first chunk's write claims it (a
conditional put), and the pointer only ever moves to a higher number.
"""

from __future__ import annotations

from typing import Any

from racecap.aws.items import from_item, query_raw, to_item, values
from racecap.aws.transactions import TransactItem

CHUNK_BYTES = 350_000  # DynamoDB items stop at 400 KB


def upload_key(race_id: str, event_id: str) -> str:
    return f"results/{race_id}/{event_id}/"


class DynamoResults:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self.table = table

    # -- pointers ------------------------------------------------------------------------
    def pointers(self, race_id: str) -> dict[str, dict[str, Any]]:
        """Every event's pointer of a race, by event id (one query)."""
        items = query_raw(
            self._db,
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues=values({":pk": f"RACE#{race_id}", ":p": "POINTER#"}),
        )
        return {doc["eventId"]: doc for doc in map(from_item, items)}

    def pointer(self, race_id: str, event_id: str) -> dict[str, Any] | None:
        resp = self._db.get_item(TableName=self.table, Key=self._pointer_key(race_id, event_id), ConsistentRead=True)
        return from_item(resp["Item"]) if "Item" in resp else None

    @staticmethod
    def _pointer_key(race_id: str, event_id: str) -> dict[str, Any]:
        return to_item({"pk": f"RACE#{race_id}", "sk": f"POINTER#{event_id}"})

    def install_items(
        self, race_id: str, event_id: str, version: int, upload_id: str, counts: dict[str, int], now: str
    ) -> list[TransactItem]:
        """Point the event at ``version`` (only if it is at an older one: a number claimed by an
        upload that never installed it leaves a gap) and mark the upload READY — one
        transaction, so the swap is atomic."""
        return [
            {
                "Update": {
                    "TableName": self.table,
                    "Key": self._pointer_key(race_id, event_id),
                    "UpdateExpression": "SET version = :v, eventId = :e, #rows = :rows, finishers = :fin, "
                    "updatedAt = :now, published = if_not_exists(published, :no)",
                    "ConditionExpression": "attribute_not_exists(version) OR version < :v",
                    "ExpressionAttributeNames": {"#rows": "rows"},
                    "ExpressionAttributeValues": values(
                        {":v": version, ":e": event_id, ":rows": counts["rows"], ":fin": counts["finishers"]}
                        | {":now": now, ":no": False}
                    ),
                }
            },
            {
                "Update": {
                    "TableName": self.table,
                    "Key": self._upload_key(race_id, event_id, upload_id),
                    "UpdateExpression": "SET #s = :ready, version = :v, #rows = :rows, finishedAt = :now",
                    "ConditionExpression": "#s = :processing",
                    "ExpressionAttributeNames": {"#s": "status", "#rows": "rows"},
                    "ExpressionAttributeValues": values(
                        {":ready": "READY", ":processing": "PROCESSING", ":v": version, ":rows": counts["rows"]}
                        | {":now": now}
                    ),
                }
            },
        ]

    def publish_item(self, race_id: str, event_id: str, published: bool, now: str) -> TransactItem:
        return {
            "Update": {
                "TableName": self.table,
                "Key": self._pointer_key(race_id, event_id),
                "UpdateExpression": "SET published = :p, publishedAt = :at",
                "ConditionExpression": "attribute_exists(version)",
                "ExpressionAttributeValues": values({":p": published, ":at": now if published else None}),
            }
        }

    # -- uploads ------------------------------------------------------------------------
    @staticmethod
    def _upload_key(race_id: str, event_id: str, upload_id: str) -> dict[str, Any]:
        return to_item({"pk": f"UPLOADS#{race_id}#{event_id}", "sk": upload_id})

    def new_upload_item(self, doc: dict[str, Any]) -> TransactItem:
        return {
            "Put": {
                "TableName": self.table,
                "Item": to_item({**doc, **from_item(self._upload_key(doc["raceId"], doc["eventId"], doc["uploadId"]))}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def upload(self, race_id: str, event_id: str, upload_id: str) -> dict[str, Any] | None:
        resp = self._db.get_item(
            TableName=self.table, Key=self._upload_key(race_id, event_id, upload_id), ConsistentRead=True
        )
        return from_item(resp["Item"]) if "Item" in resp else None

    def recent_uploads(self, race_id: str, event_id: str, limit: int) -> list[dict[str, Any]]:
        resp = self._db.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues=values({":pk": f"UPLOADS#{race_id}#{event_id}"}),
            ScanIndexForward=False,
            Limit=limit,
        )
        return [from_item(i) for i in resp.get("Items", [])]

    def claim_upload(self, race_id: str, event_id: str, upload_id: str, now: str) -> bool:
        """WAITING_FOR_FILE -> PROCESSING; False if another delivery of the event got it."""
        try:
            self._db.update_item(
                TableName=self.table,
                Key=self._upload_key(race_id, event_id, upload_id),
                UpdateExpression="SET #s = :processing, startedAt = :now",
                ConditionExpression="#s = :waiting",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values({":processing": "PROCESSING", ":waiting": "WAITING_FOR_FILE"})
                | values({":now": now}),
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def reject_upload(
        self, race_id: str, event_id: str, upload_id: str, errors: list[dict[str, Any]], count: int, now: str
    ) -> None:
        self._db.update_item(
            TableName=self.table,
            Key=self._upload_key(race_id, event_id, upload_id),
            UpdateExpression="SET #s = :rejected, #errors = :errors, errorCount = :n, finishedAt = :now",
            ConditionExpression="#s = :processing",
            ExpressionAttributeNames={"#s": "status", "#errors": "errors"},
            ExpressionAttributeValues=values(
                {":rejected": "REJECTED", ":errors": errors, ":n": count, ":now": now, ":processing": "PROCESSING"}
            ),
        )

    # -- versions -----------------------------------------------------------------------
    def write_version(self, race_id: str, event_id: str, version: int, blob: bytes) -> bool:
        """Write ``blob`` as ``version`` if that number is free; False if another upload
        claimed it first (its first chunk exists), and then nothing is written."""
        pk = f"VERSION#{race_id}#{event_id}#{version}"
        chunks = [blob[i : i + CHUNK_BYTES] for i in range(0, len(blob), CHUNK_BYTES)] or [b""]
        # Put one by one: a batch of 25 x 350 KB would exceed BatchWriteItem's 16 MB. The
        # first claims the number; the rest are this upload's alone once it has.
        for n, chunk in enumerate(chunks):
            try:
                self._db.put_item(
                    TableName=self.table,
                    Item=to_item({"pk": pk, "sk": f"CHUNK#{n:03d}", "data": chunk, "of": len(chunks)}),
                    **({"ConditionExpression": "attribute_not_exists(pk)"} if n == 0 else {}),
                )
            except self._db.exceptions.ConditionalCheckFailedException:
                return False
        return True

    def read_version(self, race_id: str, event_id: str, version: int) -> bytes | None:
        items = list(
            query_raw(
                self._db,
                TableName=self.table,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=values({":pk": f"VERSION#{race_id}#{event_id}#{version}"}),
                ConsistentRead=True,
            )
        )
        if not items or len(items) != int(items[0]["of"]["N"]):
            return None
        return b"".join(i["data"]["B"] for i in items)


class S3Files:
    """The uploads bucket: presigned PUTs for directors, reads for the processor."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self.bucket = bucket

    def upload_url(self, key: str, content_type: str, expires_s: int) -> str:
        return str(
            self._s3.generate_presigned_url(
                "put_object",
                Params={"Bucket": self.bucket, "Key": key, "ContentType": content_type},
                ExpiresIn=expires_s,
            )
        )

    def size(self, key: str) -> int:
        return int(self._s3.head_object(Bucket=self.bucket, Key=key)["ContentLength"])

    def read(self, key: str) -> bytes:
        return bytes(self._s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
