"""The AWS clients a burst drives the local stack with (its own module: ``config`` types
``BurstRun.clients`` with it, and ``stack`` imports ``config``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from local.runtime import local_session
from local.stack import LocalStack


@dataclass
class Clients:
    dynamodb: Any
    sqs: Any

    @classmethod
    def for_stack(cls, stack: LocalStack) -> Clients:
        env = stack.aws_env()
        session = local_session()
        return cls(
            session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"]),
            session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"]),
        )
