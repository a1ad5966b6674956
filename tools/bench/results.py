"""(g) Results day (paper §6.2): result pages and autocompletes per second through the
cache stand-in (nginx, configured from blueprint.CACHE_BEHAVIOURS, as CloudFront would
serve them) and from the origin alone (the local gateway, cache bypassed), with p50/p99
and the edge's hit ratio.

    python -m tools.bench.results            # on its own: starts a local stack on free ports
    (``make bench`` runs it as section ``g_results`` on the bench's stack)

Which tool measures what: the rates and latencies come from ``wrk`` (Debian's package; a
C load generator that costs microseconds per request, so two cores can offer thousands
per second). Artillery spends milliseconds of CPU per request: it runs the realistic
scenario (``artillery/results-burst.yml``), not these rates. wrk runs on the same two
cores as nginx and the gateway, so every figure here includes that competition.

Arranged first: one event of RUNNERS registrations and their results (a CSV uploaded
through the presigned URL, processed, published), then every URL is fetched once through
the edge, as the first runners of results day would — the runs then measure the steady
state. The hit ratio counts the edge access log's lines written during each run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

import blueprint
from tools.bench.section import Bench, Section

RUNNERS = 5_000
PAGE_SIZE = 10
SECONDS = 10
TARGETS = {"edge_pages_per_s": 3000, "edge_autocompletes_per_s": 5000, "edge_p99_ms": 100, "origin_per_s": 150}
FIRST = ["Anna", "Ben", "Chloé", "David", "Émile", "Fatima", "Grace", "Hugo", "Inès", "Jonas", "Karin", "Liam"]
LAST = ["Martin", "Nguyen", "Öztürk", "Peters", "Quinn", "Rossi", "Sánchez", "Tanaka", "Ulrich", "Vogel", "Weiß"]


def _arrange(stack: Any, runners: int) -> dict[str, Any]:
    """A published event of ``runners`` results; returns its ids, version and URL lists."""
    import boto3

    token = stack.issuer.mint("bench-results")
    admin = requests.Session()
    admin.headers["Authorization"] = f"Bearer {token}"
    race = admin.post(
        f"{stack.url}/api/admin/races",
        json={
            "name": "Results Day (bench)",
            "location": "Loopback Park",
            "listing": "UNLISTED",
            "raceDate": "2099-05-01",
            "registrationOpensAt": "2099-01-01T09:00:00Z",
            "registrationClosesAt": "2099-04-01T09:00:00Z",
            "events": [{"name": "Marathon", "cap": runners, "priceCents": 5000}],
        },
        timeout=60,
    ).json()
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    names = {b: (FIRST[b % len(FIRST)], f"{LAST[b * 7 % len(LAST)]}{b}") for b in range(1, runners + 1)}
    env = stack.aws_env()
    ddb = boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name=env["AWS_REGION"]
    ).client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"])
    table = blueprint.table("Registrations").local_name

    def item(bib: int) -> dict[str, Any]:
        rid = f"reg_bench{bib:07d}{event_id[-8:]}"
        first, last = names[bib]
        doc = {
            "pk": f"REG#{rid}", "sk": "REG", "gsi1pk": f"EVENT#{race_id}#{event_id}", "gsi1sk": f"BIB#{bib:08d}",
            "registrationId": rid, "raceId": race_id, "eventId": event_id, "status": "CONFIRMED",
            "firstName": first, "lastName": last, "dateOfBirth": f"{1950 + bib % 50}-03-01",
        }  # fmt: skip
        out = {k: {"S": v} for k, v in doc.items()}
        out["bib"] = {"N": str(bib)}
        return {"PutRequest": {"Item": out}}

    def write(bibs: list[int]) -> None:
        request: dict[str, Any] = {table: [item(b) for b in bibs]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, [list(range(s, min(s + 25, runners + 1))) for s in range(1, runners + 1, 25)]))
    lines = ["bib,chip_time,gun_time,status,category,split_half"]
    for b in range(1, runners + 1):
        t = 2 * 3600 + (b * 37) % 7200
        status = "DNF" if b % 97 == 0 else ""
        lines.append(f"{b},{t // 3600}:{t % 3600 // 60:02d}:{t % 60:02d},,{status},{'FM'[b % 2]},")
    base = f"{stack.url}/api/admin/races/{race_id}/events/{event_id}/results"
    ticket = admin.post(f"{base}/uploads", json={}, timeout=60).json()
    requests.put(ticket["uploadUrl"], data="\n".join(lines).encode(), headers=ticket["uploadHeaders"], timeout=120)
    deadline = time.monotonic() + 300
    while (view := admin.get(f"{base}/uploads/{ticket['uploadId']}", timeout=60).json())["status"] not in (
        "READY",
        "REJECTED",
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("the results upload was not processed in time")
        time.sleep(0.5)
    if view["status"] != "READY":
        raise RuntimeError(f"bench results rejected: {view['errors'][:3]}")
    admin.post(f"{base}/publish", timeout=60).raise_for_status()
    version = view["version"]
    path = f"/api/races/{race_id}/events/{event_id}/results/{version}"
    pages = [f"{path}?page={p}&size={PAGE_SIZE}" for p in range(1, runners // PAGE_SIZE + 1)]
    pages += [f"{path}?page={p}&size={PAGE_SIZE}&gender={g}" for g in "FM" for p in range(1, 51)]
    typed = sorted({(w[:n]) for first, last in names.values() for w in (first, last) for n in (2, 3, 4, 5)})
    searches = [f"{path}/search?q={quote(q)}" for q in typed]
    searches += [f"{path}/search?q={b}" for b in range(10, runners, max(1, runners // 400))]
    return {"raceId": race_id, "eventId": event_id, "version": version, "pages": pages, "searches": searches}


_LUA = """
local paths = {%s}
local n = #paths
local i = math.random(n)
request = function()
  i = i %% n + 1
  return wrk.format("GET", paths[i])
end
"""


def _wrk(base: str, paths: list[str], work: Path, name: str, connections: int, seconds: int) -> dict[str, Any]:
    script = work / f"{name}.lua"
    script.write_text(_LUA % ",".join(json.dumps(p) for p in paths))
    cmd = [
        shutil.which("wrk") or "/usr/bin/wrk",
        "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "--timeout", "5s", "-s", str(script), base,
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    return {
        "requests_per_s": round(rate, 1),
        "requests": total,
        "p50_ms": _ms(out, "50%"),
        "p99_ms": _ms(out, "99%"),
        "non_2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": sum(int(x) for x in errors.groups()) if errors else 0,
        "connections": connections,
        "seconds": seconds,
    }


def _ms(out: str, pct: str) -> float:
    m = re.search(rf"^\s+{re.escape(pct)}\s+([\d.]+)(us|ms|s)\s*$", out, flags=re.M)
    if m is None:
        return float("nan")
    value, unit = float(m.group(1)), m.group(2)
    return round(value / 1000 if unit == "us" else value * 1000 if unit == "s" else value, 2)


def _artillery(edge: str, arranged: dict[str, Any], work: Path) -> dict[str, Any]:
    """artillery/results-burst.yml against the edge: the realistic mix, latency by request."""
    from tools.burst.artillery import artillery_command

    try:
        cmd, env = artillery_command()
    except RuntimeError as exc:
        return {"skipped": str(exc)}
    report = work / "results-artillery.json"
    env |= {"RACECAP_RACE_ID": arranged["raceId"], "RACECAP_EVENT_ID": arranged["eventId"]}
    yml = blueprint.ROOT / "artillery" / "results-burst.yml"
    run = subprocess.run(
        [*cmd, "run", "--target", edge, "--output", str(report), str(yml)],
        cwd=blueprint.ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if not report.exists():
        return {"failed": run.stdout[-2000:] + run.stderr[-2000:]}
    agg = json.loads(report.read_text())["aggregate"]
    counters, summaries = agg.get("counters", {}), agg.get("summaries", {})
    prefix = "plugins.metrics-by-endpoint.response_time."
    return {
        "exit_code": run.returncode,
        "vusers": {k: counters.get(f"vusers.{k}", 0) for k in ("created", "completed", "failed")},
        "requests": counters.get("http.requests", 0),
        "codes": {k.rsplit(".", 1)[1]: v for k, v in counters.items() if k.startswith("http.codes.")},
        "latency_ms": {
            k.removeprefix(prefix): {"p50": v.get("p50"), "p99": v.get("p99")}
            for k, v in summaries.items()
            if k.startswith(prefix)
        },
    }


def _hit_ratio(log: Path, offset: int) -> dict[str, Any]:
    time.sleep(1.5)  # nginx flushes its buffered access log every second
    with log.open("rb") as f:
        f.seek(offset)
        statuses = [line.split(b" ", 1)[0].decode() for line in f]
    hits = statuses.count("HIT")
    return {"hit_ratio": round(hits / len(statuses), 4) if statuses else None, "logged": len(statuses)}


def measure_on(stack: Any, work: Path, runners: int = RUNNERS, seconds: int = SECONDS) -> dict[str, Any]:
    started = time.monotonic()
    arranged = _arrange(stack, runners)
    arrange_s = round(time.monotonic() - started, 1)
    edge, origin = stack.edge_url, stack.url

    def first_visit(path: str) -> bool:
        try:
            return requests.get(edge + path, timeout=120).status_code == 200
        except requests.RequestException:
            return False

    with ThreadPoolExecutor(4) as pool:  # the first runners of results day fill the edge
        warmed = list(pool.map(first_visit, arranged["pages"] + arranged["searches"]))
    log = stack.log_dir / "edge-access.log"
    out: dict[str, Any] = {
        "tool": "wrk (rates, p50/p99); Artillery runs artillery/results-burst.yml (the realistic scenario)",
        "runners": runners,
        "arrange_s": arrange_s,
        "distinct_urls": {"pages": len(arranged["pages"]), "autocompletes": len(arranged["searches"])},
        "warm_up_failures": warmed.count(False),
    }
    for name, paths in (("pages", arranged["pages"]), ("autocompletes", arranged["searches"])):
        offset = log.stat().st_size
        out[f"edge_{name}"] = _wrk(edge, paths, work, f"edge-{name}", 64, seconds) | _hit_ratio(log, offset)
    for name, paths in (("pages", arranged["pages"]), ("autocompletes", arranged["searches"])):
        out[f"origin_{name}"] = _wrk(origin, paths, work, f"origin-{name}", 16, seconds)
    out["artillery_results_burst"] = _artillery(edge, arranged, work)
    out["target"] = {
        "edge_pages_per_s>=3000": out["edge_pages"]["requests_per_s"] >= TARGETS["edge_pages_per_s"],
        "edge_autocompletes_per_s>=5000": out["edge_autocompletes"]["requests_per_s"]
        >= TARGETS["edge_autocompletes_per_s"],
        "edge_p99_ms<100": max(out["edge_pages"]["p99_ms"], out["edge_autocompletes"]["p99_ms"])
        < TARGETS["edge_p99_ms"],
        "origin_results_per_s>=150": min(
            out["origin_pages"]["requests_per_s"], out["origin_autocompletes"]["requests_per_s"]
        )
        >= TARGETS["origin_per_s"],
    }
    return out


def _measure(bench: Bench) -> dict[str, Any]:
    assert bench.stack is not None
    bench.say("(g) results day: pages and autocompletes through the edge cache and from the origin (wrk)")
    return measure_on(bench.stack, bench.work)


def _targets(report: dict[str, Any]) -> dict[str, bool]:
    return {f"g_{k}": v for k, v in report.get("g_results", {}).get("target", {}).items()}


SECTION = Section("g_results", "idle", _measure, targets=_targets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runners", type=int, default=RUNNERS)
    parser.add_argument("--seconds", type=int, default=SECONDS)
    parser.add_argument("--out", type=Path, default=blueprint.ROOT / "reports" / "bench-results.json")
    args = parser.parse_args()
    from local.stack import LocalStack, Ports

    work = Path(tempfile.mkdtemp(prefix="racecap-bench-results-"))
    with LocalStack(work / "stack", Ports.free(), quiet=True) as stack:
        figures = measure_on(stack, work, args.runners, args.seconds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
