"""Does a transaction on DynamoDB Local hold up other requests? ``python -m tools.bench.ddb_stall``

A fresh DynamoDB Local; one client makes an UpdateItem every 20 ms and times it, alone and then
while another client sends a TransactWriteItems of 21 new items (the registration writer's size)
and of 100 four times a second. DynamoDB serves other items' requests beside a transaction; the
emulator serialises them, and what that adds is part of any latency tail measured locally (issue
38's steady-rate p99).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from botocore.config import Config

from local.runtime import local_session
from local.servers import free_port, start_dynamodb

TABLE = "stall"
PROBE_S = 15.0


def _client(port: int) -> Any:
    return local_session().client(
        "dynamodb", endpoint_url=f"http://127.0.0.1:{port}", config=Config(retries={"mode": "standard"})
    )


def _probe(db: Any, seconds: float) -> str:
    lat: list[float] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        db.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "counter"}},
            UpdateExpression="ADD v :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        lat.append((time.perf_counter() - t) * 1000)
        time.sleep(0.02)
    lat.sort()
    p99 = lat[int(len(lat) * 0.99)]
    return f"n={len(lat)} p50 {statistics.median(lat):.1f} p99 {p99:.1f} max {lat[-1]:.1f} ms"


def main() -> None:
    port = free_port()
    server = start_dynamodb(port, Path(tempfile.mkdtemp()))
    try:
        db, other = _client(port), _client(port)
        db.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        _probe(db, 3)  # the JVM's warm-up
        print(f"alone:                       {_probe(db, PROBE_S)}")
        for items in (21, 100):
            stop = threading.Event()
            took: list[float] = []

            def write(items: int = items, stop: threading.Event = stop, took: list[float] = took) -> None:
                while not stop.is_set():
                    t = time.perf_counter()
                    other.transact_write_items(
                        TransactItems=[
                            {
                                "Put": {
                                    "TableName": TABLE,
                                    "Item": {"pk": {"S": uuid.uuid4().hex}, "pad": {"S": "x" * 600}},
                                    "ConditionExpression": "attribute_not_exists(pk)",
                                }
                            }
                            for _ in range(items)
                        ]
                    )
                    took.append((time.perf_counter() - t) * 1000)
                    time.sleep(0.25)

            writer = threading.Thread(target=write)
            writer.start()
            seen = _probe(db, PROBE_S)
            stop.set()
            writer.join()
            print(f"beside {items:3d}-item transactions: {seen} (each transaction: {statistics.median(took):.1f} ms)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
