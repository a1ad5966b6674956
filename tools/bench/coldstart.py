"""(e) cold starts: each handler's import in a fresh interpreter per sample, and for a slow
one, what the import is spent on (``python -X importtime``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import blueprint
from local.runtime import LAYER_PATH
from local.stack import LocalStack
from tools.bench.load import measured_quietly
from tools.bench.section import Bench, Section

ROOT = blueprint.ROOT
COLD_START_TARGET_MS = 250  # issue 14
# Modules no handler should load at cold start (tests/unit/test_cold_imports.py says why).
AVOIDABLE_AT_COLD_START = ("aws_xray_sdk", "stripe", "s3transfer", "boto3")
# Powertools' HTTP resolver with validation and one pydantic model, nothing of Racecap's:
# what an API handler's import cannot go below on the machine (``framework_floor_ms``).
FRAMEWORK_FLOOR = Path(__file__).with_name("floor_handler.py")

_IMPORT_ONE = """
import importlib.util, json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
spec = importlib.util.spec_from_file_location("handler_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
print(json.dumps({"ms": ms, "cpu_ms": cpu_ms, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def cold_starts(samples: int = 3) -> dict[str, Any]:
    """Import each functions/*/handler.py in a fresh interpreter with the function env set.

    Two ways, each with the interpreter's own standard library compiled (as Lambda's runtime
    ships it): with every package's bytecode, as the code assets ship it since issue 14
    (``racecap_cdk.bytecode``) — the figure the target is about — and without the packages'
    and our bytecode, as a Lambda package of sources only loads (each module compiled at
    every cold start). The bytecode lives in a throwaway cache prefix, filled by one
    unmeasured import of each handler.

    Each HTTP function's row also has ``framework_floor_ms``, the median import of
    ``floor_handler.py`` sampled once beside each handler, and the handler's time over it:
    on a slow day the floor alone can exceed the target, which the row then says.
    """
    with tempfile.TemporaryDirectory() as tmp:
        with_bytecode = cold_import_env(Path(tmp))
        compiled = Path(with_bytecode["PYTHONPYCACHEPREFIX"])
        paths = {fn.id: fn.path / f"{fn.module.replace('.', '/')}.py" for fn in blueprint.FUNCTIONS}
        first = {fn_id: import_in_fresh_interpreter(path, with_bytecode) for fn_id, path in paths.items()}
        errors = {fn_id: r["error"] for fn_id, r in first.items() if "error" in r}
        stdlib_only = Path(tmp) / "stdlib-bytecode"
        stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
        shutil.copytree(compiled / stdlib.relative_to(stdlib.anchor), stdlib_only / stdlib.relative_to(stdlib.anchor))
        sources_only = {**with_bytecode, "PYTHONPYCACHEPREFIX": str(stdlib_only), "PYTHONDONTWRITEBYTECODE": "1"}
        out: dict[str, Any] = {}
        import_in_fresh_interpreter(FRAMEWORK_FLOOR, with_bytecode)
        floor: list[float] = []
        for fn_id, path in paths.items():
            # One sample of the framework's floor beside each handler's: the same moment of a
            # noisy machine, and a median over as many samples as there are functions.
            floor.append(import_in_fresh_interpreter(FRAMEWORK_FLOOR, with_bytecode).get("ms", float("nan")))
            if fn_id in errors:
                out[fn_id] = {"error": errors[fn_id]}
                continue
            runs = [import_in_fresh_interpreter(path, with_bytecode) for _ in range(samples)]
            if bad := [r["error"] for r in runs if "error" in r]:
                out[fn_id] = {"error": bad[0]}
                continue
            times = [r["ms"] for r in runs]
            without = [import_in_fresh_interpreter(path, sources_only).get("ms", float("nan")) for _ in range(samples)]
            median = statistics.median(times)
            out[fn_id] = {
                "handler": str(path.relative_to(ROOT)),
                "median_ms": round(median, 1),
                "median_cpu_ms": round(statistics.median(r["cpu_ms"] for r in runs), 1),
                "min_ms": round(min(times), 1),
                "max_ms": round(max(times), 1),
                "samples": len(times),
                "under_250_ms": median < COLD_START_TARGET_MS,
                "median_ms_without_package_bytecode": round(statistics.median(without), 1),
                "avoidable_modules_loaded": sorted(set(runs[-1]["modules"]) & set(AVOIDABLE_AT_COLD_START)),
            }
            if median >= COLD_START_TARGET_MS:
                out[fn_id]["heaviest_imports"] = heaviest_imports(path, with_bytecode)
        floor_ms = statistics.median(floor)
        http_functions = {route.function for route in blueprint.ROUTES}
        for fn_id, r in out.items():
            if "median_ms" in r and fn_id in http_functions:  # the floor is an HTTP handler's
                r["framework_floor_ms"] = round(floor_ms, 1)
                r["over_framework_floor_ms"] = round(r["median_ms"] - floor_ms, 1)
    return out


def cold_import_env(work: Path) -> dict[str, str]:
    """The functions' environment for a fresh import, its bytecode cached under ``work``
    (empty at first: the first import of each module compiles it, as a build would)."""
    env = {**os.environ, **LocalStack(work).function_env()}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), LAYER_PATH])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "bytecode")
    return env


def _fresh_import(path: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    """Import one handler in a fresh interpreter (``flags`` go to the interpreter)."""
    cmd = [sys.executable, *flags, "-c", _IMPORT_ONE, str(path)]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def import_in_fresh_interpreter(path: Path, env: dict[str, str]) -> dict[str, Any]:
    """One sample: the import's wall and CPU ms and the top-level packages it loaded."""
    proc = _fresh_import(path, env)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def heaviest_imports(path: Path, env: dict[str, str], top: int = 8) -> list[dict[str, Any]]:
    """What a slow handler's import is spent on (``python -X importtime``).

    Each package is charged the cumulative time of its outermost import (what importing
    it cost, its own dependencies included), so a package imported inside another one
    shows up in both: read it as "importing X costs this much", not as a partition.
    """
    proc = _fresh_import(path, env, "-X", "importtime")
    # Lines come out children first; "import time: self | cumulative |   nested.name".
    rows: list[tuple[int, str, int]] = []
    for line in proc.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        rows.append((depth, name.strip(), int(parts[1])))
    charged: dict[str, int] = {}
    # Walk parents before children: reverse order gives each subtree's root first.
    stack: list[tuple[int, str]] = []  # (depth, top package) of the open ancestors
    for depth, name, cumulative in reversed(rows):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        package = name.split(".")[0]
        if all(pkg != package for _, pkg in stack):
            charged[package] = charged.get(package, 0) + cumulative
        stack.append((depth, package))
    ranked = sorted(charged.items(), key=lambda kv: -kv[1])[:top]
    return [{"package": k, "import_ms": round(v / 1000, 1)} for k, v in ranked]


def measure(bench: Bench) -> dict[str, Any]:
    bench.say("(e) cold-start imports, a fresh interpreter per sample")
    cold, load = measured_quietly(lambda: cold_starts(bench.args.cold_samples), bench.say)
    for r in cold.values():
        r["load"] = load  # the machine's load while every row was sampled (one pass)
        if "framework_floor_ms" in r:
            r["framework_floor_reliable"] = load["quiet"]
    for fn_id, r in cold.items():
        without = f" (sources only: {r['median_ms_without_package_bytecode']} ms)" if "median_ms" in r else ""
        over = f", {r['over_framework_floor_ms']} over the framework's floor" if "framework_floor_ms" in r else ""
        bench.say(f"    {fn_id:<20} {r.get('median_ms', r.get('error'))} ms{over}{without}")
    return cold


def targets(report: dict[str, Any]) -> dict[str, bool]:
    return {"cold_start_under_250ms_each": all(r.get("under_250_ms") for r in report[SECTION.key].values())}


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cold-samples", type=int, default=3)


SECTION = Section(key="e_cold_start_import_ms", when="cold", measure=measure, targets=targets, options=options)
