"""The AWS clients a burst drives the local stack with (its own module: ``config`` types
``BurstRun.clients`` with it, and ``stack`` imports ``config``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3

from local.stack import LocalStack


@dataclass
class Clients:
    dynamodb: Any
    sqs: Any

    @classmethod
    def for_stack(cls, stack: LocalStack) -> Clients:
        env = stack.aws_env()
        session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        )
        return cls(
            session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"]),
            session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"]),
        )
