"""CPU seconds by process group of the local stack, and of the whole machine (/proc)."""

from __future__ import annotations

import os
from pathlib import Path

from local.stack import LocalStack


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
