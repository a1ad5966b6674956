"""SQS adapters (``MessageQueue``): the paid-registration queue and the email queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel


class MessageQueue(Protocol):
    def send(self, message: BaseModel) -> str: ...

    def send_many(self, messages: Sequence[BaseModel]) -> None: ...


class SqsQueue:
    def __init__(self, client: Any, url: str) -> None:
        self._sqs = client
        self._url = url

    def send(self, message: BaseModel) -> str:
        resp = self._sqs.send_message(QueueUrl=self._url, MessageBody=message.model_dump_json())
        return str(resp["MessageId"])

    def send_many(self, messages: Sequence[BaseModel]) -> None:
        for start in range(0, len(messages), 10):
            chunk = messages[start : start + 10]
            resp = self._sqs.send_message_batch(
                QueueUrl=self._url,
                Entries=[{"Id": str(i), "MessageBody": m.model_dump_json()} for i, m in enumerate(chunk)],
            )
            if resp.get("Failed"):
                # Surface it: the caller's batch fails and SQS redelivers, so nothing is lost.
                raise RuntimeError(f"SQS refused {len(resp['Failed'])} messages: {resp['Failed'][:2]}")
