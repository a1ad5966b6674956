"""(h) Ballots (issue 43): applications per second through the full path at a window's opening, on
the bench's stack, then the draw job at 100,000 and 1,000,000 applications
(``tools/ballot_job_bench``: its time, memory, calls and cost per 1,000).

The burst: ``--ballot-applicants`` runners (each its own address and device, as CloudFront names
them) get their device token and a solved challenge before the window opens (a runner's browser
does that while it waits), then all apply at once from 32 threads the moment it opens: the answer
times, the rate and the statuses. The challenges are at difficulty 0, so the two cores measure the
server's path (device and challenge checked, challenge spent, buckets, the claim and application
transaction, the confirmation email queued), not the clients' hashing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from tools.bench.section import Bench, Section

OPENS_IN_S = 20


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else 0.0


def apply_burst(stack: Any, applicants: int) -> dict[str, Any]:
    admin = requests.Session()
    admin.headers["Authorization"] = f"Bearer {stack.issuer.mint('bench-ballot')}"
    now = datetime.now(UTC)
    race = admin.post(f"{stack.url}/api/admin/races", json={
        "name": "Ballot (bench)", "location": "Loopback Park", "listing": "UNLISTED",
        "raceDate": (now + timedelta(days=60)).date().isoformat(), "currency": "EUR",
        "registrationOpensAt": (now + timedelta(days=40)).isoformat(),
        "registrationClosesAt": (now + timedelta(days=50)).isoformat(),
        "events": [{"name": "Marathon", "cap": max(1, applicants // 10), "priceCents": 9000}],
    }).json()  # fmt: skip
    rid, eid = race["raceId"], race["events"][0]["eventId"]
    admin.patch(f"{stack.url}/api/admin/races/{rid}/fairness", json={"powDifficulty": 0}).raise_for_status()
    opens = now + timedelta(seconds=OPENS_IN_S)
    admin.put(f"{stack.url}/api/admin/races/{rid}/events/{eid}/ballot", json={
        "opensAt": opens.isoformat(), "closesAt": (now + timedelta(days=3)).isoformat(),
        "drawAt": (now + timedelta(days=4)).isoformat(),
    }).raise_for_status()  # fmt: skip
    from racecap.fairness.work import solve

    def ready(n: int) -> dict[str, Any]:
        s = requests.Session()
        s.headers["CloudFront-Viewer-Address"] = f"198.19.{n // 250}.{n % 250 + 1}:443"
        s.headers["X-Racecap-Device"] = s.post(f"{stack.url}/api/device").json()["deviceToken"]
        ch = s.post(f"{stack.url}/api/races/{rid}/queue/challenge").json()
        body = {"email": f"bench{n}@example.com", "firstName": "Bench", "lastName": f"Runner{n}",
                "dateOfBirth": "1990-01-01", "challenge": ch["challenge"],
                "nonce": solve(ch["challenge"], ch["difficulty"])}  # fmt: skip
        return {"session": s, "body": body}

    with ThreadPoolExecutor(8) as pool:
        runners = list(pool.map(ready, range(applicants)))
    time.sleep(max(0.0, (opens - datetime.now(UTC)).total_seconds()) + 0.5)

    def apply(r: dict[str, Any]) -> tuple[int, float]:
        began = time.monotonic()
        resp = r["session"].post(f"{stack.url}/api/races/{rid}/events/{eid}/ballot", json=r["body"], timeout=60)
        return resp.status_code, time.monotonic() - began

    started = time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(apply, runners))
    wall = time.monotonic() - started
    ok = [t for status, t in answers if status == 202]
    statuses: dict[str, int] = {}
    for status, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {
        "applicants": applicants,
        "threads": 32,
        "statuses": statuses,
        "applications_per_s": round(len(ok) / wall, 1) if wall else 0.0,
        "p50_ms": _ms(ok, 0.50),
        "p99_ms": _ms(ok, 0.99),
        "wall_s": round(wall, 2),
    }


def measure(bench: Bench) -> dict[str, Any]:
    assert bench.stack is not None
    bench.say(f"ballot: {bench.args.ballot_applicants} applications at a window's opening")
    burst = apply_burst(bench.stack, bench.args.ballot_applicants)
    sizes = [str(n) for n in bench.args.ballot_sizes]
    bench.say(f"ballot: the draw job at {', '.join(sizes)} applications (DynamoDB Local of its own)")
    out = bench.work / "ballot-job.json"
    subprocess.run([sys.executable, "-m", "tools.ballot_job_bench", "--sizes", *sizes, "--out", str(out)], check=True)
    return {"apply_burst": burst, "draw_job": json.loads(Path(out).read_text())}


def options(parser: Any) -> None:
    parser.add_argument("--ballot-applicants", type=int, default=300, help="ballot applications in the opening burst")
    parser.add_argument("--ballot-sizes", type=int, nargs="+", default=[100_000, 1_000_000],
                        help="applications drawn by the ballot's job bench")  # fmt: skip


SECTION = Section("h_ballot", "after_burst", measure, options=options)
