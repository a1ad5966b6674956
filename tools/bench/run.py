"""One bench run: the sections in their phases around the instrumented stack and the
full-flow bursts, assembled into one report (``reports/bench.json``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import blueprint
from local.runtime import LAYER_PATH
from tools import awscalls
from tools.bench import flow
from tools.bench.cpu import cpu_snapshot
from tools.bench.section import Bench
from tools.bench.sections import sections
from tools.burst import provider
from tools.burst.config import BurstConfig
from tools.burst.run import run_burst
from tools.burst.stack import start_stack

ROOT = blueprint.ROOT
# The report's keys in reading order; a new section's key goes after these (before target).
KEY_ORDER = (
    "a_raw_dynamodb_local_writes",
    "b_full_flow",
    "c_fraction_of_raw_limit",
    "d_aws_calls_and_cost",
    "e_cold_start_import_ms",
    "cpu_by_process",
    "floors",
    "what_bounds_it",
    "gateway_profile",
    "h_race_list",
)
_LOAD_AT_START = list(os.getloadavg())
# The API's provider budget under the provider's limit (the blueprint's 24 of test mode's 25).
PAYMENTS_BUDGET_SHARE = 0.96


def burst_config(args: argparse.Namespace) -> BurstConfig:
    return BurstConfig.from_args(
        args,
        scenario="opening",
        payments_budget_per_second=args.provider_rate * PAYMENTS_BUDGET_SHARE,
        payments_endpoint_budget_per_second=args.endpoint_rate * PAYMENTS_BUDGET_SHARE,
        report=True,
        answers=getattr(args, "answers", 0),
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = datetime.now(UTC)
    work = Path(tempfile.mkdtemp(prefix="racecap-bench-"))
    bench = Bench(args=args, work=work, cfg=burst_config(args))
    cfg = bench.cfg
    # --only-flow: the burst's own figures ((b), (c), (d), CPU by process) without the other
    # sections, for before/after runs of one change (each section still runs alone too).
    all_sections = [s for s in sections() if s.with_flow] if getattr(args, "only_flow", False) else sections()

    def measure(when: str) -> None:
        for section in all_sections:
            if section.when == when:
                bench.results[section.key] = section.measure(bench)

    measure("cold")
    calls_dir = work / "awscalls"
    extra_env = {
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tools" / "instrument"), str(ROOT), LAYER_PATH]),
        awscalls.ENV_DIR: str(calls_dir),
        # RACECAP_AWS_CALLS_TRACE=<dir>: every DynamoDB write on a line of its own (tools/awscalls.py).
        **({awscalls.ENV_TRACE: os.environ[awscalls.ENV_TRACE]} if os.environ.get(awscalls.ENV_TRACE) else {}),
        # RACECAP_PROFILE_DIR=<dir>: cProfile every handler as the burst runs it (tools/awscalls.py).
        **(
            {awscalls.PROFILE_ENV_DIR: os.environ[awscalls.PROFILE_ENV_DIR]}
            if os.environ.get(awscalls.PROFILE_ENV_DIR)
            else {}
        ),
    }
    bench.say(f"starting an instrumented local stack (gateway environments: {cfg.gateway_environments})")
    stack = bench.stack = start_stack(cfg, work / "stack", extra_env=extra_env)
    provider.set_limit(stack, cfg.provider_rate_per_second, cfg.provider_endpoint_rate_per_second)
    try:
        time.sleep(2)
        idle_a, idle_t = cpu_snapshot(stack), time.monotonic()
        time.sleep(5)
        idle_b, idle_dt = cpu_snapshot(stack), time.monotonic() - idle_t
        idle = {k: round((idle_b[k] - idle_a[k]) / idle_dt, 3) for k in idle_a}
        bench.say(f"idle CPU (cores): {idle}")
        measure("idle")

        marks: dict[str, Any] = {}

        def probe(phase: str) -> None:
            time.sleep(awscalls.FLUSH_EVERY_S * 3)  # let every process flush its counters
            marks[phase] = {
                "calls": awscalls.collect(calls_dir),
                "cpu": cpu_snapshot(stack),
                "t": time.monotonic(),
                "load_1min": os.getloadavg()[0],
            }

        bench.say(f"(b) full-flow burst: {cfg.runners} runners")
        result = run_burst(cfg, stack=stack, work=work / "burst", probe=probe)
        bench.burst = result.summary
        steady = None
        if args.steady_runners > 0:
            bench.say(f"(b') the same flow at a steady rate: {args.steady_runners} runners in {cfg.arrival_s:g}s")
            steady_cfg = replace(cfg, runners=args.steady_runners, warm_registrations=0)
            # Probed too: the handlers' CPU on a machine the burst does not saturate (issue 30).
            steady = run_burst(
                steady_cfg, stack=stack, work=work / "steady", probe=lambda phase: probe(f"steady_{phase}")
            ).summary
        measure("after_burst")
    finally:
        stack.stop()

    parts = {**bench.results, **flow.figures(bench, result.summary, steady, marks, idle)}
    target: dict[str, bool] = parts.pop("target")
    report: dict[str, Any] = {
        "measured_at": started.isoformat(),
        "commit": _commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "load_avg_at_start": _LOAD_AT_START,
            "load_avg_at_end": list(os.getloadavg()),
            "note": "shared machine: other users' processes run at the same time; one run, as measured",
        },
    }
    report |= {k: parts.pop(k) for k in KEY_ORDER if k in parts} | parts
    for section in all_sections:
        if section.targets:
            target |= section.targets(report)
    target["met"] = all(target.values())
    report["target"] = target
    report["problems"] = result.problems
    return report


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
