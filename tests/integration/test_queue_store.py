"""The queue's durable writes under the SDK's own retries, on DynamoDB Local.

On a loaded host a write can succeed while its answer is lost to the client's read
timeout; botocore then sends it again. A spent-challenge mark must recognise its own
retry, or a runner's one genuine proof is refused as "already used" (403)."""

from __future__ import annotations

import uuid
from typing import Any
from unittest.mock import ANY

import boto3
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session
from racecap.fairness.store import DynamoQueueStore


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

    assert DynamoQueueStore(client, table).spend_challenge(challenge, 60) is True
    assert lost and lost[0].status_code == 200  # the first attempt did write
    assert (
        DynamoQueueStore(backend.dynamodb, table).spend_challenge(challenge, 60) is False
    )  # a real reuse is still refused


def _losing_first_answer(backend: Any, operation: str) -> tuple[Any, list[Any]]:
    """A DynamoDB client whose first ``operation`` is done but its answer is lost."""
    endpoint = backend.stack.aws_env()["AWS_ENDPOINT_URL_DYNAMODB"]
    client = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    ).client("dynamodb", endpoint_url=endpoint, config=Config(retries={"max_attempts": 3, "mode": "standard"}))
    lost: list[Any] = []

    def done_but_answer_lost(request: Any, **_: Any) -> None:
        if lost:
            return None
        lost.append(URLLib3Session().send(request))
        raise ReadTimeoutError(endpoint_url=request.url)

    client.meta.events.register(f"before-send.dynamodb.{operation}", done_but_answer_lost)
    return client, lost


def test_a_queue_number_whose_answer_was_lost_is_issued_once_not_skipped(backend: Any) -> None:
    table = backend.table("Inventory")
    race_id = f"lost-{uuid.uuid4().hex[:8]}"
    honest = DynamoQueueStore(backend.dynamodb, table)
    assert honest.save_settings(race_id, {"enabled": True, "seq": 0}, 0)
    assert honest.next_arrival(race_id, "dev-before", None) == (1, ANY)
    honest.settle_arrival(race_id, "dev-before", None)

    client, lost = _losing_first_answer(backend, "UpdateItem")
    issued = DynamoQueueStore(client, table).next_arrival(race_id, "dev-lost", None)

    assert lost and lost[0].status_code == 200  # the first attempt did count
    assert issued is not None and issued[0] == 2  # the retry took that number...
    after = honest.next_arrival(race_id, "dev-after", None)
    assert after is not None and after[0] == 3  # ...so no number was skipped
    assert int((honest.state(race_id) or {})["seq"]) == 3


def test_the_binding_is_per_entry_and_dropped_once_the_entry_is_written(backend: Any) -> None:
    table = backend.table("Inventory")
    race_id = f"bind-{uuid.uuid4().hex[:8]}"
    store = DynamoQueueStore(backend.dynamodb, table)
    assert store.save_settings(race_id, {"enabled": True, "seq": 0}, 0)
    first = store.next_arrival(race_id, "dev", None)
    second_tab = store.next_arrival(race_id, "dev", None)  # before the first tab's entry is written
    assert first is not None and second_tab is not None and first[0] == second_tab[0] == 1
    store.settle_arrival(race_id, "dev", None)
    assert not any(k.startswith("issue:") for k in store.state(race_id) or {})  # the STATE item does not grow
    rejoin = store.next_arrival(race_id, "dev", 1)  # the same device re-joining after its turn expired
    assert rejoin is not None and rejoin[0] == 2
    store.settle_arrival(race_id, "dev", 1)
    assert store.save_settings(race_id, {"enabled": False}, int((store.state(race_id) or {})["version"]))
    assert store.next_arrival(race_id, "dev2", None) is None  # the queue is off
