"""CPU seconds by process group of the local stack, and of the whole machine (/proc); and
a fresh interpreter to measure code in, as a gateway worker runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import blueprint
from local.runtime import LAYER_PATH
from local.stack import LocalStack
from tools import awscalls


def run_as_function(stack: LocalStack, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` with the functions' environment, in a fresh interpreter.

    Without the bench's call counter (``tools/instrument``, which the instrumented stack puts
    on its processes' path): what is measured here is botocore as Lambda runs it, not botocore
    asking for ConsumedCapacity and counting."""
    env = {**os.environ, **stack.function_env()}
    env["PYTHONPATH"] = os.pathsep.join([str(blueprint.ROOT), LAYER_PATH])
    env.pop(awscalls.ENV_DIR, None)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=blueprint.ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


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
