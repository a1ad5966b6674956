"""Running Artillery: its command line, the scenario's overrides, the progress line from
the runners' milestones, and the `ensure` verdicts it printed.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from local.stack import node_binary
from tools.burst.clients import Clients
from tools.burst.config import P99_LIMIT_MS, ROOT, BurstConfig
from tools.burst.scenarios import scenario
from tools.burst.stack import confirmed_count


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


def run_artillery(
    cfg: BurstConfig,
    base: str,
    race_id: str,
    work: Path,
    clients: Clients | None,
    event_ids: list[str],
    say: Any,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, Path, Path, Path]:
    outcomes = work / "outcomes.jsonl"
    report_json = work / "artillery.json"
    log = work / "artillery.log"
    outcomes.unlink(missing_ok=True)
    sc = scenario(cfg.scenario)
    phases: list[dict[str, Any]] = (
        sc.phases(cfg) if sc.phases else [{"name": sc.phase, "duration": cfg.arrival_s, "arrivalCount": cfg.runners}]
    )
    overrides: dict[str, Any] = {"config": {"target": base, "phases": phases}}
    # Artillery replaces arrays given in --overrides; a scenario naming no endpoint, or a run
    # with no latency threshold (p99_limit_ms None), drops them.
    if cfg.p99_limit_ms != P99_LIMIT_MS or not sc.threshold_endpoints:
        limit = cfg.p99_limit_ms
        overrides["config"]["ensure"] = {
            "thresholds": []
            if limit is None
            else [{f"plugins.metrics-by-endpoint.response_time.{name}.p99": limit} for name in sc.threshold_endpoints]
        }
    if sc.ensure_conditions is not None:
        overrides["config"].setdefault("ensure", {})["conditions"] = [
            {"expression": e} for e in sc.ensure_conditions(cfg)
        ]
    cmd, env = artillery_command()
    env.update(extra_env or {})
    env.update(
        {
            "RACECAP_RACE_ID": race_id,
            "RACECAP_THINK_MIN_S": str(cfg.think_min_s),
            "RACECAP_THINK_MAX_S": str(cfg.think_max_s),
            "RACECAP_BACKOFF_SCALE": str(cfg.backoff_scale),
            "RACECAP_CONFIRM_TIMEOUT_S": str(cfg.confirm_timeout_s),
            "RACECAP_OUTCOMES": str(outcomes),
            "RACECAP_CODE": cfg.code,
            "RACECAP_CODE_SHARE": f"{cfg.code_share:g}",
            "RACECAP_TEAM_SHARE": f"{cfg.team_share:g}",
            "RACECAP_TEAM_SIZE": str(cfg.team_size),
        }
    )
    if sc.think_s is not None:
        env["RACECAP_THINK_MIN_S"], env["RACECAP_THINK_MAX_S"] = (f"{t:g}" for t in sc.think_s)
    cmd += [
        "run",
        "--output",
        str(report_json),
        "--overrides",
        json.dumps(overrides),
        str(sc.artillery),
    ]
    progress = Progress(outcomes, sum(int(p.get("arrivalCount", 0)) for p in phases))
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
                    if clients is not None and sc.registers:
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
