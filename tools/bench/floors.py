"""Floors: what the framework and the SDK cost per call on this machine, whatever Racecap does.

Issue 14's CPU target (gateway + pollers <= 20 ms per registration) is an absolute figure;
this section measures, in the same run on the same machine, the parts of it Racecap cannot go
below, so a reader can tell the code's share from the machine's:

- ``framework_cpu_ms_per_invocation``: ``tools/bench/floor_handler.py`` (Powertools' HTTP
  resolver with validation and one pydantic model, nothing of Racecap's) answering a valid
  POST, in process;
- ``aws_call_cpu_ms``: one DynamoDB GetItem through ``racecap.clients`` (botocore, as Lambda
  runs it: signing, HTTP, parsing) against the stack's DynamoDB Local, client CPU only.

``flow.figures`` multiplies them by the HTTP invocations and AWS calls the burst counted per
registration (``cpu_by_process.floor``). The same handler's import is (e)'s
``framework_floor_ms``.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from tools.bench.cpu import run_as_function
from tools.bench.load import measured_quietly
from tools.bench.section import Bench, Section

# Runs with the functions' environment in a fresh interpreter, as a gateway worker does.
_CPU_CHILD = r"""
import json, sys, time
n = int(sys.argv[1])
from tools.bench import floor_handler
event = floor_handler.sample_event({"email": "ada@example.com", "firstName": "Ada"})
def per_call_ms(call):
    for _ in range(20):
        call()
    t = time.thread_time()
    for _ in range(n):
        call()
    return (time.thread_time() - t) / n * 1000
answer = floor_handler.handler(event, None)
assert answer["statusCode"] == 200, answer
invocation = per_call_ms(lambda: floor_handler.handler(event, None))
from racecap import clients
from racecap.config import get_settings
ddb = clients.dynamodb()
key = {"pk": {"S": "HOLD#floor"}, "sk": {"S": "HOLD"}}
table = get_settings().inventory_table
call = per_call_ms(lambda: ddb.get_item(TableName=table, Key=key))
print(json.dumps({"invocation": invocation, "call": call}))
"""


def measure(bench: Bench) -> dict[str, Any]:
    assert bench.stack is not None
    bench.say("floors: the framework's CPU per invocation, one AWS call's client CPU")
    samples = bench.args.cold_samples
    runs, load = measured_quietly(lambda: [_cpu(bench, bench.args.floor_calls) for _ in range(samples)], bench.say)
    return {
        "load": load,
        "framework": "aws_lambda_powertools APIGatewayHttpResolver(enable_validation=True), one pydantic body",
        "framework_cpu_ms_per_invocation": round(statistics.median(r["invocation"] for r in runs), 3),
        "aws_call": "DynamoDB GetItem via racecap.clients (botocore), DynamoDB Local on loopback",
        "aws_call_cpu_ms": round(statistics.median(r["call"] for r in runs), 3),
        "samples": samples,
        "calls_per_sample": bench.args.floor_calls,
    }


def _cpu(bench: Bench, calls: int) -> dict[str, float]:
    assert bench.stack is not None
    proc = run_as_function(bench.stack, _CPU_CHILD, str(calls))
    if proc.returncode != 0:
        raise RuntimeError(f"floors failed: {proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def floor_per_registration(floors: dict[str, Any], invocations: float, aws_calls: float) -> dict[str, Any] | None:
    """What the framework and the SDK alone cost per registration, at the counted rates."""
    if "aws_call_cpu_ms" not in floors:
        return None
    framework = invocations * floors["framework_cpu_ms_per_invocation"]
    sdk = aws_calls * floors["aws_call_cpu_ms"]
    return {
        "what": "invocations x the framework's CPU per invocation + AWS calls x one call's client CPU",
        "invocations_per_registration": round(invocations, 2),
        "aws_calls_per_registration": round(aws_calls, 2),
        "framework_ms": round(framework, 2),
        "aws_sdk_ms": round(sdk, 2),
        "total_ms": round(framework + sdk, 2),
        # A floor measured on a busy machine is not a floor (issue 30).
        "reliable": bool((floors.get("load") or {}).get("quiet", True)),
    }


def options(p: Any) -> None:
    p.add_argument("--floor-calls", type=int, default=300, help="calls per floor sample")


# With --only-flow too: cpu_by_process.floor reads it (a few seconds).
SECTION = Section(key="floors", when="idle", measure=measure, options=options, with_flow=True)
