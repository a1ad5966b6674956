"""(d) AWS calls per registration by service and operation, counted in the gateway and
pollers processes (``tools/awscalls.py``), and the cost per 1,000 registrations at
PRODUCT.md's prices.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import blueprint
from tools import awscalls

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


# The payment provider's price, kept apart from AWS's: Stripe's standard US card pricing,
# 2.9 % + 30 cents per successful charge (no fee for a declined attempt or for API calls;
# a refund does not give the fee back). The race's price sets the percentage part.
PROVIDER_FEE = {"percent_of_charge": 0.029, "fixed_per_successful_charge_usd": 0.30}


def provider_costs(provider: dict[str, Any] | None, registrations: int) -> dict[str, Any] | None:
    """The provider's side of a registration: its API calls (counted by the Stripe stand-in
    during the burst, the card form's own calls included) and its fees per 1,000."""
    if not provider:
        return None
    n = max(registrations, 1)
    charges = provider["charges_succeeded"]
    mean_price = provider["amount_charged_cents"] / charges / 100 if charges else 0.0
    fee_per_charge = mean_price * PROVIDER_FEE["percent_of_charge"] + PROVIDER_FEE["fixed_per_successful_charge_usd"]
    return {
        "api_calls_per_registration": round(provider["api_calls"] / n, 3),
        "api_calls_per_registration_by_route": {k: round(v / n, 3) for k, v in provider["api_calls_by_route"].items()},
        "answered_429_during_the_burst": provider["answered_429"],
        "request_limit_per_s": provider["limit_per_second"],
        "mean_price_charged_usd": round(mean_price, 2),
        "fee_model": PROVIDER_FEE,
        "fees_per_1000_registrations_usd": round(fee_per_charge * 1000, 2),
        "notes": [
            "One successful charge per registration (the audit checks it against the provider's records).",
            "API calls: server-side (create the intent, retrieve on confirm, webhook-driven and sweeper "
            "calls) and the card form's confirm with the publishable key (a decline adds one); they cost "
            "nothing but count against the account's request limit (25/s test mode, ~100/s live).",
            "Fees are the provider's, charged on the race's price; kept out of the AWS total on purpose.",
        ],
    }


def _table_id(name: str) -> str:
    """The blueprint's id of a table named on the wire (its local name here)."""
    return next((t.id for t in blueprint.TABLES if t.local_name == name), name)


def per_registration(delta: dict[str, Any], registrations: int) -> dict[str, Any]:
    n = max(registrations, 1)
    by_service: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": 0.0, "operations": {}, "errors": {}})
    totals: dict[str, float] = defaultdict(float)
    by_table: dict[str, dict[str, float]] = defaultdict(lambda: {"wcu": 0.0, "rcu": 0.0})
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
            for name, value in row.items():
                if name.startswith(("wcu:", "rcu:")):
                    unit, table = name.split(":", 1)
                    by_table[_table_id(table)][unit] += value
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
            "mean_cpu_ms": round(row.get("cpu_seconds", 0) / row["count"] * 1000, 1) if row["count"] else None,
            "cpu_ms_per_registration": round(row.get("cpu_seconds", 0) / n * 1000, 2),
            # Of that, each execution environment's first invocation (it builds what the
            # init left lazy), and the warm invocations' mean.
            "first_invocations": int(row.get("first_count", 0)),
            "first_invocations_cpu_ms_per_registration": round(row.get("first_cpu_seconds", 0) / n * 1000, 2),
            "warm_mean_cpu_ms": round(
                (row.get("cpu_seconds", 0) - row.get("first_cpu_seconds", 0))
                / (row["count"] - row.get("first_count", 0))
                * 1000,
                2,
            )
            if row["count"] > row.get("first_count", 0)
            else None,
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
            # Each table's own units (its indexes' and failed conditions' included): what
            # tools/preflight_rules.py checks each table's warm throughput against.
            "capacity_per_registration_by_table": {
                t: {unit: round(v / n, 3) for unit, v in units.items()} for t, units in sorted(by_table.items())
            },
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
            "The payment provider is not AWS: its calls and fees are under payment_provider, apart from this total.",
        ],
    }


_WRITE_OPS = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
_LOST = ("error:TransactionCanceledException", "error:ConditionalCheckFailedException")
WRITER = "RegistrationWriter"


def writes_by_function(delta: dict[str, Any], registrations: int) -> dict[str, dict[str, float]]:
    """DynamoDB write requests per registration, per function and operation: where the
    write budget goes (issue 14: at most 6 in all)."""
    n = max(registrations, 1)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for key, row in sorted(delta.get("by_function", {}).items()):
        function, call = key.split("|", 1)
        service, op = call.split(":", 1)
        if service == "dynamodb" and op in _WRITE_OPS and row.get("requests"):
            out[function][op] = round(row["requests"] / n, 3)
    return dict(out)


def calls_by_function(delta: dict[str, Any], per: float) -> dict[str, dict[str, float]]:
    """Per function, divided by ``per`` (registrations, or view-minutes): AWS calls, DynamoDB
    write requests and WCU, Redis commands (a pipeline's each, and its round trip) and
    invocations. The rows issue 42 compares with and without directors watching."""
    n = max(per, 1e-9)
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, row in delta.get("by_function", {}).items():
        function, call = key.split("|", 1)
        service, op = call.split(":", 1)
        got = out[function]
        if service == "redis":
            got["redis_commands"] += row.get("requests", 0) / n
            continue
        got["aws_calls"] += row.get("requests", 0) / n
        if service == "dynamodb" and op in _WRITE_OPS:
            got["dynamodb_write_requests"] += row.get("requests", 0) / n
            got["wcu"] += sum(row.get(k, 0) for k in ("wcu_table", "wcu_index", "wcu_failed_estimated")) / n
    for key, row in delta.get("invocations", {}).items():
        out[key.split(":", 1)[0]]["invocations"] += row.get("count", 0) / n
    return {f: {k: round(v, 3) for k, v in sorted(rows.items())} for f, rows in sorted(out.items())}


def calls_by_route(delta: dict[str, Any], registrations: int) -> dict[str, dict[str, float]]:
    """AWS calls per registration, per API route (or function and event source) and
    operation: which of a runner's requests spends the calls (issue 14's CPU is per call)."""
    n = max(registrations, 1)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for key, row in sorted(delta.get("by_route", {}).items()):
        route, call = key.split("|", 1)
        if row.get("requests"):
            out[route][call] = round(row["requests"] / n, 3)
    return dict(sorted(out.items(), key=lambda kv: -sum(kv[1].values())))


def handler_cpu_by_route(delta: dict[str, Any], registrations: int) -> dict[str, dict[str, float]]:
    """The handlers' CPU per registration and per invocation, by API route (or function and
    event source): which of a runner's requests spends it (issue 30)."""
    n = max(registrations, 1)
    out: dict[str, dict[str, float]] = {}
    for key, row in delta.get("by_route", {}).items():
        route, name = key.split("|", 1)
        if name == awscalls.HANDLER_ROW and row.get("invocations"):
            out[route] = {
                "invocations_per_registration": round(row["invocations"] / n, 3),
                "cpu_ms_per_registration": round(row["cpu_seconds"] / n * 1000, 2),
                "mean_cpu_ms": round(row["cpu_seconds"] / row["invocations"] * 1000, 2),
            }
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["cpu_ms_per_registration"]))


def sdk_cpu(delta: dict[str, Any], registrations: int) -> dict[str, Any]:
    """CPU inside the SDKs' calls, measured in the handlers during the burst (issue 30): per
    function and kind (``aws``: botocore, ``provider``: the Stripe SDK, ``redis``), per
    registration and per call. Against the floor's per-call figure (one GetItem in a tight
    loop) it shows what the same SDK costs between a handler's other work."""
    n = max(registrations, 1)
    by_function: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    totals: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0.0, "cpu_seconds": 0.0})
    for key, row in delta.get("by_function", {}).items():
        function, name = key.split("|", 1)
        if not name.startswith(awscalls.SDK_ROW) or not row.get("calls"):
            continue
        kind = name.removeprefix(awscalls.SDK_ROW)
        by_function[function][kind] = _sdk_rates(row, n)
        totals[kind]["calls"] += row["calls"]
        totals[kind]["cpu_seconds"] += row["cpu_seconds"]
    return {
        "by_function": dict(sorted(by_function.items())),
        "total": {kind: _sdk_rates(t, n) for kind, t in sorted(totals.items())},
        "total_cpu_ms_per_registration": round(sum(t["cpu_seconds"] for t in totals.values()) / n * 1000, 2),
    }


def _sdk_rates(row: dict[str, float], n: int) -> dict[str, float]:
    """One kind of SDK call's figures from its ``calls`` and ``cpu_seconds`` (calls > 0)."""
    return {
        "calls_per_registration": round(row["calls"] / n, 3),
        "cpu_ms_per_registration": round(row["cpu_seconds"] / n * 1000, 2),
        "mean_cpu_ms_per_call": round(row["cpu_seconds"] / row["calls"] * 1000, 3),
    }


def writer_contention(delta: dict[str, Any]) -> dict[str, Any]:
    """The writer's DynamoDB writes lost to another writer (cancelled transactions, failed
    conditions on the bib counter), as a share of all its writes: redelivered, wasted work."""
    writes = lost = 0.0
    by_code: dict[str, int] = {}
    for key, row in delta.get("by_function", {}).items():
        function, call = key.split("|", 1)
        service, op = call.split(":", 1)
        if function != WRITER or service != "dynamodb" or op not in _WRITE_OPS:
            continue
        writes += row.get("requests", 0)
        for code in _LOST:
            if row.get(code):
                lost += row[code]
                by_code[f"{op} {code.removeprefix('error:')}"] = int(row[code])
    return {
        "writer_write_requests": int(writes),
        "lost_to_contention": int(lost),
        "fraction": round(lost / writes, 4) if writes else None,
        "by_error": by_code,
    }
