"""Where the gateway's CPU goes: cProfile of in-process registration flows, by package."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from local.stack import LocalStack
from tools.bench.cpu import run_as_function
from tools.bench.section import Bench, Section


def _bucket(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "site-packages/" in path:
        package = path.split("site-packages/", 1)[1].split("/", 1)[0]
        return package.split(".")[0].removesuffix(".py")
    if "/layers/racecap/" in path:
        return "racecap (the layer)"
    if "/functions/" in path:
        return "handlers (functions/)"
    if "/local/" in path:
        return "local gateway/runtime"
    if path == "~":
        return "builtins (called by all of the above)"
    if path.startswith("<") or "/lib/python3" in path:
        return "python stdlib (http.client, email headers, json...)"
    return "other"


def profile_flows(stack: LocalStack, flows: int = 100) -> dict[str, Any]:
    """CPU per registration flow inside one gateway process, by package (cProfile on CPU time).

    The same requests a runner makes (race page, hold, register and pay, one status
    poll), sent through an in-process copy of the gateway against the running stack, so
    the profile has the gateway's share only, without HTTP serving or other processes.
    Runs in a fresh interpreter with the functions' environment, as a gateway worker does.
    """
    from tools.burst.clients import Clients
    from tools.burst.stack import seed_race

    race_id = seed_race(Clients.for_stack(stack), [("Profile", 2 * flows + 50, 1000)], name="Profile Race")
    proc = run_as_function(stack, _PROFILE_CHILD, race_id, str(flows))
    lines = [x for x in proc.stdout.splitlines() if x.startswith('{"flows"')]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"profile failed: {proc.stderr[-2000:]}")
    return dict(json.loads(lines[-1]))


_PROFILE_CHILD = "import sys; from tools.bench.gateway_profile import _profile_child; _profile_child(*sys.argv[1:])"


def _profile_child(race_id: str, flows_arg: str) -> None:
    import cProfile
    import io
    import pstats

    from local.gateway import Gateway

    flows = int(flows_arg)
    gateway = Gateway()

    def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": "",
            "wsgi.input": io.BytesIO(data),
            "CONTENT_LENGTH": str(len(data)),
            "CONTENT_TYPE": "application/json",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1",
        }
        status: list[str] = []
        out = b"".join(gateway(environ, lambda st, _h, *_a: status.append(st)))
        return int(status[0].split()[0]), json.loads(out) if out else None

    status, race = call("GET", f"/api/races/{race_id}")
    if status != 200:
        raise RuntimeError(f"profile: race page answered {status} {race}")
    event_id = race["events"][0]["eventId"]

    def flow(i: int) -> None:
        call("GET", f"/api/races/{race_id}")
        _, hold = call("POST", f"/api/races/{race_id}/events/{event_id}/holds")
        body = {
            "email": f"profile-{i}-{uuid.uuid4().hex[:8]}@example.com",
            "firstName": "Pro",
            "lastName": "File",
            "dateOfBirth": "1990-01-01",
            "paymentMethod": "pm_card_visa",
        }
        _, reg = call("POST", f"/api/holds/{hold['holdId']}/registration", body)
        call("GET", f"/api/registrations/{reg['registrationId']}")

    stdout = sys.stdout
    sys.stdout = io.StringIO()  # the handlers' EMF metric lines
    try:
        for i in range(10):
            flow(-i - 1)
        profiler = cProfile.Profile(time.process_time)
        c0, w0 = time.process_time(), time.perf_counter()
        profiler.enable()
        for i in range(flows):
            flow(i)
        profiler.disable()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        # Once more without the profiler: its own overhead inflates the profiled figure.
        c1 = time.process_time()
        for i in range(flows):
            flow(flows + i)
        cpu_plain = time.process_time() - c1
    finally:
        sys.stdout = stdout
    stats = pstats.Stats(profiler)
    buckets: dict[str, float] = defaultdict(float)
    functions: list[tuple[float, str]] = []
    for (filename, line, name), (_cc, _nc, tottime, _cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        buckets[_bucket(filename)] += tottime
        functions.append((tottime, f"{Path(filename).name}:{line}({name})"))
    functions.sort(reverse=True)
    total = sum(buckets.values()) or 1.0
    print(
        json.dumps(
            {
                "flows": flows,
                "what": "race page + hold + register and pay + one status poll, in-process (no HTTP serving)",
                "cpu_ms_per_flow": round(cpu_plain / flows * 1000, 2),
                "cpu_ms_per_flow_profiled": round(cpu / flows * 1000, 2),
                "wall_ms_per_flow_profiled": round(wall / flows * 1000, 2),
                "cpu_share_by_package": {
                    k: round(v / total, 3) for k, v in sorted(buckets.items(), key=lambda kv: -kv[1])[:14]
                },
                "top_functions_self_cpu_share": [
                    {"function": f, "share": round(t / total, 3)} for t, f in functions[:15]
                ],
            }
        ),
        flush=True,
    )


def measure(bench: Bench) -> dict[str, Any]:
    assert bench.stack is not None
    bench.say("profiling the gateway's share of one registration (in-process, cProfile on CPU time)")
    profile = profile_flows(bench.stack)
    bench.say(f"    {profile['cpu_ms_per_flow']} ms CPU per flow; shares: {profile['cpu_share_by_package']}")
    return profile


SECTION = Section(key="gateway_profile", when="after_burst", measure=measure)
