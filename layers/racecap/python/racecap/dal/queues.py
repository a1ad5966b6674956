"""SQS adapters: the paid-registration queue and the email queue."""

from __future__ import annotations

import json
from typing import Any


class SqsQueue:
    def __init__(self, client: Any, url: str) -> None:
        self._sqs = client
        self._url = url

    def send(self, body: dict[str, Any]) -> str:
        resp = self._sqs.send_message(QueueUrl=self._url, MessageBody=json.dumps(body, separators=(",", ":")))
        return str(resp["MessageId"])

    def send_many(self, bodies: list[dict[str, Any]]) -> None:
        for start in range(0, len(bodies), 10):
            chunk = bodies[start : start + 10]
            resp = self._sqs.send_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "MessageBody": json.dumps(b, separators=(",", ":"))} for i, b in enumerate(chunk)
                ],
            )
            if resp.get("Failed"):
                # Surface it: the caller's batch fails and SQS redelivers, so nothing is lost.
                raise RuntimeError(f"SQS refused {len(resp['Failed'])} messages: {resp['Failed'][:2]}")
