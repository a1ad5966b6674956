"""(h) The race list: what a list request costs the database, counted by the bench's call
counter on the instrumented stack after the bursts (issue 26: each event's places are on the
list, from cached entries, with no DynamoDB read per list request).

``REQUESTS`` list requests go straight to the API (not through the edge, which would answer
from its own cache), spread over more than the list cache's time to live so its rebuilds
count; the answer is DynamoDB calls per request on the ``GET /api/races`` route.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from racecap.races.catalog import LIST_TTL

from tools import awscalls
from tools.bench.section import Bench, Section

REQUESTS = 600
SPREAD_S = 3 * LIST_TTL + 1
ROUTE = "GET /api/races"


def measure(bench: Bench) -> dict[str, Any]:
    stack = bench.stack
    assert stack is not None, "the race list is measured on the running stack"
    calls_dir = bench.work / "awscalls"
    time.sleep(awscalls.FLUSH_EVERY_S * 3)
    before = awscalls.collect(calls_dir)
    session = requests.Session()
    pause = SPREAD_S / REQUESTS * 4  # four at a time

    def one(i: int) -> int:
        time.sleep(max(0.0, (i // 4) * pause - (time.monotonic() - started)))
        return session.get(f"{stack.url}/api/races", timeout=30).status_code

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(one, range(REQUESTS)))
    elapsed = time.monotonic() - started
    time.sleep(awscalls.FLUSH_EVERY_S * 3)
    delta = awscalls.subtract(awscalls.collect(calls_dir), before)
    dynamo = {
        key.split("|", 1)[1]: row.get("requests", 0)
        for key, row in delta.get("by_route", {}).items()
        if key.startswith(f"{ROUTE}|dynamodb:")
    }
    answered = sum(1 for s in statuses if s == 200)
    return {
        "requests": REQUESTS,
        "answered_200": answered,
        "over_s": round(elapsed, 1),
        "list_cache_ttl_s": LIST_TTL,
        "dynamodb_calls": dynamo,
        "dynamodb_calls_per_request": round(sum(dynamo.values()) / max(answered, 1), 4),
    }


def targets(report: dict[str, Any]) -> dict[str, bool]:
    g = report.get("h_race_list") or {}
    # Rebuilds only: far below one read per request (a per-request read would be >= 1).
    return {"race_list_dynamodb_calls_per_request_under_0_1": g.get("dynamodb_calls_per_request", 1) < 0.1}


SECTION = Section(key="h_race_list", when="after_burst", measure=measure, targets=targets, with_flow=True)
