"""Count the AWS calls the handlers really make, in the processes that make them.

``make bench`` starts the local stack with ``RACECAP_AWS_CALLS_DIR`` set and
``tools/instrument`` first on the function processes' ``PYTHONPATH``; that folder's
``sitecustomize`` calls :func:`install` at interpreter start-up in the gateway workers and
the SQS pollers. From then on every botocore call, every Redis command and every handler
invocation is counted in memory and written to ``<dir>/calls-<pid>.json`` twice a second.
:func:`collect` sums the files of all processes.

What is counted, per service and operation: requests, errors, and for DynamoDB the
capacity units. DynamoDB Local reports ``ConsumedCapacity`` when asked, so every item
operation is sent with ``ReturnConsumedCapacity=INDEXES`` and the answer is recorded —
table and index units separately. Two corrections make the figures AWS's:

* DynamoDB Local's units for ``TransactWriteItems`` are not AWS's (it reports 4 for one
  item, 4 for three puts, 8 for a put and an update). AWS bills two write units per 1 KB
  of every item in a transaction, so the table's units are computed from the request:
  2 x ceil(size / 1 KB) for each put (its real size), 2 for each update, delete or
  condition check (every Racecap item is under 1 KB). Index units: DynamoDB Local
  reports 4 per table whose index a transaction affects, as many items as do; counted
  here as 2 per item of that table whose write names an index key attribute (assuming
  the doubling applies to index writes too — the conservative reading). Until issue 38
  the 4 per table were taken as the whole: a writer's batch of ten registrations counted
  the index writes of one.
* a failed conditional write returns no ``ConsumedCapacity``, but AWS still bills it; it
  is counted as 1 unit per item (2 in a transaction) under ``*_failed_estimated``.

Each table's own share (its units, its indexes' and its failed conditions') is also counted
under ``wcu:<table name>`` and ``rcu:<table name>``: what one table must take in a burst.

Handler invocations are recorded with their duration (for Lambda GB-seconds) and whether
they came through the HTTP API (an API Gateway request) or from a queue or schedule.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ENV_DIR = "RACECAP_AWS_CALLS_DIR"
# A folder, beside ENV_DIR: every DynamoDB write is also written there, one JSON line per call,
# to ``writes-<pid>.jsonl`` (its items: table, action, key shape, size, and the units counted),
# to see which writes a registration's WCU go to (``python -m tools.awscalls <folder> <n>``).
ENV_TRACE = "RACECAP_AWS_CALLS_TRACE"
# The by_route row of a route's invocations and their CPU (beside its calls' rows).
HANDLER_ROW = "handler"
# by_function / by_route rows "sdk:<kind>": CPU inside the SDKs' calls (issue 30).
SDK_ROW = "sdk:"
FLUSH_EVERY_S = 0.5

# Operations that accept ReturnConsumedCapacity.
_CAPACITY_OPS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)
_WRITE_OPS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
_TRANSACT = frozenset({"TransactWriteItems", "TransactGetItems"})


class Counter:
    """Per-process tallies; thread-safe; flushed to one JSON file per process."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.lock = threading.Lock()
        self.pid = 0
        self.calls: dict[str, dict[str, float]] = {}
        self.invocations: dict[str, dict[str, float]] = {}
        self.redis: dict[str, int] = {}
        # The same calls again, keyed "<function id>|<service>:<operation>": which function made them.
        self.by_function: dict[str, dict[str, float]] = {}
        # And keyed "<route>|<service>:<operation>": which API route (an HTTP event's routeKey,
        # else "<function id>:<source>") made them, to see where a registration's calls go.
        self.by_route: dict[str, dict[str, float]] = {}
        self.current = threading.local()  # .function, .route: what this thread is running
        # Functions this process has already run: the first invocation of a function in an
        # execution environment builds what its init left lazy (SDK clients, the provider's
        # SDK, connections), so it is counted apart from the warm ones (issue 30).
        self.seen: set[str] = set()
        self.trace_dir = out_dir  # ENV_TRACE's folder when set (``install``)

    # -- recording ---------------------------------------------------------------------
    def _ensure_process(self) -> None:
        """After a fork (gunicorn workers) start fresh and start this process's flusher."""
        if self.pid == os.getpid():
            return
        with self.lock:
            if self.pid == os.getpid():
                return
            self.pid = os.getpid()
            self.calls, self.invocations, self.redis, self.by_function, self.by_route = {}, {}, {}, {}, {}
            self.seen = set()
            threading.Thread(target=self._flush_loop, name="awscalls-flush", daemon=True).start()

    def record_call(self, service: str, operation: str, fields: dict[str, float]) -> None:
        self._ensure_process()
        key = f"{service}:{operation}"
        function = getattr(self.current, "function", None) or "(outside a function)"
        route = getattr(self.current, "route", None) or function
        with self.lock:
            rows = ((self.calls, key), (self.by_function, f"{function}|{key}"), (self.by_route, f"{route}|{key}"))
            for table, row_key in rows:
                row = table.setdefault(row_key, defaultdict(float))
                for name, value in fields.items():
                    row[name] += value

    def trace_write(self, operation: str, params: dict[str, Any], fields: dict[str, float]) -> None:
        """One line per DynamoDB write (``ENV_TRACE``): who made it and what each item was."""
        line = {
            "function": getattr(self.current, "function", None),
            "route": getattr(self.current, "route", None),
            "op": operation,
            "items": [_traced_item(kind, body) for kind, body in _write_entries(operation, params)],
            "wcu_table": fields.get("wcu_table", 0.0),
            "wcu_index": fields.get("wcu_index", 0.0),
        }
        with self.lock, (self.trace_dir / f"writes-{os.getpid()}.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")

    def record_invocation(
        self, function_id: str, source: str, seconds: float, cpu_s: float, ok: bool, route: str | None = None
    ) -> None:
        self._ensure_process()
        key = f"{function_id}:{source}"
        with self.lock:
            if route is not None:
                by_route = self.by_route.setdefault(f"{route}|{HANDLER_ROW}", defaultdict(float))
                by_route["invocations"] += 1
                by_route["cpu_seconds"] += cpu_s
            row = self.invocations.setdefault(key, defaultdict(float))
            row["count"] += 1
            row["seconds"] += seconds
            row["cpu_seconds"] += cpu_s
            row["errors"] += 0 if ok else 1
            if function_id not in self.seen:
                self.seen.add(function_id)
                row["first_count"] += 1
                row["first_cpu_seconds"] += cpu_s

    def record_sdk(self, kind: str, cpu_s: float) -> None:
        """CPU spent inside one SDK call (``aws``: botocore, ``provider``: the Stripe SDK,
        ``redis``), in the calling thread, under the function and route running it."""
        self._ensure_process()
        function = getattr(self.current, "function", None)
        if function is None:
            return  # the pollers' own receives and deletes: not a handler's
        route = getattr(self.current, "route", None) or function
        with self.lock:
            for table, key in (
                (self.by_function, f"{function}|{SDK_ROW}{kind}"),
                (self.by_route, f"{route}|{SDK_ROW}{kind}"),
            ):
                row = table.setdefault(key, defaultdict(float))
                row["calls"] += 1
                row["cpu_seconds"] += cpu_s

    @contextmanager
    def sdk_call(self, kind: str) -> Iterator[None]:
        """Times the SDK call made inside the block (thread CPU) and records it as ``kind``."""
        cpu_start = time.thread_time()
        try:
            yield
        finally:
            self.record_sdk(kind, time.thread_time() - cpu_start)

    def record_redis(self, command: str, n: int = 1) -> None:
        """``n`` Redis commands named ``command``, also under the function running them
        (``by_function`` rows ``<function>|redis:<COMMAND>``)."""
        self._ensure_process()
        function = getattr(self.current, "function", None) or "(outside a function)"
        with self.lock:
            self.redis[command] = self.redis.get(command, 0) + n
            row = self.by_function.setdefault(f"{function}|redis:{command}", defaultdict(float))
            row["requests"] += n

    # -- output --------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "pid": self.pid,
                "calls": {k: dict(v) for k, v in self.calls.items()},
                "invocations": {k: dict(v) for k, v in self.invocations.items()},
                "redis": dict(self.redis),
                "by_function": {k: dict(v) for k, v in self.by_function.items()},
                "by_route": {k: dict(v) for k, v in self.by_route.items()},
            }

    def flush(self) -> None:
        data = json.dumps(self.snapshot())
        target = self.out_dir / f"calls-{os.getpid()}.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(data)
        tmp.replace(target)

    def _flush_loop(self) -> None:
        me = os.getpid()
        while self.pid == me:
            time.sleep(FLUSH_EVERY_S)
            try:
                self.flush()
            except OSError:
                pass


def _items_in(operation: str, params: dict[str, Any]) -> int:
    return len(_tables_of(operation, params)) or 1


def _value_size(value: dict[str, Any]) -> int:
    """Approximate DynamoDB size of one attribute value (wire format)."""
    ((kind, v),) = value.items()
    if kind in ("S", "B"):
        return len(str(v).encode())
    if kind == "N":
        return len(str(v)) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + _value_size(x) for k, x in v.items())
    if kind == "L":
        return 3 + sum(1 + _value_size(x) for x in v)
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(x).encode()) for x in v)
    return 0


def _write_entries(operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(action, body) per item a write names: Put/Update/Delete/ConditionCheck and its request."""
    if operation == "TransactWriteItems":
        return [next(iter(entry.items())) for entry in params.get("TransactItems", [])]
    if operation == "BatchWriteItem":
        entries = []
        for table, requests in params.get("RequestItems", {}).items():
            for r in requests:
                kind = "Put" if "PutRequest" in r else "Delete"
                entries.append((kind, {"TableName": table, **r[f"{kind}Request"]}))
        return entries
    return [(operation.removesuffix("Item"), params)]


def _key_shape(value: Any) -> str:
    """A key's shape without its ids: the text before the first '#', and each later part's
    first letters (``H#0b1f…`` → ``H#…``), so one line groups every runner's write."""
    text = str(next(iter(value.values()))) if isinstance(value, dict) else str(value)
    head, _, rest = text.partition("#")
    return head + ("#…" if rest else "")


def _traced_item(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    key = body.get("Key") or {k: body["Item"][k] for k in ("pk", "sk") if k in body.get("Item", {})}
    out: dict[str, Any] = {"action": kind, "table": body.get("TableName", "?")}
    out["key"] = "/".join(_key_shape(key[k]) for k in ("pk", "sk") if k in key)
    if "Item" in body:
        out["bytes"] = item_size(body["Item"])
    if "UpdateExpression" in body:
        out["update"] = body["UpdateExpression"]
    return out


def item_size(item: dict[str, Any]) -> int:
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _transact_write_units_by_table(params: dict[str, Any]) -> dict[str, float]:
    units: dict[str, float] = defaultdict(float)
    for entry in params.get("TransactItems", []):
        ((kind, item),) = entry.items()
        if kind == "Put":
            units[item["TableName"]] += 2 * max(1, -(-item_size(item["Item"]) // 1024))
        else:
            units[item["TableName"]] += 2
    return units


def _index_items_by_table(params: dict[str, Any]) -> dict[str, int]:
    """Per table, the transaction's items whose write names an index key attribute (``gsi…``):
    a Put of an item carrying one, an Update that sets or removes one. DynamoDB Local reports a
    transaction's index units per table, the same for one such item as for fifty (the writer's
    batches: issue 38's trace), where AWS bills every item's index write."""
    counts: dict[str, int] = defaultdict(int)
    for entry in params.get("TransactItems", []):
        ((kind, item),) = entry.items()
        if kind == "Put":
            touches = any(str(name).startswith("gsi") for name in item.get("Item", {}))
        elif kind == "Update":
            names = item.get("ExpressionAttributeNames") or {}
            words = [names.get(w, w) for w in str(item.get("UpdateExpression", "")).replace(",", " ").split()]
            touches = any(w.startswith("gsi") for w in words)
        else:
            touches = False
        counts[item["TableName"]] += int(touches)
    return counts


def _tables_of(operation: str, params: dict[str, Any]) -> list[str]:
    """The table of every item a write names (one entry per item)."""
    if operation == "TransactWriteItems":
        return [item["TableName"] for entry in params.get("TransactItems", []) for item in entry.values()]
    if operation == "BatchWriteItem":
        return [t for t, requests in params.get("RequestItems", {}).items() for _ in requests]
    return [params["TableName"]] if "TableName" in params else []


def _capacity_fields(operation: str, consumed: Any, params: dict[str, Any]) -> dict[str, float]:
    """Table and index units from a ConsumedCapacity answer, corrected to AWS's billing."""
    out: dict[str, float] = defaultdict(float)
    entries = consumed if isinstance(consumed, list) else [consumed]
    kind = "wcu" if operation in _WRITE_OPS else "rcu"
    if operation == "TransactWriteItems":
        for name, units in _transact_write_units_by_table(params).items():
            out["wcu_table"] += units
            out[f"wcu:{name}"] += units
        touching = _index_items_by_table(params)
        for entry in entries:
            if isinstance(entry, dict):
                # 4 reported per table whose index the transaction affects, however many of its
                # items do; 2 billed per item that does.
                index_units = sum(
                    i.get("CapacityUnits", 0.0) for i in (entry.get("GlobalSecondaryIndexes") or {}).values()
                )
                index_units = index_units / 2 * max(1, touching.get(entry.get("TableName", "?"), 0))
                out["wcu_index"] += index_units
                out[f"wcu:{entry.get('TableName', '?')}"] += index_units
        return out
    factor = 0.5 if operation in _TRANSACT else 1.0
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        table = entry.get("Table", {}).get("CapacityUnits")
        indexes = sum(i.get("CapacityUnits", 0.0) for i in (entry.get("GlobalSecondaryIndexes") or {}).values())
        indexes += sum(i.get("CapacityUnits", 0.0) for i in (entry.get("LocalSecondaryIndexes") or {}).values())
        if table is None:
            table = entry.get("CapacityUnits", 0.0) - indexes
        out[f"{kind}_table"] += table * factor
        out[f"{kind}_index"] += indexes * factor
        out[f"{kind}:{entry.get('TableName', '?')}"] += (table + indexes) * factor
    return out


def install(out_dir: str | Path) -> Counter:
    """Patch botocore, redis-py and the local function host in this process."""
    import botocore.client

    from local.runtime import EMULATION_ATTR

    counter = Counter(Path(out_dir))
    counter.out_dir.mkdir(parents=True, exist_ok=True)
    trace_dir = os.environ.get(ENV_TRACE)
    tracing = bool(trace_dir)
    if trace_dir:
        counter.trace_dir = Path(trace_dir)
        counter.trace_dir.mkdir(parents=True, exist_ok=True)
    original = botocore.client.BaseClient._make_api_call  # type: ignore[attr-defined]

    def counted_call(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        if getattr(self, EMULATION_ATTR, False):  # the local stack's own look, no deployment's call
            return original(self, operation_name, api_params)
        service = self.meta.service_model.service_name
        params = api_params
        if service == "dynamodb" and operation_name in _CAPACITY_OPS and "ReturnConsumedCapacity" not in params:
            params = {**api_params, "ReturnConsumedCapacity": "INDEXES"}
        fields: dict[str, float] = {"requests": 1}
        try:
            with counter.sdk_call("aws"):
                response = original(self, operation_name, params)
        except Exception as exc:
            fields["errors"] = 1
            code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
            fields[f"error:{code}"] = 1
            if service == "dynamodb" and operation_name in _WRITE_OPS:
                per_item = 2 if operation_name in _TRANSACT else 1
                fields["wcu_failed_estimated"] = per_item * _items_in(operation_name, api_params)
                for name in _tables_of(operation_name, api_params):
                    fields[f"wcu:{name}"] = fields.get(f"wcu:{name}", 0) + per_item
            counter.record_call(service, operation_name, fields)
            raise
        if service == "dynamodb" and "ConsumedCapacity" in response:
            fields.update(_capacity_fields(operation_name, response.pop("ConsumedCapacity"), api_params))
            if operation_name in _WRITE_OPS:
                fields["items"] = _items_in(operation_name, api_params)
                if tracing:
                    counter.trace_write(operation_name, api_params, fields)
        if service == "sqs" and operation_name == "ReceiveMessage":
            got = len(response.get("Messages", []))
            fields["messages"] = got
            fields["empty"] = 0 if got else 1
        counter.record_call(service, operation_name, fields)
        return response

    botocore.client.BaseClient._make_api_call = counted_call  # type: ignore[attr-defined]

    try:
        import redis.client

        redis_original = redis.client.Redis.execute_command

        def counted_redis(self: Any, *args: Any, **options: Any) -> Any:
            counter.record_redis(str(args[0]).upper() if args else "?")
            with counter.sdk_call("redis"):
                return redis_original(self, *args, **options)

        redis.client.Redis.execute_command = counted_redis  # type: ignore[method-assign]

        # A pipeline sends its commands in one round trip without execute_command: each is
        # counted by its name, and the round trip as PIPELINE (the pulse's flush is one).
        pipeline_original = redis.client.Pipeline.execute

        def counted_pipeline(self: Any, *args: Any, **options: Any) -> Any:
            for command in self.command_stack:
                counter.record_redis(str(command.args[0] if hasattr(command, "args") else command[0][0]).upper())
            counter.record_redis("PIPELINE")
            with counter.sdk_call("redis"):
                return pipeline_original(self, *args, **options)

        redis.client.Pipeline.execute = counted_pipeline  # type: ignore[method-assign]
    except ImportError:
        pass

    from local import runtime

    # invoke_timed: what invoke and the gateway both call.
    invoke_original = runtime.FunctionHost.invoke_timed

    profiles = _Profiles.from_env()

    def counted_invoke(self: Any, function_id: str, event: Any, timeout_s: float | None = None) -> Any:
        if isinstance(event, dict) and "requestContext" in event and "http" in event["requestContext"]:
            source = "http"
        elif isinstance(event, dict) and "Records" in event:
            source = "sqs"
        else:
            source = "other"
        route = str(event.get("routeKey")) if source == "http" else f"{function_id}:{source}"
        # The invoking thread's CPU while the handler runs: what Lambda would bill, without
        # the local stand-ins' share of the process (HTTP serving, event building, polling).
        start, cpu_start = time.perf_counter(), time.thread_time()
        ok = False
        outer = getattr(counter.current, "function", None), getattr(counter.current, "route", None)
        counter.current.function, counter.current.route = function_id, route
        profile = profiles.start(function_id) if profiles else None
        try:
            result = invoke_original(self, function_id, event, timeout_s)
            ok = True
            return result
        finally:
            counter.current.function, counter.current.route = outer
            _patch_provider_sdk(counter)
            elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu_start
            if profiles and profile is not None:
                profiles.stop(function_id, profile)
            counter.record_invocation(function_id, source, elapsed, cpu, ok, route)

    runtime.FunctionHost.invoke_timed = counted_invoke  # type: ignore[method-assign,assignment]
    return counter


PROFILE_ENV_DIR = "RACECAP_PROFILE_DIR"


class _Profiles:
    """With ``RACECAP_PROFILE_DIR`` set: cProfile (on thread CPU) around every invocation, one
    profile per function and process, written as ``<function>-<pid>.pstats`` every 50
    invocations. The handlers' CPU as the burst runs it (caches shared with the rest of the
    stack), where a tight-loop profile would flatter it. Profiling slows the handlers ~3x:
    read shares from it, not milliseconds."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.by_function: dict[str, Any] = {}
        self.counts: dict[str, int] = {}

    @classmethod
    def from_env(cls) -> _Profiles | None:
        out = os.environ.get(PROFILE_ENV_DIR)
        return cls(Path(out)) if out else None

    def start(self, function_id: str) -> Any:
        import cProfile

        profile = self.by_function.get(function_id)
        if profile is None:
            profile = self.by_function[function_id] = cProfile.Profile(time.thread_time)
        try:
            profile.enable()
        except ValueError:  # another profiler is active in this thread (a nested invoke)
            return None
        return profile

    def stop(self, function_id: str, profile: Any) -> None:
        profile.disable()
        n = self.counts[function_id] = self.counts.get(function_id, 0) + 1
        if n % 50 == 0:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            profile.dump_stats(str(self.out_dir / f"{function_id}-{os.getpid()}.pstats"))


def _patch_provider_sdk(counter: Counter) -> None:
    """Time the Stripe SDK's requests once a handler has imported it (it is imported on first
    use, so patching it at start-up would load it in every process)."""
    requestor = sys.modules.get("stripe._api_requestor")
    cls = getattr(requestor, "_APIRequestor", None)
    if cls is None or getattr(cls.request, "_racecap_timed", False):
        return
    original = cls.request

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        with counter.sdk_call("provider"):
            return original(self, *args, **kwargs)

    timed._racecap_timed = True  # type: ignore[attr-defined]
    cls.request = timed


def collect(out_dir: Path) -> dict[str, Any]:
    """Sum every process's file: {"calls": {svc:op: {...}}, "invocations": {...}, "redis": {...}}."""
    calls: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    invocations: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_function: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_route: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    redis_cmds: dict[str, int] = defaultdict(int)
    for path in sorted(out_dir.glob("calls-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for key, row in data["calls"].items():
            for name, value in row.items():
                calls[key][name] += value
        for key, row in data["invocations"].items():
            for name, value in row.items():
                invocations[key][name] += value
        for table, section in ((by_function, "by_function"), (by_route, "by_route")):
            for key, row in data.get(section, {}).items():
                for name, value in row.items():
                    table[key][name] += value
        for cmd, n in data["redis"].items():
            redis_cmds[cmd] += n
    return {
        "calls": {k: dict(v) for k, v in sorted(calls.items())},
        "invocations": {k: dict(v) for k, v in sorted(invocations.items())},
        "redis": dict(sorted(redis_cmds.items())),
        "by_function": {k: dict(v) for k, v in sorted(by_function.items())},
        "by_route": {k: dict(v) for k, v in sorted(by_route.items())},
    }


def subtract(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What happened between two :func:`collect` snapshots."""
    out: dict[str, Any] = {}
    for section in ("calls", "invocations", "by_function", "by_route"):
        rows: dict[str, dict[str, float]] = {}
        for key, row in after.get(section, {}).items():
            prev = before.get(section, {}).get(key, {})
            diff = {name: value - prev.get(name, 0) for name, value in row.items()}
            if any(diff.values()):
                rows[key] = diff
        out[section] = rows
    out["redis"] = {
        k: v - before["redis"].get(k, 0) for k, v in after["redis"].items() if v - before["redis"].get(k, 0)
    }
    return out


def summarize_writes(trace_dir: Path, registrations: int) -> list[tuple[str, float, float]]:
    """The traced writes grouped by who made them and what they wrote, per registration:
    (group, write requests, units) sorted by units. ``registrations``: what the run confirmed."""
    groups: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for path in sorted(trace_dir.glob("writes-*.jsonl")):
        for raw in path.read_text().splitlines():
            line = json.loads(raw)
            items = " + ".join(f"{i['action']} {i['table']}:{i['key']}" for i in line["items"])
            group = f"{line['route'] or line['function']} | {line['op']} [{items}]"
            groups[group][0] += 1
            groups[group][1] += line["wcu_table"] + line["wcu_index"]
    rows = [(g, n / registrations, u / registrations) for g, (n, u) in groups.items()]
    return sorted(rows, key=lambda r: -r[2])


if __name__ == "__main__":
    folder, confirmed = Path(sys.argv[1]), int(sys.argv[2])
    rows = summarize_writes(folder, confirmed)
    for group, requests, units in rows:
        print(f"{units:7.3f} WCU {requests:6.3f} req  {group}")
    print(f"{sum(r[2] for r in rows):7.3f} WCU {sum(r[1] for r in rows):6.3f} req  in all, per registration")
