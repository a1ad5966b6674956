"""(a) the raw limit: conditional writes per second DynamoDB Local takes here, from several
processes x threads of lightweight keep-alive HTTP clients (no SDK).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import threading
import time
import uuid
from typing import Any

from tools.bench.section import Bench, Section

_AUTH = (
    "AWS4-HMAC-SHA256 Credential=local/20240101/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host;x-amz-target, Signature=0"
)


def _raw_worker(port: int, table: str, kind: str, seconds: float, threads: int, queue: Any) -> None:
    """One process: ``threads`` keep-alive connections doing conditional writes until time is up."""
    counts = [0] * threads
    errors = [0] * threads
    stop_at = time.monotonic() + seconds
    prefix = uuid.uuid4().hex[:8]

    def run(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"Content-Type": "application/x-amz-json-1.0", "Authorization": _AUTH}
        i = 0
        counter_key = {"pk": {"S": f"CTR#{prefix}#{n}"}}
        while time.monotonic() < stop_at:
            i += 1
            if kind == "put":
                target = "PutItem"
                body: dict[str, Any] = {
                    "TableName": table,
                    "Item": {"pk": {"S": f"P#{prefix}#{n}#{i}"}, "v": {"N": "1"}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            elif kind == "update":
                target = "UpdateItem"
                body = {
                    "TableName": table,
                    "Key": counter_key,
                    "UpdateExpression": "SET taken = if_not_exists(taken, :zero) + :one",
                    "ConditionExpression": "attribute_not_exists(taken) OR taken < :cap",
                    "ExpressionAttributeValues": {":zero": {"N": "0"}, ":one": {"N": "1"}, ":cap": {"N": "1000000000"}},
                }
            else:
                target = "TransactWriteItems"
                body = {
                    "TransactItems": [
                        {
                            "Update": {
                                "TableName": table,
                                "Key": counter_key,
                                "UpdateExpression": "SET taken = if_not_exists(taken, :zero) + :one",
                                "ConditionExpression": "attribute_not_exists(taken) OR taken < :cap",
                                "ExpressionAttributeValues": {
                                    ":zero": {"N": "0"},
                                    ":one": {"N": "1"},
                                    ":cap": {"N": "1000000000"},
                                },
                            }
                        },
                        {
                            "Put": {
                                "TableName": table,
                                "Item": {"pk": {"S": f"T#{prefix}#{n}#{i}"}},
                                "ConditionExpression": "attribute_not_exists(pk)",
                            }
                        },
                    ]
                }
            conn.request(
                "POST",
                "/",
                json.dumps(body),
                {**headers, "X-Amz-Target": f"DynamoDB_20120810.{target}"},
            )
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                counts[n] += 1
            else:
                errors[n] += 1
        conn.close()

    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    queue.put((sum(counts), sum(errors)))


def raw_writes(port: int, seconds: float, processes: int, threads: int, warm_s: float = 4.0) -> dict[str, Any]:
    """(a): conditional writes/s DynamoDB Local sustains, per kind, all clients at once.

    Each kind first runs unmeasured for ``warm_s`` seconds: DynamoDB Local is a JVM and
    takes about three times the CPU per request until its JIT has compiled the hot path.
    """
    from local.runtime import local_session

    client = local_session().client("dynamodb", endpoint_url=f"http://127.0.0.1:{port}")
    table = "racecap-bench-raw"
    client.create_table(
        TableName=table,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
    )
    ctx = multiprocessing.get_context("spawn")
    results: dict[str, Any] = {}
    try:
        for kind in ("put", "update", "transact2"):
            warm_queue = ctx.Queue()
            warmers = [
                ctx.Process(target=_raw_worker, args=(port, table, kind, warm_s, threads, warm_queue))
                for _ in range(processes)
            ]
            for p in warmers:
                p.start()
            for _ in warmers:
                warm_queue.get(timeout=warm_s + 120)
            for p in warmers:
                p.join(timeout=30)
            queue = ctx.Queue()
            procs = [
                ctx.Process(target=_raw_worker, args=(port, table, kind, seconds, threads, queue))
                for _ in range(processes)
            ]
            t0 = time.monotonic()
            for p in procs:
                p.start()
            done = [queue.get(timeout=seconds + 120) for _ in procs]
            for p in procs:
                p.join(timeout=30)
            wall = time.monotonic() - t0 - 0.0
            ok = sum(d[0] for d in done)
            results[kind] = {
                "requests_per_s": round(ok / seconds, 1),
                "errors": sum(d[1] for d in done),
                "seconds": seconds,
                "wall_s": round(wall, 1),
            }
    finally:
        client.delete_table(TableName=table)
    put, update = results["put"]["requests_per_s"], results["update"]["requests_per_s"]
    return {
        "conditional_writes_per_s": round((put + update) / 2, 1),
        "conditional_put_item_per_s": put,
        "conditional_update_item_per_s": update,
        "transact_write_2_items_per_s": results["transact2"]["requests_per_s"],
        "clients": f"{processes} processes x {threads} keep-alive connections (raw HTTP, no SDK)",
        "warm_up_s_per_kind": warm_s,
        "detail": results,
    }


def measure(bench: Bench) -> dict[str, Any]:
    a = bench.args
    assert bench.stack is not None
    bench.say(
        f"(a) raw conditional writes: {a.raw_processes} processes x {a.raw_threads} connections, "
        f"{a.raw_seconds:g}s per kind"
    )
    raw = raw_writes(bench.stack.ports.dynamodb, a.raw_seconds, a.raw_processes, a.raw_threads)
    bench.say(
        f"    PutItem {raw['conditional_put_item_per_s']}/s, UpdateItem {raw['conditional_update_item_per_s']}/s, "
        f"2-item TransactWriteItems {raw['transact_write_2_items_per_s']}/s"
    )
    return raw


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--raw-seconds", type=float, default=6.0)
    p.add_argument("--raw-processes", type=int, default=4)
    p.add_argument("--raw-threads", type=int, default=4)


SECTION = Section(key="a_raw_dynamodb_local_writes", when="idle", measure=measure, options=options)
