"""The benchmark: every figure measured in ONE run on this machine -> reports/bench.json.

    make bench
    RUNNERS=6000 make bench                   # a bigger full-flow burst
    python -m tools.bench --help

(e) each handler's cold-start import, in a fresh interpreter per sample (before anything
    else starts, so the machine is as quiet as it gets);
(a) the raw limit: conditional writes per second DynamoDB Local takes here, from several
    processes x threads of lightweight keep-alive HTTP clients (conditional PutItem of new
    items and conditional UpdateItem of counters, as the hot path does), plus the same
    for two-item TransactWriteItems;
(b) the full flow: an opening burst through Artillery against the local stack (race page,
    hold, form, register and pay, waiting screen until CONFIRMED), its registrations per
    second and estimated hourly registrations (the paper's formula), audited;
(c) (b) as a fraction of what (a) allows: (a) / DynamoDB write requests per registration;
(d) AWS calls per registration by service and operation, COUNTED in the gateway and
    pollers processes (``tools/awscalls.py``), and the cost per 1,000 registrations at
    PRODUCT.md's prices;
plus CPU seconds per registration by process (what bounds the figure on two cores).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import blueprint
from local.runtime import LAYER_PATH
from local.stack import LocalStack
from tools import awscalls
from tools.burst import BurstConfig, run_burst, start_stack

ROOT = blueprint.ROOT
RUNSIGNUP_HOURLY = 440_510
COLD_START_TARGET_MS = 300
P99_TARGET_MS = 1000

# PRODUCT.md, "Prices for a cost model" (us-east-1).
PRICES = {
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_s": 0.0000133334,
    "http_api_request": 1.00 / 1e6,
    "dynamodb_wcu": 0.625 / 1e6,
    "dynamodb_rcu": 0.125 / 1e6,
    "sqs_request": 0.40 / 1e6,
    "ses_email": 0.10 / 1e3,
}
_AUTH = (
    "AWS4-HMAC-SHA256 Credential=local/20240101/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host;x-amz-target, Signature=0"
)


# -- (e) cold starts --------------------------------------------------------------------------------
_IMPORT_ONE = """
import importlib.util, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("handler_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "cpu_ms": (time.process_time() - c0) * 1000}))
"""


def cold_starts(samples: int = 3) -> dict[str, Any]:
    """Import each functions/*/handler.py in a fresh interpreter with the function env set."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, **LocalStack(Path(tmp)).function_env()}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), LAYER_PATH])
    out: dict[str, Any] = {}
    for fn in blueprint.FUNCTIONS:
        path = fn.path / f"{fn.module.replace('.', '/')}.py"
        times: list[float] = []
        cpu: list[float] = []
        for _ in range(samples):
            proc = subprocess.run(
                [sys.executable, "-c", _IMPORT_ONE, str(path)],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if proc.returncode != 0:
                out[fn.id] = {"error": proc.stderr.strip().splitlines()[-1:]}
                break
            sample = json.loads(proc.stdout.strip().splitlines()[-1])
            times.append(sample["ms"])
            cpu.append(sample["cpu_ms"])
        if times:
            out[fn.id] = {
                "handler": str(path.relative_to(ROOT)),
                "median_ms": round(statistics.median(times), 1),
                "median_cpu_ms": round(statistics.median(cpu), 1),
                "min_ms": round(min(times), 1),
                "max_ms": round(max(times), 1),
                "samples": len(times),
                "under_300_ms": statistics.median(times) < COLD_START_TARGET_MS,
            }
            if statistics.median(times) >= COLD_START_TARGET_MS:
                out[fn.id]["heaviest_imports"] = heaviest_imports(path, env)
    return out


def heaviest_imports(path: Path, env: dict[str, str], top: int = 8) -> list[dict[str, Any]]:
    """What a slow handler's import is spent on (``python -X importtime``).

    Each package is charged the cumulative time of its outermost import (what importing
    it cost, its own dependencies included), so a package imported inside another one
    shows up in both: read it as "importing X costs this much", not as a partition.
    """
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _IMPORT_ONE, str(path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Lines come out children first; "import time: self | cumulative |   nested.name".
    rows: list[tuple[int, str, int]] = []
    for line in proc.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append((depth, name.strip(), int(parts[1])))
    charged: dict[str, int] = {}
    # Walk parents before children: reverse order gives each subtree's root first.
    stack: list[tuple[int, str]] = []  # (depth, top package) of the open ancestors
    for depth, name, cumulative in reversed(rows):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        package = name.split(".")[0]
        if all(pkg != package for _, pkg in stack):
            charged[package] = charged.get(package, 0) + cumulative
        stack.append((depth, package))
    ranked = sorted(charged.items(), key=lambda kv: -kv[1])[:top]
    return [{"package": k, "import_ms": round(v / 1000, 1)} for k, v in ranked]


# -- (a) the raw write limit ----------------------------------------------------------------------------
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
    import boto3

    client = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    ).client("dynamodb", endpoint_url=f"http://127.0.0.1:{port}")
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


# -- where the gateway's CPU goes ------------------------------------------------------------------
def _bucket(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "site-packages/" in path:
        package = path.split("site-packages/", 1)[1].split("/", 1)[0]
        return package.split(".")[0].removesuffix(".py")
    if "/layers/racecap/" in path:
        return "racecap (the layer)"
    if "/functions/" in path:
        return "handlers (functions/)"
    if "/local/" in path:
        return "local gateway/runtime"
    if path == "~":
        return "builtins (called by all of the above)"
    if path.startswith("<") or "/lib/python3" in path:
        return "python stdlib (http.client, email headers, json...)"
    return "other"


def profile_flows(stack: LocalStack, flows: int = 100) -> dict[str, Any]:
    """CPU per registration flow inside one gateway process, by package (cProfile on CPU time).

    The same requests a runner makes (race page, hold, register and pay, one status
    poll), sent through an in-process copy of the gateway against the running stack, so
    the profile has the gateway's share only, without HTTP serving or other processes.
    Runs in a fresh interpreter with the functions' environment, as a gateway worker does.
    """
    from tools.burst import Clients, seed_race

    race_id = seed_race(Clients.for_stack(stack), [("Profile", 2 * flows + 50, 1000)], name="Profile Race")
    env = {**os.environ, **stack.function_env()}
    proc = subprocess.run(
        [sys.executable, "-c", _PROFILE_CHILD, race_id, str(flows)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith('{"flows"')]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"profile failed: {proc.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


_PROFILE_CHILD = "import sys; from tools.bench import _profile_child; _profile_child(*sys.argv[1:])"


def _profile_child(race_id: str, flows_arg: str) -> None:
    import cProfile
    import io
    import pstats

    from local.gateway import Gateway

    flows = int(flows_arg)
    gateway = Gateway()

    def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "wsgi.input": io.BytesIO(data),
            "CONTENT_LENGTH": str(len(data)),
            "CONTENT_TYPE": "application/json",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1",
        }
        status: list[str] = []
        out = b"".join(gateway(environ, lambda st, _h, *_a: status.append(st)))
        return int(status[0].split()[0]), json.loads(out) if out else None

    status, race = call("GET", f"/api/races/{race_id}")
    if status != 200:
        raise RuntimeError(f"profile: race page answered {status} {race}")
    event_id = race["events"][0]["eventId"]

    def flow(i: int) -> None:
        call("GET", f"/api/races/{race_id}")
        _, hold = call("POST", f"/api/races/{race_id}/events/{event_id}/holds")
        body = {
            "email": f"profile-{i}-{uuid.uuid4().hex[:8]}@example.com",
            "firstName": "Pro",
            "lastName": "File",
            "dateOfBirth": "1990-01-01",
            "paymentToken": "tok_visa",
        }
        _, reg = call("POST", f"/api/holds/{hold['holdId']}/registration", body)
        call("GET", f"/api/registrations/{reg['registrationId']}")

    stdout = sys.stdout
    sys.stdout = io.StringIO()  # the handlers' EMF metric lines
    try:
        for i in range(10):
            flow(-i - 1)
        profiler = cProfile.Profile(time.process_time)
        c0, w0 = time.process_time(), time.perf_counter()
        profiler.enable()
        for i in range(flows):
            flow(i)
        profiler.disable()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        # Once more without the profiler: its own overhead inflates the profiled figure.
        c1 = time.process_time()
        for i in range(flows):
            flow(flows + i)
        cpu_plain = time.process_time() - c1
    finally:
        sys.stdout = stdout
    stats = pstats.Stats(profiler)
    buckets: dict[str, float] = defaultdict(float)
    functions: list[tuple[float, str]] = []
    for (filename, line, name), (_cc, _nc, tottime, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        buckets[_bucket(filename)] += tottime
        functions.append((tottime, f"{Path(filename).name}:{line}({name})"))
    functions.sort(reverse=True)
    total = sum(buckets.values()) or 1.0
    print(
        json.dumps(
            {
                "flows": flows,
                "what": "race page + hold + register and pay + one status poll, in-process (no HTTP serving)",
                "cpu_ms_per_flow": round(cpu_plain / flows * 1000, 2),
                "cpu_ms_per_flow_profiled": round(cpu / flows * 1000, 2),
                "wall_ms_per_flow_profiled": round(wall / flows * 1000, 2),
                "cpu_share_by_package": {
                    k: round(v / total, 3) for k, v in sorted(buckets.items(), key=lambda kv: -kv[1])[:14]
                },
                "top_functions_self_cpu_share": [
                    {"function": f, "share": round(t / total, 3)} for t, f in functions[:15]
                ],
            }
        ),
        flush=True,
    )


# -- CPU by process ----------------------------------------------------------------------------------------
def _group_cpu_seconds(pgid: int) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        # fields[2] = pgrp, [11] utime, [12] stime (0-based after the command name)
        if int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def cpu_snapshot(stack: LocalStack) -> dict[str, float]:
    snap = {p.name: _group_cpu_seconds(p.pid) for p in stack.procs}
    snap["machine_total"] = _machine_cpu_seconds()
    return snap


def _machine_cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    tick = os.sysconf("SC_CLK_TCK")
    busy = sum(int(x) for x in fields[:3]) + sum(int(x) for x in fields[5:8])  # user nice system irq softirq steal
    return busy / tick


# -- (d) counts and costs ----------------------------------------------------------------------------------
def per_registration(delta: dict[str, Any], registrations: int) -> dict[str, Any]:
    n = max(registrations, 1)
    by_service: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0.0, "operations": {}, "errors": {}})
    totals: dict[str, float] = defaultdict(float)
    for key, row in delta["calls"].items():
        service, op = key.split(":", 1)
        requests = row.get("requests", 0)
        if service == "sqs" and op == "ReceiveMessage":
            empty = row.get("empty", 0)
            totals["sqs_empty_receives"] += empty
            requests -= empty  # idle long-polls: a cost of time, not of registrations
        svc = by_service[service]
        svc["requests"] += requests
        svc["operations"][op] = round(requests / n, 3)
        for name, count in row.items():
            if name.startswith("error:"):
                svc["errors"][f"{op} {name.removeprefix('error:')}"] = int(count)
        if service == "dynamodb":
            totals["wcu"] += row.get("wcu_table", 0) + row.get("wcu_index", 0) + row.get("wcu_failed_estimated", 0)
            totals["wcu_table"] += row.get("wcu_table", 0)
            totals["wcu_index"] += row.get("wcu_index", 0)
            totals["wcu_failed_estimated"] += row.get("wcu_failed_estimated", 0)
            totals["rcu"] += row.get("rcu_table", 0) + row.get("rcu_index", 0)
            if op in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
                totals["dynamodb_write_requests"] += requests
                totals["dynamodb_items_written"] += row.get("items", 0)
        if service == "sesv2" and op == "SendEmail":
            totals["emails"] += requests - row.get("errors", 0)
    services = {
        s: {
            "requests_per_registration": round(v["requests"] / n, 3),
            "operations": v["operations"],
            "errors_during_the_burst (count)": v["errors"],
        }
        for s, v in sorted(by_service.items())
    }
    invocations: dict[str, Any] = {}
    gb_s = 0.0
    http_requests = 0.0
    lambda_requests = 0.0
    for key, row in delta["invocations"].items():
        fn_id, source = key.split(":", 1)
        memory_gb = blueprint.function(fn_id).memory_mb / 1024
        gb_s += row["seconds"] * memory_gb
        lambda_requests += row["count"]
        if source == "http":
            http_requests += row["count"]
        invocations[key] = {
            "per_registration": round(row["count"] / n, 3),
            "mean_ms": round(row["seconds"] / row["count"] * 1000, 1) if row["count"] else None,
            "memory_mb": blueprint.function(fn_id).memory_mb,
        }
    redis_total = sum(delta["redis"].values())
    cost_items = {
        "lambda_requests": lambda_requests * PRICES["lambda_request"],
        "lambda_gb_seconds": gb_s * PRICES["lambda_gb_s"],
        "http_api_requests": http_requests * PRICES["http_api_request"],
        "dynamodb_write_units": totals["wcu"] * PRICES["dynamodb_wcu"],
        "dynamodb_read_units": totals["rcu"] * PRICES["dynamodb_rcu"],
        "sqs_requests": (by_service["sqs"]["requests"] if "sqs" in by_service else 0) * PRICES["sqs_request"],
        "ses_emails": totals["emails"] * PRICES["ses_email"],
    }
    per_1000 = {k: round(v / n * 1000, 5) for k, v in cost_items.items()}
    return {
        "registrations": registrations,
        "aws_calls_per_registration": services,
        "lambda_invocations": invocations,
        "lambda_invocations_per_registration": round(lambda_requests / n, 3),
        "lambda_gb_seconds_per_registration": round(gb_s / n, 5),
        "http_api_requests_per_registration": round(http_requests / n, 3),
        "dynamodb": {
            "write_requests_per_registration": round(totals["dynamodb_write_requests"] / n, 3),
            "items_written_per_registration": round(totals["dynamodb_items_written"] / n, 3),
            "wcu_per_registration": round(totals["wcu"] / n, 3),
            "wcu_table_per_registration": round(totals["wcu_table"] / n, 3),
            "wcu_index_per_registration": round(totals["wcu_index"] / n, 3),
            "wcu_failed_conditional_estimated_per_registration": round(totals["wcu_failed_estimated"] / n, 3),
            "rcu_per_registration": round(totals["rcu"] / n, 3),
        },
        "ses_emails_per_registration": round(totals["emails"] / n, 3),
        "redis_commands_per_registration": round(redis_total / n, 3),
        "sqs_empty_receives_during_burst": int(totals["sqs_empty_receives"]),
        "cost_per_1000_registrations_usd": {**per_1000, "total": round(sum(per_1000.values()), 4)},
        "prices_usd": PRICES,
        "notes": [
            "Counted in the gateway and pollers processes: every botocore call, Redis command and "
            "handler invocation during the burst (after warm-up, until the queues drained).",
            "Per registration = all of it (race-page reads, holds, registrations, status polls, writer, "
            "email sender) / registrations completed.",
            "DynamoDB units: ConsumedCapacity reported by DynamoDB Local (table + GSI), except "
            "TransactWriteItems, computed from the request at AWS's 2 units per 1 KB item; failed "
            "conditional writes estimated at 1 unit per item (2 in a transaction).",
            "Lambda GB-s from handler durations measured here (two busy cores: longer than on Lambda) "
            "at each function's blueprint memory size.",
            "Empty SQS long-polls (idle pollers) are excluded: they cost per hour, not per registration.",
            "Not in the model (no price in PRODUCT.md): ElastiCache, CloudWatch Logs/metrics, CloudFront.",
        ],
    }


# -- the run ----------------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    def say(msg: str) -> None:
        print(f"[bench] {msg}", flush=True)

    started = datetime.now(UTC)
    say("(e) cold-start imports, a fresh interpreter per sample")
    cold = cold_starts(args.cold_samples)
    for fn_id, r in cold.items():
        say(f"    {fn_id:<20} {r.get('median_ms', r.get('error'))} ms")

    work = Path(tempfile.mkdtemp(prefix="racecap-bench-"))
    calls_dir = work / "awscalls"
    extra_env = {
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tools" / "instrument"), str(ROOT), LAYER_PATH]),
        awscalls.ENV_DIR: str(calls_dir),
    }
    cfg = BurstConfig(
        scenario="opening",
        runners=args.runners,
        arrival_s=args.arrival,
        think_min_s=args.think_min,
        think_max_s=max(args.think_min, args.think_max),
        backoff_scale=args.backoff_scale,
        gateway_workers=args.gateway_workers,
        gateway_threads=args.gateway_threads,
        email_rate=args.email_rate,
        out_dir=args.out,
        report=True,
    )
    say(f"starting an instrumented local stack ({cfg.gateway_workers} gateway workers x {cfg.gateway_threads})")
    stack = start_stack(cfg, work / "stack", extra_env=extra_env)
    try:
        time.sleep(2)
        idle_a, idle_t = cpu_snapshot(stack), time.monotonic()
        time.sleep(5)
        idle_b, idle_dt = cpu_snapshot(stack), time.monotonic() - idle_t
        idle = {k: round((idle_b[k] - idle_a[k]) / idle_dt, 3) for k in idle_a}
        say(f"idle CPU (cores): {idle}")
        say(
            f"(a) raw conditional writes: {args.raw_processes} processes x {args.raw_threads} connections, "
            f"{args.raw_seconds:g}s per kind"
        )
        raw = raw_writes(stack.ports.dynamodb, args.raw_seconds, args.raw_processes, args.raw_threads)
        say(
            f"    PutItem {raw['conditional_put_item_per_s']}/s, UpdateItem {raw['conditional_update_item_per_s']}/s, "
            f"2-item TransactWriteItems {raw['transact_write_2_items_per_s']}/s"
        )

        marks: dict[str, Any] = {}

        def probe(phase: str) -> None:
            time.sleep(awscalls.FLUSH_EVERY_S * 3)  # let every process flush its counters
            marks[phase] = {"calls": awscalls.collect(calls_dir), "cpu": cpu_snapshot(stack), "t": time.monotonic()}

        say(f"(b) full-flow burst: {cfg.runners} runners")
        result = run_burst(cfg, stack=stack, work=work / "burst", probe=probe)
        steady = None
        if args.steady_runners > 0:
            say(f"(b') the same flow at a steady rate: {args.steady_runners} runners in {cfg.arrival_s:g}s")
            steady_cfg = replace(cfg, runners=args.steady_runners, warm_registrations=0)
            steady = run_burst(steady_cfg, stack=stack, work=work / "steady").summary
        say("profiling the gateway's share of one registration (in-process, cProfile on CPU time)")
        profile = profile_flows(stack)
        say(f"    {profile['cpu_ms_per_flow']} ms CPU per flow; shares: {profile['cpu_share_by_package']}")
    finally:
        stack.stop()

    s = result.summary
    registrations = s["registrations_completed"]
    span = s["first_to_last_s"] or 0
    per_s = registrations / span if span else 0.0
    delta = awscalls.subtract(marks["end"]["calls"], marks["start"]["calls"])
    counted = per_registration(delta, registrations)
    writes_per_reg = counted["dynamodb"]["write_requests_per_registration"]
    allowed = raw["conditional_writes_per_s"] / writes_per_reg if writes_per_reg else None
    cpu_start, cpu_end = marks["start"]["cpu"], marks["end"]["cpu"]
    cpu = {k: cpu_end[k] - cpu_start.get(k, 0) for k in cpu_end}
    wall = marks["end"]["t"] - marks["start"]["t"]
    machine_busy = cpu.pop("machine_total")
    stack_cpu = sum(cpu.values())
    cpu_report = {
        "idle_cores_before_the_burst": idle,
        "window_s": round(wall, 1),
        "machine_busy_cpu_s": round(machine_busy, 1),
        "machine_capacity_cpu_s": round(wall * (os.cpu_count() or 1), 1),
        "stack_cpu_s": round(stack_cpu, 1),
        "artillery_cpu_s": s["artillery_cpu_s"],
        "other_cpu_s (the bench, other users)": round(machine_busy - stack_cpu - s["artillery_cpu_s"], 1),
        "cpu_ms_per_registration": {
            k: round(v / max(registrations, 1) * 1000, 2) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])
        },
        "stack_cpu_ms_per_registration": round(stack_cpu / max(registrations, 1) * 1000, 1),
    }
    cores = os.cpu_count() or 1
    per_reg_ms = (stack_cpu + s["artillery_cpu_s"]) / max(registrations, 1) * 1000
    needed_per_s = RUNSIGNUP_HOURLY / 3600
    bound = {
        "what": "CPU: every process of the flow (and the load generator) shares these cores",
        "cpu_ms_per_registration (stack + artillery)": round(per_reg_ms, 1),
        "registrations_per_s_if_every_core_were_the_flows": round(cores * 1000 / per_reg_ms, 1),
        "as_estimated_hourly": round(cores * 1000 / per_reg_ms * 3600),
        "registrations_per_s_needed_for_440510": round(needed_per_s, 1),
        "cpu_ms_per_registration_that_would_take": round(cores * 1000 / needed_per_s, 1),
        "dynamodb_local_alone_allows_per_s": round(allowed, 1) if allowed else None,
    }
    endpoints = s["endpoints"]
    hold_p99 = endpoints.get("hold", {}).get("p99")
    reg_p99 = endpoints.get("register", {}).get("p99")
    cold_ok = all(r.get("under_300_ms") for r in cold.values())
    hourly = s["estimated_hourly_registrations"] or 0
    bench: dict[str, Any] = {
        "measured_at": started.isoformat(),
        "commit": _commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_at_start": _LOAD_AT_START,
            "load_avg_at_end": list(os.getloadavg()),
            "note": "shared machine: other users' processes run at the same time; one run, as measured",
        },
        "a_raw_dynamodb_local_writes": raw,
        "b_full_flow": {
            "registrations_completed": registrations,
            "runners": cfg.runners,
            "runners_with_a_place": s["held"],
            "success_rate_for_runners_with_a_place": s["success_rate"],
            "first_request_to_last_confirmation_s": round(span, 2),
            "registrations_per_s": round(per_s, 1),
            "estimated_hourly_registrations": round(hourly),
            "peak_confirmations_per_s": s["peak_confirmations_per_s"],
            "latency_ms": {
                name: {k: st[k] for k in ("median", "p95", "p99", "max", "count")} for name, st in endpoints.items()
            },
            "errors": s["errors"],
            "audit_ok": bool(s["audit"] and s["audit"]["ok"]),
            "artillery_checks": s["checks"],
            "settings": {
                "arrival_window_s": cfg.arrival_s,
                "think_s": [cfg.think_min_s, cfg.think_max_s],
                "waiting_screen_backoff_scale": cfg.backoff_scale,
                "gateway": f"{cfg.gateway_workers} workers x {cfg.gateway_threads} threads",
                "ses_send_rate_per_s": cfg.email_rate,
                "warm_up_registrations_on_a_separate_race": cfg.warm_registrations,
            },
            "queues_drained_after_the_last_runner_s": s["drain_s"],
            "at_a_steady_rate": _steady_summary(steady),
            "report": result.report_path,
        },
        "c_fraction_of_raw_limit": {
            "dynamodb_write_requests_per_registration": writes_per_reg,
            "registrations_per_s_the_raw_limit_allows": round(allowed, 1) if allowed else None,
            "fraction": round(per_s / allowed, 3) if allowed else None,
        },
        "d_aws_calls_and_cost": counted,
        "e_cold_start_import_ms": cold,
        "cpu_by_process": cpu_report,
        "what_bounds_it": bound,
        "gateway_profile": profile,
        "target": {
            "estimated_hourly_registrations_over_440510": hourly > RUNSIGNUP_HOURLY,
            "success_100_percent": s["success_rate"] == 1,
            "hold_p99_under_1s": hold_p99 is not None and hold_p99 < P99_TARGET_MS,
            "register_p99_under_1s": reg_p99 is not None and reg_p99 < P99_TARGET_MS,
            "cold_start_under_300ms_each": cold_ok,
            "audit_ok": bool(s["audit"] and s["audit"]["ok"]),
        },
        "problems": result.problems,
    }
    target: dict[str, bool] = bench["target"]
    target["met"] = all(target.values())
    return bench


def _steady_summary(s: dict[str, Any] | None) -> dict[str, Any] | None:
    """The lighter burst: where p99 sits when the machine is not saturated."""
    if s is None:
        return None
    return {
        "runners": s["runners"],
        "arrival_rate_per_s": round(s["runners"] / s["config"]["arrival_s"], 1),
        "registrations_completed": s["registrations_completed"],
        "success_rate_for_runners_with_a_place": s["success_rate"],
        "estimated_hourly_registrations": round(s["estimated_hourly_registrations"] or 0),
        "latency_ms": {
            name: {k: st[k] for k in ("median", "p95", "p99", "max", "count")} for name, st in s["endpoints"].items()
        },
        "audit_ok": bool(s["audit"] and s["audit"]["ok"]),
        "problems": s["problems"],
        "report": s.get("report_path"),
    }


_LOAD_AT_START = list(os.getloadavg())


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return out + ("+local changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        snapshot = ROOT / ".commit"
        return snapshot.read_text().strip() if snapshot.exists() else None


def _env_float(name: str, default: float) -> float:
    return float(os.environ[name]) if os.environ.get(name) else default


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runners", type=int, default=int(_env_float("RUNNERS", 900)))
    p.add_argument("--arrival", type=float, default=_env_float("ARRIVAL_S", 30))
    p.add_argument("--think-min", type=float, default=_env_float("THINK_MIN", 1))
    p.add_argument("--think-max", type=float, default=_env_float("THINK_MAX", 3))
    p.add_argument("--backoff-scale", type=float, default=_env_float("BACKOFF_SCALE", 0.05))
    p.add_argument("--gateway-workers", type=int, default=int(_env_float("GATEWAY_WORKERS", 8)))
    p.add_argument("--gateway-threads", type=int, default=int(_env_float("GATEWAY_THREADS", 1)))
    p.add_argument(
        "--email-rate",
        type=float,
        default=_env_float("EMAIL_RATE", 50),
        help="SES sends/s (a production account's rate; confirmation emails drain behind the burst)",
    )
    p.add_argument(
        "--steady-runners",
        type=int,
        default=int(_env_float("STEADY_RUNNERS", 300)),
        help="a second, lighter burst in the same run, for latency below saturation (0: skip)",
    )
    p.add_argument("--raw-seconds", type=float, default=6.0)
    p.add_argument("--raw-processes", type=int, default=4)
    p.add_argument("--raw-threads", type=int, default=4)
    p.add_argument("--cold-samples", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    args = p.parse_args(argv)
    bench = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench.json"
    path.write_text(json.dumps(bench, indent=2, default=str))
    b, c, t = bench["b_full_flow"], bench["c_fraction_of_raw_limit"], bench["target"]
    raw_rate = bench["a_raw_dynamodb_local_writes"]["conditional_writes_per_s"]
    writes = c["dynamodb_write_requests_per_registration"]
    print(
        f"\n[bench] wrote {path}\n"
        f"  (a) DynamoDB Local conditional writes/s {raw_rate}\n"
        f"  (b) registrations/s {b['registrations_per_s']}, estimated hourly {b['estimated_hourly_registrations']:,}"
        f"  (RunSignUp 440,510)\n"
        f"  (c) {c['fraction']} of what (a) allows at {writes} writes/registration\n"
        f"  (d) ${bench['d_aws_calls_and_cost']['cost_per_1000_registrations_usd']['total']} per 1,000 registrations\n"
        f"  (e) cold starts: "
        + ", ".join(f"{k} {v.get('median_ms')} ms" for k, v in bench["e_cold_start_import_ms"].items())
        + f"\n  target met: {t['met']}  {json.dumps({k: v for k, v in t.items() if k != 'met'})}",
        flush=True,
    )


if __name__ == "__main__":
    main()
