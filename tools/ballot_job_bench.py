"""The ballot's draw job at size, against DynamoDB Local: what ``BallotDraw`` does with 100,000 and
1,000,000 applications, its time, its memory, and its AWS calls (and so its cost) per 1,000.

    python -m tools.ballot_job_bench --out .bench/ballot.json              # 100,000 and 1,000,000
    python -m tools.ballot_job_bench --sizes 100000 --out /tmp/ballot.json

For each size, applications (30 % in groups of 2 to 4, confirmed) are written straight into a fresh
in-memory DynamoDB Local (not through the API: the apply path is measured by the integration tests
and its writes are counted below from its code), with the event's seed and commitment. Then, each
in a fresh interpreter (so its peak memory is its own):

* **order** — the job's first step, whole: every shard's ids read at once (timed apart: DynamoDB
  Local pages a large partition far slower than DynamoDB does), the seed checked, the order and
  the winners, the line's and the published list's pages written, the draw's record;
* **line, one page** — the second step's first page (10,000 runners: read, written as waitlist
  entries, their results queued to a counting queue, not SQS); the whole line is that times the
  pages, and spans as many 15-minute runs as it needs (the job's cursor).

Both count their AWS calls (a botocore hook on the client) and the items each moved; the cost per
1,000 applications is those counts at on-demand list prices (``PRICES``; us-east-1, stated in
the output). Load average is written beside the figures: this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from local.runtime import install_layer_path, local_session

install_layer_path()

# On-demand list prices (USD, us-east-1, 2026): what the counted calls cost.
PRICES = {
    "write_request_unit": 0.625 / 1e6,
    "read_request_unit": 0.125 / 1e6,
    "sqs_request": 0.40 / 1e6,
    "ses_email": 0.10 / 1e3,
    "lambda_gb_second_arm": 0.0000133334,
}
GROUPED = 0.30
PLACES_SHARE = 0.10
LAMBDA_MEMORY_GB = 2.0  # BallotDraw's memory (blueprint)


def _client(port: int) -> Any:
    return local_session().client("dynamodb", endpoint_url=f"http://127.0.0.1:{port}")


def _generate(port: int, table: str, race_id: str, event_id: str, count: int) -> int:
    """``count`` confirmed applications in the ballot's shards; the tickets they make."""
    from racecap.aws.items import to_item
    from racecap.aws.keys import ballot_app_key
    from racecap.waitlist.store import batch_write

    rng = random.Random(count)
    rows: list[dict[str, Any]] = []
    tickets = 0
    group_share = GROUPED / (GROUPED + 3 * (1 - GROUPED))
    while len(rows) < count:
        token = secrets.token_urlsafe(16)
        size = min(rng.randint(2, 4), count - len(rows)) if rng.random() < group_share else 1
        tickets += 1
        for m in range(size):
            app_id = f"app_{token}{m}"
            rows.append(
                {
                    **ballot_app_key(race_id, event_id, app_id),
                    **to_item(
                        {
                            "applicationId": app_id, "raceId": race_id, "eventId": event_id, "state": "CONFIRMED",
                            "email": f"{app_id.lower()}@example.com", "firstName": "Bench", "lastName": "Runner",
                            "dateOfBirth": "1990-01-01", "groupSize": size, "appliedAt": "2026-11-01T09:00:00+00:00",
                            "confirmedAt": "2026-11-01T09:05:00+00:00",
                            **({"groupId": f"grp_{token}"} if size > 1 else {}),
                        }
                    ),
                }
            )  # fmt: skip
    batches = [rows[i : i + 25] for i in range(0, len(rows), 25)]
    client = _client(port)

    def write(batch: list[dict[str, Any]]) -> None:
        batch_write(client, table, [{"PutRequest": {"Item": item}} for item in batch])

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, batches))
    del rows, batches  # the children measure their own memory; this one need not hold a million items
    return tickets


def _step(port: int, table: str, race_id: str, event_id: str, cap: int, step: str) -> dict[str, Any]:
    """One step of the job in this interpreter (run as a child: its peak memory is its own)."""
    from racecap.ballot.job import DrawJob
    from racecap.ballot.store import DynamoBallots
    from racecap.races.models import BallotSettings, Event, Race
    from racecap.waitlist.store import DynamoBallotLine

    client = _client(port)
    calls: Counter[str] = Counter()
    items: Counter[str] = Counter()

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        op = model.name
        calls[op] += 1
        if op == "BatchWriteItem":
            items[op] += sum(len(v) for v in params["RequestItems"].values())
        elif op == "BatchGetItem":
            items[op] += sum(len(v["Keys"]) for v in params["RequestItems"].values())
        elif op == "TransactWriteItems":
            items[op] += len(params["TransactItems"])
        elif op == "PutItem":  # the pages: written by the KB
            items["PutItemKb"] += -(-len(json.dumps(params["Item"])) // 1024)

    client.meta.events.register("provide-client-params.dynamodb.*", count)
    store = DynamoBallots(client, table)
    seed, commitment = store.seed(race_id, event_id) or ("", "")
    race = Race.model_validate(
        {"raceId": race_id, "ownerId": "bench", "name": "Bench Race", "raceDate": "2027-06-01",
         "registrationOpensAt": "2027-01-01T00:00:00+00:00", "registrationClosesAt": "2027-05-01T00:00:00+00:00"}
    )  # fmt: skip
    ballot = BallotSettings(enabled=True, commitment=commitment)
    event = Event(raceId=race_id, eventId=event_id, name="Bench", cap=cap, priceCents=0, ballot=ballot)

    class Queue:
        sent = 0

        def send(self, message: Any) -> str:
            self.sent += 1
            return ""

        def send_many(self, messages: Any) -> None:
            self.sent += len(messages)

    queue = Queue()
    job = DrawJob(
        None,  # type: ignore[arg-type]  # the steps are called with the race in hand
        store,
        DynamoBallotLine(client, table),
        lambda r, e: [("SHARD#000", cap, 0)],
        queue,
        "https://racecap.example",
    )
    timed: dict[str, float] = {}
    read_rows = job._read_rows

    def timed_read(*args: Any) -> Any:
        began = time.monotonic()
        rows = read_rows(*args)
        timed["readSeconds"] = round(time.monotonic() - began, 2)
        return rows

    job._read_rows = timed_read  # type: ignore[method-assign,assignment]
    started = time.monotonic()
    if step == "order":
        record = job._order(race, event)
        out: dict[str, Any] = {"applications": record.applications, "tickets": record.tickets,
                               "winners": record.winners, "pages": record.pages}  # fmt: skip
    else:
        drawn = store.draw_record(race_id, event_id)
        assert drawn is not None
        record = drawn
        pages_done = {"n": 0}

        def remaining() -> float:
            pages_done["n"] += 1
            return 900.0 if pages_done["n"] == 1 else 0.0  # one page, then "out of time"

        after = job._write_line(race, event, record, remaining)
        out = {"pagesWritten": after.lined, "pages": record.pages, "resultsQueued": queue.sent}
    seconds = time.monotonic() - started
    return (
        out
        | timed
        | {
            "seconds": round(seconds, 2),
            "peakRssMb": _peak_rss_mb(),
            "calls": dict(calls),
            "items": dict(items),
            "seedChecked": bool(seed),
        }
    )


def _peak_rss_mb() -> float:
    """This process's peak resident memory since its exec (VmHWM: getrusage's ru_maxrss would
    count the forking parent's pages, which hold the generated applications)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _child(args: argparse.Namespace) -> None:
    print(json.dumps(_step(args.port, args.table, args.race, args.event, args.cap, args.child)))


def _run_child(port: int, table: str, race_id: str, event_id: str, cap: int, step: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "tools.ballot_job_bench", "--child", step, "--port", str(port), "--table", table,
           "--race", race_id, "--event", event_id, "--cap", str(cap)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the {step} step failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _cost_per_thousand(order: dict[str, Any], page: dict[str, Any], applications: int) -> dict[str, float]:
    """USD per 1,000 applications: the draw's calls (the order whole, the line's page times its
    pages), item by item at on-demand prices (writes of items under 1 KB: 1 WRU each, plus 1 for
    the waitlist index; strongly consistent reads of items under 4 KB: 1 RRU each)."""
    pages = page["pages"] / max(page["pagesWritten"], 1)
    line_writes = page["items"].get("BatchWriteItem", 0) * pages
    line_reads = page["items"].get("BatchGetItem", 0) * pages
    order_rru = applications * 0.5 / 8  # the shards' queries: ~500 bytes an item, 4 KB per RRU, eventually consistent
    wru = line_writes * 2 + order["items"].get("PutItemKb", 0)  # entries + their index; the pages by the KB
    rru = line_reads + order_rru
    # One email each (the winners' is their offer): sent in batches of 10, received and deleted
    # by the email sender in batches of 10 too.
    sqs = applications * 0.3
    lambda_s = (order["seconds"] + page["seconds"] * pages) * LAMBDA_MEMORY_GB
    per = 1000 / applications
    cost = {
        "dynamodbWrites": wru * PRICES["write_request_unit"] * per,
        "dynamodbReads": rru * PRICES["read_request_unit"] * per,
        "sqs": sqs * PRICES["sqs_request"] * per,
        "ses": applications * PRICES["ses_email"] * per,
        "lambda": lambda_s * PRICES["lambda_gb_second_arm"] * per,
    }
    cost["total"] = sum(cost.values())
    return {k: round(v, 5) for k, v in cost.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--out", type=Path, default=Path(".bench/ballot.json"))
    parser.add_argument("--child", choices=("order", "line"))
    parser.add_argument("--port", type=int)
    parser.add_argument("--table")
    parser.add_argument("--race")
    parser.add_argument("--event")
    parser.add_argument("--cap", type=int)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return

    from racecap.ballot import draw
    from racecap.ballot.store import DynamoBallots

    from local import provision, servers

    work = Path(tempfile.mkdtemp(prefix="racecap-ballot-bench-"))
    port = servers.free_port()
    dynamo = servers.start_dynamodb(port, work, jvm_args=("-Xmx6g",))
    try:
        client = _client(port)
        import blueprint

        table_decl = blueprint.table("Inventory")
        client.create_table(**provision.create_table_params(table_decl))
        table = table_decl.local_name
        results: list[dict[str, Any]] = []
        for size in args.sizes:
            race_id, event_id = f"race_bench{size}", f"evt_bench{size}"
            seed = draw.new_seed()
            DynamoBallots(client, table).keep_seed(race_id, event_id, seed, draw.commitment(seed), "2026-11-29")
            started = time.monotonic()
            tickets = _generate(port, table, race_id, event_id, size)
            generated = time.monotonic() - started
            cap = int(size * PLACES_SHARE)
            print(
                f"[ballot bench] {size:,} applications ({tickets:,} tickets) written in {generated:.0f} s", flush=True
            )
            order = _run_child(port, table, race_id, event_id, cap, "order")
            print(f"[ballot bench] order: {order['seconds']} s (reading {order.get('readSeconds')} s), "
                  f"peak RSS {order['peakRssMb']} MB", flush=True)  # fmt: skip
            page = _run_child(port, table, race_id, event_id, cap, "line")
            line_estimate = page["seconds"] * page["pages"]
            print(f"[ballot bench] line: {page['seconds']} s a page x {page['pages']} pages", flush=True)
            results.append(
                {
                    "applications": size,
                    "tickets": tickets,
                    "places": cap,
                    "order": order,
                    "linePage": page,
                    "lineSecondsEstimated": round(line_estimate, 1),
                    "runsOf15MinutesForTheLine": max(1, -(-int(line_estimate) // 870)),
                    "costPer1000ApplicationsUsd": _cost_per_thousand(order, page, size),
                    "loadAverage": os.getloadavg(),
                }
            )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"ballot": results, "prices": PRICES}, indent=2))
        print(f"[ballot bench] wrote {args.out}")
    finally:
        dynamo.stop()


if __name__ == "__main__":
    main()
