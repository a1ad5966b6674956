"""Sending mail: the ``Mailer`` port and its SES (v2 API) adapter.

SES throttling becomes ``MailThrottled``, which the caller retries under the shared rate
limiter; any other client error propagates, and the queue's redelivery and DLQ take over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from botocore.exceptions import ClientError

from racecap.domain import RenderedEmail

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
