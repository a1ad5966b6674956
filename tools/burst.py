"""Artillery burst tests against the local stack (default) or a deployed stage.

    make burst                                   # 450 runners in 30 s, local stack, report
    RUNNERS=5000 THINK_MAX=20 make burst
    SCENARIO=oversubscribed make burst           # 5x more runners than places
    SCENARIO=race-page make burst                # read burst on the race page
    TARGET=https://d123.cloudfront.net RACE_ID=race_... make burst   # a deployed stage

    python -m tools.burst --help                 # every knob, each also an env variable

Locally it starts a dedicated stack on free ports in a temporary folder (nothing else is
touched), seeds a race, warms the functions up and checks one registration end to end
(the paper's "initial registration test"), runs the Artillery scenario with a progress
line, waits for the queues to drain, runs the post-burst audit (``tools/audit.py``) and
writes ``reports/burst-<timestamp>.html``. A failed ``ensure`` threshold or an audit
violation fails the run (exit status 1).

Against ``TARGET`` it skips everything local: no seeding (give ``RACE_ID``), no audit
(run ``python -m tools.audit`` where the backend is reachable); the report is built
from what the runners saw.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3

import blueprint
from local.runtime import install_layer_path
from local.stack import LocalStack, Ports, node_binary

install_layer_path()

from racecap.dal.dynamo import from_item, query_all, to_item, values  # noqa: E402
from racecap.dal.inventory import DynamoInventory  # noqa: E402
from racecap.dal.races import DynamoRaceStore  # noqa: E402
from racecap.logic.admin import EventDraft, RaceAdmin, RaceDraft  # noqa: E402

from tools import audit as auditing  # noqa: E402
from tools.audit import AuditReport  # noqa: E402

ROOT = blueprint.ROOT
ARTILLERY_DIR = ROOT / "artillery"
SCENARIOS = {
    "opening": ARTILLERY_DIR / "opening-burst.yml",
    "oversubscribed": ARTILLERY_DIR / "oversubscribed.yml",
    "race-page": ARTILLERY_DIR / "race-page-burst.yml",
}
# The endpoints each scenario's `ensure` thresholds name (p99 in ms), for --p99-limit.
THRESHOLD_ENDPOINTS = {
    "opening": ("hold", "register"),
    "oversubscribed": ("hold",),
    "race-page": ("race", "races"),
}
P99_LIMIT_MS = 1000
DIRECTOR = "director-burst"
# Three distances; runners spread over them in proportion to the places left.
EVENT_SPLIT = (("Marathon", 0.5, 9500), ("Half Marathon", 0.3, 6500), ("10K", 0.2, 3500))


@dataclass
class BurstConfig:
    scenario: str = "opening"
    runners: int = 450
    arrival_s: float = 30.0
    think_min_s: float = 2.0
    think_max_s: float = 8.0
    backoff_scale: float = 0.1
    confirm_timeout_s: float = 600.0
    cap: int | None = None  # places in total; default: 1.25x runners (opening), runners/5 (oversubscribed)
    target: str | None = None
    race_id: str | None = None
    # One request at a time per gateway worker, as Lambda runs one invocation per execution
    # environment. Not only faithful: Powertools keeps the current event in a class
    # attribute (BaseRouter.current_event), so two threads of one process can swap request
    # bodies; with --threads > 1 a burst sees 400s and wrong-email 409s (see the docs).
    gateway_workers: int = 8
    gateway_threads: int = 1
    email_rate: float = 2000.0
    warm: bool = True
    warm_registrations: int = 400  # JIT warm-up of the local JVMs (a separate race); 0 to skip
    warm_concurrency: int | None = None  # default: one request per gateway thread, twice over
    p99_limit_ms: int = P99_LIMIT_MS  # the scenario's `ensure` p99 thresholds (the product's: 1 s)
    drain_timeout_s: float = 300.0
    artillery_timeout_s: float = 1800.0
    out_dir: Path = ROOT / "reports"
    report: bool = True
    quiet: bool = False

    @property
    def local(self) -> bool:
        return not self.target


@dataclass
class BurstResult:
    config: dict[str, Any]
    summary: dict[str, Any]
    artillery_exit: int
    checks: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] | None = None
    report_path: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# -- the local stack ----------------------------------------------------------------------------
def start_stack(cfg: BurstConfig, work_dir: Path, extra_env: dict[str, str] | None = None) -> LocalStack:
    """A dedicated stack on free ports; SES and the email sender sped up for a big burst."""
    stack = LocalStack(
        work_dir,
        Ports.free(),
        gateway_workers=cfg.gateway_workers,
        gateway_threads=cfg.gateway_threads,
        ses_max_rate=cfg.email_rate,
        params={"EmailSendRatePerSecond": str(cfg.email_rate)},
        extra_env=extra_env,
        quiet=True,
    )
    return stack.start()


@dataclass
class Clients:
    dynamodb: Any
    sqs: Any

    @classmethod
    def for_stack(cls, stack: LocalStack) -> Clients:
        env = stack.aws_env()
        session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
        )
        return cls(
            session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"]),
            session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"]),
        )


def seed_race(clients: Clients, caps: list[tuple[str, int, int]], name: str = "Burst City Marathon") -> str:
    """Create an open race with (name, cap, priceCents) events, straight through the layer."""
    now = datetime.now(UTC)
    draft = RaceDraft(
        name=name,
        location="Loopback Park",
        raceDate=(now + timedelta(days=90)).date().isoformat(),
        registrationOpensAt=now - timedelta(minutes=1),
        registrationClosesAt=now + timedelta(days=1),
        holdMinutes=15,
        events=[EventDraft(name=n, cap=c, priceCents=p) for n, c, p in caps],
    )
    admin = RaceAdmin(
        DynamoRaceStore(clients.dynamodb, blueprint.table("Races").local_name),
        DynamoInventory(clients.dynamodb, blueprint.table("Inventory").local_name),
    )
    return admin.create_race(DIRECTOR, draft, open_now=True).raceId


def event_caps(cfg: BurstConfig) -> list[tuple[str, int, int]]:
    if cfg.cap is not None:
        total = cfg.cap
    elif cfg.scenario == "oversubscribed":
        total = max(1, cfg.runners // 5)
    else:
        total = max(3, int(cfg.runners * 1.25))
    caps = [(n, max(1, round(total * share)), price) for n, share, price in EVENT_SPLIT]
    return caps if total >= len(caps) else [("Marathon", total, 9500)]


# -- HTTP helpers (stdlib: nothing to install for TARGET runs) -------------------------------------
def http(method: str, url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - URL is ours
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else {}
        except ValueError:
            return exc.code, {"raw": raw[:200].decode(errors="replace")}


def _runner(email: str) -> dict[str, str]:
    return {
        "email": email,
        "firstName": "Warm",
        "lastName": "Up",
        "dateOfBirth": "1990-01-01",
        "paymentToken": "tok_visa",
    }


def _one_registration(base: str, race_id: str, event_id: str, email: str, wait: bool) -> str:
    status, hold = http("POST", f"{base}/api/races/{race_id}/events/{event_id}/holds")
    if status != 201:
        raise RuntimeError(f"hold answered {status} {hold}")
    status, reg = http("POST", f"{base}/api/holds/{hold['holdId']}/registration", _runner(email))
    if status != 202:
        raise RuntimeError(f"register answered {status} {reg}")
    deadline = time.monotonic() + 60
    while wait and time.monotonic() < deadline:
        status, got = http("GET", f"{base}/api/registrations/{reg['registrationId']}")
        if status == 200 and got.get("status") == "CONFIRMED":
            return str(got.get("bib"))
        time.sleep(0.2)
    if wait:
        raise RuntimeError("not confirmed within 60 s")
    return reg["registrationId"]


def warm_up(base: str, race_id: str, event_id: str, concurrency: int, say: Any) -> float:
    """Pre-warm the functions, then prove one registration works end to end.

    Concurrent requests make every gateway worker load each function's execution
    environment (its cold start) before the burst, as provisioned concurrency or a
    warm-up step would on AWS. Then one runner goes hold -> register -> CONFIRMED on
    this race (the paper's "initial registration test"); it counts in the race like any
    other (the audit sees it). Returns the seconds it took.
    """
    t0 = time.monotonic()
    # Several waves: a worker busy with a cold start still accepts, so one wave may miss some.
    for _ in range(4):
        calls = [("GET", f"{base}/api/races/{race_id}", None)] * concurrency
        calls += [("GET", f"{base}/api/registrations/reg_warmup{i}", None) for i in range(concurrency)]
        calls += [("GET", f"{base}/api/races", None)] * (concurrency // 2)
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(lambda c: http(*c), calls))
    try:
        bib = _one_registration(base, race_id, event_id, "warmup-runner@example.com", wait=True)
    except RuntimeError as exc:
        raise RuntimeError(f"initial registration test failed: {exc}") from exc
    say(f"initial registration test passed in {time.monotonic() - t0:.1f}s (bib {bib})")
    return time.monotonic() - t0


def warm_servers(
    stack: LocalStack, clients: Clients, registrations: int, concurrency: int, timeout_s: float, say: Any
) -> float:
    """Run ``registrations`` full flows on a separate race, then let the queues drain.

    DynamoDB Local and ElasticMQ are JVMs: until their JIT has compiled the hot paths
    they take two to three times the CPU per request (measured here: ~940 conditional
    puts/s cold, ~2,800/s after ten seconds of load). AWS's services are warm, so the
    local stand-ins are warmed before anything is measured. The warm-up race is not part
    of the burst's figures.
    """
    if registrations <= 0:
        return 0.0
    t0 = time.monotonic()
    race_id = seed_race(clients, [("Warm-up", registrations + 10, 1000)], name="Warm-up Race")
    _, race = http("GET", f"{stack.url}/api/races/{race_id}")
    event_id = race["events"][0]["eventId"]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(
            pool.map(
                lambda i: _one_registration(stack.url, race_id, event_id, f"warm-{i}@example.com", wait=False),
                range(registrations),
            )
        )
    drain(stack, clients, timeout_s, lambda _msg: None)
    say(f"warmed the servers with {registrations} registrations in {time.monotonic() - t0:.1f}s")
    return time.monotonic() - t0


# -- Artillery -----------------------------------------------------------------------------------
def artillery_command() -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env["ARTILLERY_DISABLE_TELEMETRY"] = "true"
    env["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    node = node_binary()
    local_bin = ROOT / "local" / "node" / "node_modules" / ".bin"
    path = [str(local_bin)] + ([str(Path(node).parent)] if node else [])
    env["PATH"] = os.pathsep.join([*path, env.get("PATH", "")])
    exe = shutil.which("artillery", path=env["PATH"])
    if exe is None:
        raise RuntimeError("artillery not found: run `make install` (local/install.sh node)")
    return [exe], env


class Progress:
    """Counts the runners' milestones (processor.js writes them) into a one-line status."""

    def __init__(self, outcomes: Path, expected: int) -> None:
        self.outcomes = outcomes
        self.expected = expected
        self.counts: Counter[str] = Counter()
        self._pos = 0
        self._partial = ""

    def poll(self) -> None:
        if not self.outcomes.exists():
            return
        with self.outcomes.open() as fh:
            fh.seek(self._pos)
            chunk = fh.read()
            self._pos = fh.tell()
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        for line in lines:
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            self.counts[row["e"]] += 1
            if row["e"] == "runner":
                self.counts[f"outcome:{row.get('outcome')}"] += 1

    def line(self, elapsed: float, confirmed_db: int | None) -> str:
        c = self.counts
        parts = [
            f"{elapsed:5.0f}s",
            f"arrived {c['arrive']}/{self.expected}",
            f"held {c['held']}",
            f"registered {c['registered']}",
            f"confirmed {c['confirmed']}" + (f" (db {confirmed_db})" if confirmed_db is not None else ""),
            f"unplaced {c['outcome:unplaced']}",
            f"done {c['runner']}",
        ]
        if c["outcome:not_confirmed"]:
            parts.append(f"NOT CONFIRMED {c['outcome:not_confirmed']}")
        return "[burst] " + "  ".join(parts)


def confirmed_count(clients: Clients, race_id: str, event_ids: list[str]) -> int:
    """The writer's running total (the STATS item per event): one read per event."""
    table = blueprint.table("Inventory").local_name
    total = 0
    for eid in event_ids:
        resp = clients.dynamodb.get_item(TableName=table, Key=to_item({"pk": f"STATS#{race_id}#{eid}", "sk": "STATS"}))
        if "Item" in resp:
            total += int(from_item(resp["Item"]).get("confirmed", 0))
    return total


def run_artillery(
    cfg: BurstConfig,
    base: str,
    race_id: str,
    work: Path,
    clients: Clients | None,
    event_ids: list[str],
    say: Any,
) -> tuple[int, Path, Path, Path]:
    outcomes = work / "outcomes.jsonl"
    report_json = work / "artillery.json"
    log = work / "artillery.log"
    outcomes.unlink(missing_ok=True)
    phase_name = "readers" if cfg.scenario == "race-page" else "opening"
    overrides: dict[str, Any] = {
        "config": {
            "target": base,
            "phases": [{"name": phase_name, "duration": cfg.arrival_s, "arrivalCount": cfg.runners}],
        }
    }
    if cfg.p99_limit_ms != P99_LIMIT_MS:  # Artillery replaces arrays given in --overrides
        overrides["config"]["ensure"] = {
            "thresholds": [
                {f"plugins.metrics-by-endpoint.response_time.{name}.p99": cfg.p99_limit_ms}
                for name in THRESHOLD_ENDPOINTS[cfg.scenario]
            ]
        }
    cmd, env = artillery_command()
    env.update(
        {
            "RACECAP_RACE_ID": race_id,
            "RACECAP_THINK_MIN_S": str(cfg.think_min_s),
            "RACECAP_THINK_MAX_S": str(cfg.think_max_s),
            "RACECAP_BACKOFF_SCALE": str(cfg.backoff_scale),
            "RACECAP_CONFIRM_TIMEOUT_S": str(cfg.confirm_timeout_s),
            "RACECAP_OUTCOMES": str(outcomes),
        }
    )
    if cfg.scenario == "race-page":
        env["RACECAP_THINK_MIN_S"], env["RACECAP_THINK_MAX_S"] = "1", "2"
    cmd += [
        "run",
        "--output",
        str(report_json),
        "--overrides",
        json.dumps(overrides),
        str(SCENARIOS[cfg.scenario]),
    ]
    progress = Progress(outcomes, cfg.runners)
    tty = sys.stdout.isatty() and not cfg.quiet
    t0 = time.monotonic()
    last_print = 0.0
    cpu_before = _children_cpu_s()
    with log.open("w") as log_fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log_fh, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                time.sleep(1.0)
                elapsed = time.monotonic() - t0
                if elapsed > cfg.artillery_timeout_s:
                    proc.terminate()
                    say(f"artillery ran past {cfg.artillery_timeout_s:.0f}s; stopped")
                    break
                progress.poll()
                if cfg.quiet:
                    continue
                if tty or elapsed - last_print >= 5:
                    db = None
                    if clients is not None and cfg.scenario != "race-page":
                        try:
                            db = confirmed_count(clients, race_id, event_ids)
                        except Exception:
                            db = None
                    text = progress.line(elapsed, db)
                    print(("\r" + text + "   ") if tty else text, end="" if tty else "\n", flush=True)
                    last_print = elapsed
        finally:
            if proc.poll() is None:
                proc.terminate()
            code = proc.wait(timeout=30)
    ARTILLERY_CPU_S[str(report_json)] = _children_cpu_s() - cpu_before
    progress.poll()
    if tty:
        print(flush=True)
    if not cfg.quiet:
        print(progress.line(time.monotonic() - t0, None), flush=True)
    return code, outcomes, report_json, log


ARTILLERY_CPU_S: dict[str, float] = {}  # artillery.json path -> CPU seconds Artillery used


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def ensure_checks(log: Path) -> list[dict[str, Any]]:
    """The `ensure` verdicts Artillery printed (ok: ... / fail: ...)."""
    checks = []
    for raw in log.read_text(errors="replace").splitlines():
        line = raw.strip()
        for prefix, ok in (("ok: ", True), ("fail: ", False)):
            # Artillery colours the verdict; strip ANSI escapes first.
            plain = _strip_ansi(line)
            if plain.startswith(prefix):
                checks.append({"check": plain[len(prefix) :], "ok": ok})
    return checks


def _strip_ansi(text: str) -> str:
    out, skip = [], False
    for ch in text:
        if ch == "\x1b":
            skip = True
            continue
        if skip:
            if ch.isalpha():
                skip = False
            continue
        out.append(ch)
    return "".join(out)


# -- after the burst ------------------------------------------------------------------------------
def queue_depth(clients: Clients, queue_urls: dict[str, str]) -> int:
    total = 0
    for q in blueprint.QUEUES:
        attrs = clients.sqs.get_queue_attributes(
            QueueUrl=queue_urls[q.id],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        total += int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])
    return total


def drain(stack: LocalStack, clients: Clients, timeout_s: float, say: Any) -> float:
    """Wait for both queues to be empty, in flight included (emails are the slow part)."""
    t0 = time.monotonic()
    quiet_checks = 0
    while time.monotonic() < t0 + timeout_s:
        depth = queue_depth(clients, stack.queue_urls)
        quiet_checks = quiet_checks + 1 if depth == 0 else 0
        if quiet_checks >= 2:
            break
        time.sleep(1.0)
    drained = time.monotonic() - t0
    say(f"queues drained in {drained:.1f}s")
    return drained


def audit_until_clean(stack: LocalStack, clients: Clients, race_id: str, timeout_s: float) -> AuditReport:
    return auditing.audit_until_clean(
        stack, clients.dynamodb, clients.sqs, race_id, timeout_s=timeout_s, interval_s=2.0
    )


def confirmations(clients: Clients, race_id: str, event_ids: list[str]) -> list[dict[str, Any]]:
    """Every confirmed registration of the race: id, event, bib, paidAt, confirmedAt."""
    table = blueprint.table("Registrations").local_name
    out: list[dict[str, Any]] = []
    for eid in event_ids:
        out += list(
            query_all(
                clients.dynamodb,
                TableName=table,
                IndexName="gsi1",
                KeyConditionExpression="gsi1pk = :pk",
                ExpressionAttributeValues=values({":pk": f"EVENT#{race_id}#{eid}"}),
                ProjectionExpression="registrationId, eventId, bib, paidAt, confirmedAt, #s",
                ExpressionAttributeNames={"#s": "status"},
            )
        )
    return [r for r in out if r.get("status") == "CONFIRMED"]


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def summarize(
    cfg: BurstConfig,
    outcomes: Path,
    artillery_report: Path,
    confirmed_rows: list[dict[str, Any]] | None,
    event_caps_: list[tuple[str, int, int]] | None,
) -> dict[str, Any]:
    """The paper's figures from what the runners saw and (locally) what the tables hold."""
    lines = [json.loads(x) for x in outcomes.read_text().splitlines() if x.strip()] if outcomes.exists() else []
    runners = [r for r in lines if r["e"] == "runner"]
    arrivals = [r["t"] / 1000 for r in lines if r["e"] == "arrive"]
    art = json.loads(artillery_report.read_text()) if artillery_report.exists() else {}
    aggregate = art.get("aggregate", {})
    counters: dict[str, int] = aggregate.get("counters", {})
    summaries: dict[str, dict[str, float]] = aggregate.get("summaries", {})

    outcome_counts = Counter(r["outcome"] for r in runners)
    aborted = len(arrivals) - len(runners)  # the VU died (a timeout or a dropped connection)
    if aborted:
        outcome_counts["aborted (timeout or connection error)"] = aborted
    # Milestones, not runner lines: a runner whose VU died after its hold still had a place.
    held = sum(1 for r in lines if r["e"] == "held")
    seen_confirmed = [r["t"] / 1000 for r in lines if r["e"] == "confirmed"]
    first_request = min(arrivals) if arrivals else None
    if confirmed_rows is not None:
        # Burst registrations only: confirmed after the burst's first request.
        times = sorted(_epoch(r["confirmedAt"]) for r in confirmed_rows)
        if first_request is not None:
            times = [t for t in times if t >= first_request]
        completion_source = "confirmedAt in the Registrations table"
    else:
        times = sorted(seen_confirmed)
        completion_source = "the runners' waiting screens (CONFIRMED seen)"
    completed = len(times)
    last_completion = times[-1] if times else None
    span = (last_completion - first_request) if (times and first_request) else None
    hourly = completed / span * 3600 if span else None

    endpoints: dict[str, dict[str, float]] = {}
    prefix = "plugins.metrics-by-endpoint.response_time."
    for name, stats in summaries.items():
        if name.startswith(prefix):
            endpoints[name[len(prefix) :]] = {
                k: stats.get(k, 0) for k in ("count", "min", "median", "p95", "p99", "max", "mean")
            }

    errors: list[dict[str, Any]] = []
    for name, n in counters.items():
        if name.startswith("plugins.metrics-by-endpoint.") and ".codes." in name:
            endpoint, code = name[len("plugins.metrics-by-endpoint.") :].split(".codes.")
            if not code.startswith(("2", "3")):
                errors.append({"endpoint": endpoint, "kind": "HTTP", "code": code, "count": n})
        elif name.startswith("racecap.api_errors."):
            endpoint, code = name[len("racecap.api_errors.") :].split(".", 1)
            errors.append({"endpoint": endpoint, "kind": "API", "code": code, "count": n})
        elif name.startswith("errors."):
            errors.append({"endpoint": "*", "kind": "network", "code": name[len("errors.") :], "count": n})
    errors.sort(key=lambda e: (-e["count"], e["endpoint"]))

    per_second: list[int] = []
    if times and first_request is not None:
        n_seconds = int(times[-1] - first_request) + 1
        per_second = [0] * n_seconds
        for t in times:
            per_second[int(t - first_request)] += 1
    arrivals_per_second: list[int] = []
    if arrivals and first_request is not None:
        arrivals_per_second = [0] * (int(max(arrivals) - first_request) + 1)
        for t in arrivals:
            arrivals_per_second[int(t - first_request)] += 1

    hold_to_confirm = sorted(
        (r["confirmed"] - r["held"]) / 1000 for r in runners if r.get("confirmed") and r.get("held")
    )
    paid_to_confirm: list[float] = []
    if confirmed_rows:
        paid_to_confirm = sorted(
            _epoch(r["confirmedAt"]) - _epoch(r["paidAt"]) for r in confirmed_rows if r.get("paidAt")
        )
    periods = []
    first_ms = (first_request or 0) * 1000
    for period in art.get("intermediate", []):
        row: dict[str, Any] = {
            "t": round((int(period.get("period", 0)) - first_ms) / 1000, 1) if first_request else None,
            "request_rate": period.get("rates", {}).get("http.request_rate", 0),
        }
        for name in ("hold", "register"):
            st = period.get("summaries", {}).get(f"plugins.metrics-by-endpoint.response_time.{name}")
            if st:
                row[f"{name}_p50"], row[f"{name}_p99"] = st.get("median"), st.get("p99")
        periods.append(row)
    requests = int(counters.get("http.requests", 0))
    duration = (aggregate.get("lastMetricAt", 0) - aggregate.get("firstMetricAt", 0)) / 1000 if aggregate else 0
    return {
        "scenario": cfg.scenario,
        "target": cfg.target or "local stack",
        "runners": cfg.runners,
        "arrived": len(arrivals),
        "finished": len(runners),
        "outcomes": dict(outcome_counts),
        "held": held,
        "confirmed_by_runners": len(seen_confirmed),
        "registrations_completed": completed,
        "success_rate": (len(seen_confirmed) / held) if held else None,
        "completion_source": completion_source,
        "first_request": first_request,
        "last_completion": last_completion,
        "last_completion_seen_by_runner": max(seen_confirmed) if seen_confirmed else None,
        "first_to_last_s": span,
        "estimated_hourly_registrations": hourly,
        "peak_confirmations_per_s": max(per_second) if per_second else 0,
        "confirmations_per_second": per_second,
        "arrivals_per_second": arrivals_per_second,
        "hold_to_confirmation_s": _percentiles(hold_to_confirm),
        "paid_to_confirmed_s": _percentiles(paid_to_confirm),
        "http_requests": requests,
        "artillery_duration_s": duration,
        "peak_request_rate": max(
            (p.get("rates", {}).get("http.request_rate", 0) for p in art.get("intermediate", [])), default=0
        ),
        "endpoints": endpoints,
        "periods": periods,
        "errors": errors,
        "vusers_failed": int(counters.get("vusers.failed", 0)),
        "event_caps": [{"name": n, "cap": c} for n, c, _ in (event_caps_ or [])],
    }


def _percentiles(values_: list[float]) -> dict[str, float] | None:
    if not values_:
        return None

    def pct(p: float) -> float:
        return values_[min(len(values_) - 1, int(p * len(values_)))]

    return {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "max": values_[-1]}


# -- the whole run --------------------------------------------------------------------------------
def run_burst(
    cfg: BurstConfig,
    stack: LocalStack | None = None,
    work: Path | None = None,
    probe: Callable[[str], None] | None = None,
) -> BurstResult:
    """Run one burst. Locally, ``stack`` may be an already running stack (tests, bench).

    ``probe("start")`` is called after the warm-up, just before Artillery starts, and
    ``probe("end")`` once the queues have drained (before the audit): the bench measures
    what happened in between.
    """

    def say(msg: str) -> None:
        if not cfg.quiet:
            print(f"[burst] {msg}", flush=True)

    own_work = work is None
    work = work or Path(tempfile.mkdtemp(prefix="racecap-burst-"))
    work.mkdir(parents=True, exist_ok=True)
    own_stack = cfg.local and stack is None
    problems: list[str] = []
    audit_report: AuditReport | None = None
    clients: Clients | None = None
    caps: list[tuple[str, int, int]] | None = None
    try:
        if cfg.local:
            if stack is None:
                say(f"starting a dedicated local stack in {work} (gateway {cfg.gateway_workers} workers)")
                t0 = time.monotonic()
                stack = start_stack(cfg, work / "stack")
                say(f"stack up in {time.monotonic() - t0:.1f}s at {stack.url}")
            clients = Clients.for_stack(stack)
            caps = event_caps(cfg)
            race_id = seed_race(clients, caps)
            base = stack.url
            say(f"seeded race {race_id}: " + ", ".join(f"{n} cap {c}" for n, c, _ in caps))
        else:
            if not cfg.race_id:
                raise SystemExit("TARGET needs RACE_ID (a race open for registration on that stage)")
            race_id, base = cfg.race_id, cfg.target.rstrip("/")  # type: ignore[union-attr]
        status, race = http("GET", f"{base}/api/races/{race_id}")
        if status != 200:
            raise RuntimeError(f"race {race_id} answered {status}: {race}")
        event_ids = [e["eventId"] for e in race["events"]]
        if cfg.warm:
            open_events = [e for e in race["events"] if e["spotsLeft"] > 0]
            concurrency = cfg.warm_concurrency or min(64, 2 * cfg.gateway_workers * cfg.gateway_threads)
            if cfg.local and stack is not None and clients is not None:
                warm_servers(stack, clients, cfg.warm_registrations, concurrency, cfg.drain_timeout_s, say)
            warm_up(base, race_id, open_events[0]["eventId"], concurrency, say)
        say(
            f"{cfg.scenario}: {cfg.runners} runners within {cfg.arrival_s:.0f}s, think "
            f"{cfg.think_min_s:g}-{cfg.think_max_s:g}s, waiting-screen back-off x{cfg.backoff_scale:g}"
        )
        if probe:
            probe("start")
        code, outcomes, art_json, log = run_artillery(cfg, base, race_id, work, clients, event_ids, say)
        checks = ensure_checks(log)
        if code != 0:
            failed = [c["check"] for c in checks if not c["ok"]]
            problems.append(f"artillery exited {code}" + (f"; failed checks: {failed}" if failed else f" (see {log})"))
            if not failed and not cfg.quiet:
                print("\n".join(log.read_text(errors="replace").splitlines()[-30:]), file=sys.stderr)
        rows = None
        drain_s = None
        if probe and not (cfg.local and cfg.scenario != "race-page"):
            probe("end")
        if cfg.local and stack is not None and clients is not None and cfg.scenario != "race-page":
            drain_s = drain(stack, clients, cfg.drain_timeout_s, say)
            if probe:
                probe("end")
            audit_report = audit_until_clean(stack, clients, race_id, 60.0)
            say(audit_report.summary())
            if not audit_report.ok:
                problems += [f"audit: {v}" for v in audit_report.violations]
            rows = confirmations(clients, race_id, event_ids)
        summary = summarize(cfg, outcomes, art_json, rows, caps)
        summary["race_id"] = race_id
        summary["artillery_cpu_s"] = round(ARTILLERY_CPU_S.get(str(art_json), 0.0), 1)
        summary["drain_s"] = drain_s
        summary["checks"] = checks
        summary["audit"] = asdict(audit_report) | {"ok": audit_report.ok} if audit_report else None
        summary["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}
        summary["machine"] = {"cpus": os.cpu_count(), "load_avg_1m_at_end": os.getloadavg()[0]}
        result = BurstResult(
            config=summary["config"],
            summary=summary,
            artillery_exit=code,
            checks=checks,
            audit=summary["audit"],
            problems=problems,
        )
        summary["problems"] = problems
        if cfg.report:
            from tools import report

            cfg.out_dir.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            path = cfg.out_dir / f"burst-{stamp}.html"
            path.write_text(report.render(summary))
            (cfg.out_dir / f"burst-{stamp}.json").write_text(json.dumps(summary, indent=2, default=str))
            result.report_path = str(path)
            summary["report_path"] = str(path)
            say(f"report: {path}")
        return result
    finally:
        if own_stack and stack is not None:
            stack.stop()
        if own_work and not os.environ.get("RACECAP_KEEP_WORK"):
            shutil.rmtree(work, ignore_errors=True)


def print_figures(summary: dict[str, Any]) -> None:
    def fmt(v: Any, spec: str = ",.0f") -> str:
        return "n/a" if v is None else format(v, spec)

    latency = [
        f"  {name:<9} p50 {s['median']:>6.0f} ms  p95 {s['p95']:>6.0f} ms  p99 {s['p99']:>6.0f} ms"
        f"  ({s['count']:,.0f} requests)"
        for name, s in summary["endpoints"].items()
    ]
    if summary["scenario"] == "race-page":
        print(
            "\n".join(
                [
                    "",
                    f"  page reads {summary['http_requests']:,} from {summary['arrived']:,} readers, "
                    f"peak {fmt(summary['peak_request_rate'])} requests/s (10-s periods)",
                    *latency,
                    "",
                ]
            ),
            flush=True,
        )
        return
    print(
        "\n".join(
            [
                "",
                f"  registrations completed       {summary['registrations_completed']:,}"
                f"  (runners who got a place: {summary['held']:,}; success "
                f"{fmt(summary['success_rate'] and summary['success_rate'] * 100, '.1f')}%)",
                f"  first request -> last confirmation  {fmt(summary['first_to_last_s'], '.1f')} s",
                f"  estimated hourly registrations      {fmt(summary['estimated_hourly_registrations'])}"
                "   (RunSignUp, 45 web servers: 440,510)",
                f"  peak confirmations per second       {summary['peak_confirmations_per_s']}",
                *latency,
                "",
            ]
        ),
        flush=True,
    )


def _env_float(name: str, default: float) -> float:
    return float(os.environ[name]) if os.environ.get(name) else default


def parse_args(argv: list[str] | None = None) -> BurstConfig:
    d = BurstConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default=os.environ.get("SCENARIO", d.scenario))
    p.add_argument("--runners", type=int, default=int(_env_float("RUNNERS", d.runners)))
    p.add_argument("--arrival", type=float, default=_env_float("ARRIVAL_S", d.arrival_s), help="seconds")
    p.add_argument("--think-min", type=float, default=_env_float("THINK_MIN", d.think_min_s))
    p.add_argument("--think-max", type=float, default=_env_float("THINK_MAX", d.think_max_s))
    p.add_argument(
        "--backoff-scale",
        type=float,
        default=_env_float("BACKOFF_SCALE", d.backoff_scale),
        help="multiplies the waiting screen's 10/20/40/60 s (1 = real)",
    )
    p.add_argument("--cap", type=int, default=int(os.environ["CAP"]) if os.environ.get("CAP") else None)
    p.add_argument("--target", default=os.environ.get("TARGET") or None, help="a deployed stage's URL")
    p.add_argument("--race-id", default=os.environ.get("RACE_ID") or None)
    p.add_argument("--gateway-workers", type=int, default=int(_env_float("GATEWAY_WORKERS", d.gateway_workers)))
    p.add_argument("--gateway-threads", type=int, default=int(_env_float("GATEWAY_THREADS", d.gateway_threads)))
    p.add_argument("--email-rate", type=float, default=_env_float("EMAIL_RATE", d.email_rate))
    p.add_argument("--no-warm", action="store_true")
    p.add_argument(
        "--warm-registrations",
        type=int,
        default=int(_env_float("WARM_REGISTRATIONS", d.warm_registrations)),
        help="full flows on a separate race first, to warm the local JVMs (0: none)",
    )
    p.add_argument(
        "--p99-limit", type=int, default=int(_env_float("P99_LIMIT_MS", P99_LIMIT_MS)), help="ms (default 1000)"
    )
    p.add_argument("--out", type=Path, default=d.out_dir)
    a = p.parse_args(argv)
    return BurstConfig(
        scenario=a.scenario,
        runners=a.runners,
        arrival_s=a.arrival,
        think_min_s=a.think_min,
        think_max_s=max(a.think_min, a.think_max),
        backoff_scale=a.backoff_scale,
        cap=a.cap,
        target=a.target,
        race_id=a.race_id,
        gateway_workers=a.gateway_workers,
        gateway_threads=a.gateway_threads,
        email_rate=a.email_rate,
        warm=not a.no_warm,
        warm_registrations=a.warm_registrations,
        p99_limit_ms=a.p99_limit,
        out_dir=a.out,
    )


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    result = run_burst(cfg)
    print_figures(result.summary)
    if result.problems:
        print("[burst] FAILED:\n  " + "\n  ".join(result.problems), file=sys.stderr, flush=True)
        sys.exit(1)
    print("[burst] passed: every check and the audit", flush=True)


if __name__ == "__main__":
    main()
