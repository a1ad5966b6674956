"""The queue's durable writes under the SDK's own retries, on DynamoDB Local.

On a loaded host a write can succeed while its answer is lost to the client's read
timeout; botocore then sends it again. A spent-challenge mark must recognise its own
retry, or a runner's one genuine proof is refused as "already used" (403)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session
from racecap.fairness.store import QueueStore


def test_a_spent_challenge_whose_answer_was_lost_is_spent_once_not_refused(backend: Any) -> None:
    endpoint = backend.stack.aws_env()["AWS_ENDPOINT_URL_DYNAMODB"]
    client = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    ).client("dynamodb", endpoint_url=endpoint, config=Config(retries={"max_attempts": 3, "mode": "standard"}))
    lost: list[Any] = []

    def done_but_answer_lost(request: Any, **_: Any) -> None:
        if lost:
            return None  # the SDK's retry goes out as usual
        lost.append(URLLib3Session().send(request))  # the write reaches DynamoDB...
        raise ReadTimeoutError(endpoint_url=request.url)  # ...and its answer does not come back

    client.meta.events.register("before-send.dynamodb.PutItem", done_but_answer_lost)
    table = backend.table("Inventory")
    challenge = f"lost-{uuid.uuid4().hex}"

    assert QueueStore(client, table).spend_challenge(challenge, 60) is True
    assert lost and lost[0].status_code == 200  # the first attempt did write
    assert QueueStore(backend.dynamodb, table).spend_challenge(challenge, 60) is False  # a real reuse is still refused
