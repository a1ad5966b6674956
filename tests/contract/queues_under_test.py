"""The queues the contract suite runs against: the in-memory ``FakeQueue`` and the SQS
adapter (``SqsQueue``) on a real ElasticMQ, each test on a fresh queue declared like the
blueprint's Registrations queue."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from racecap.aws.queues import MessageQueue, SqsQueue

import blueprint
from local import servers
from local.provision import create_queue_requests
from tests.fakes.stores import FakeQueue


@dataclass
class QueueUnderTest:
    name: str
    queue: MessageQueue
    drain: Callable[[], list[str]]  # the bodies waiting on the queue, each once, in any order


NewQueue = Callable[[], QueueUnderTest]


def fake_queues() -> Iterator[NewQueue]:
    def new() -> QueueUnderTest:
        queue = FakeQueue()

        def drain() -> list[str]:
            bodies = [m.model_dump_json() for m in queue.sent]
            queue.sent.clear()
            return bodies

        return QueueUnderTest("fake", queue, drain)

    yield new


def elasticmq_queues() -> Iterator[NewQueue]:
    with tempfile.TemporaryDirectory(prefix="racecap-contract-sqs-") as work:
        server = servers.start_elasticmq(servers.free_port(), Path(work), Path(work))
        try:
            sqs: Any = boto3.session.Session(
                aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
            ).client("sqs", endpoint_url=f"http://127.0.0.1:{server.port}")
            _, declared = create_queue_requests(blueprint.queue("Registrations"))
            attributes = {k: v for k, v in declared["Attributes"].items() if k != "RedrivePolicy"}

            def new() -> QueueUnderTest:
                url = sqs.create_queue(QueueName=f"contract-{uuid.uuid4().hex[:12]}", Attributes=attributes)["QueueUrl"]

                def drain() -> list[str]:
                    bodies: list[str] = []
                    while True:
                        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
                        messages = got.get("Messages", [])
                        if not messages:
                            return bodies
                        bodies += [m["Body"] for m in messages]
                        sqs.delete_message_batch(
                            QueueUrl=url,
                            Entries=[
                                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
                            ],
                        )

                return QueueUnderTest("elasticmq", SqsQueue(sqs, url), drain)

            yield new
        finally:
            server.stop()


QUEUES: dict[str, Callable[[], Iterator[NewQueue]]] = {"fake": fake_queues, "elasticmq": elasticmq_queues}
