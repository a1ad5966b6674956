"""(b), (c), (d) and the CPU figures: what the full-flow burst measured, as bench.json keys.

(b) the opening burst through Artillery (registrations/s, estimated hourly, latency,
audited), (b') the same flow at a steady rate, (c) (b) as a fraction of what (a) allows,
(d) the AWS calls counted between the probes, CPU by process and what bounds the figure.
"""

from __future__ import annotations

import os
from typing import Any

from tools import awscalls
from tools.bench.costs import (
    calls_by_function,
    calls_by_route,
    handler_cpu_by_route,
    per_registration,
    provider_costs,
    sdk_cpu,
    writer_contention,
    writes_by_function,
)
from tools.bench.floors import floor_per_registration
from tools.bench.section import Bench

RUNSIGNUP_HOURLY = 440_510
P99_TARGET_MS = 1000
# Issue 14's "lighter per registration" targets.
MAX_WRITES_PER_REGISTRATION = 6
MAX_WCU_PER_REGISTRATION = 24
MAX_WRITER_CONTENTION = 0.01
MAX_GATEWAY_POLLERS_CPU_MS = 20


def figures(
    bench: Bench, s: dict[str, Any], steady: dict[str, Any] | None, marks: dict[str, Any], idle: dict[str, float]
) -> dict[str, Any]:
    """The burst's keys of bench.json, ``target`` lines included (under "target")."""
    cfg = bench.cfg
    raw = bench.results.get("a_raw_dynamodb_local_writes") or {}
    registrations = s["registrations_completed"]
    span = s["first_to_last_s"] or 0
    per_s = registrations / span if span else 0.0
    delta = awscalls.subtract(marks["end"]["calls"], marks["start"]["calls"])
    counted = per_registration(delta, registrations)
    counted["registration_writer_contention"] = contention = writer_contention(delta)
    counted["dynamodb"]["write_requests_per_registration_by_function"] = writes_by_function(delta, registrations)
    counted["aws_calls_per_registration_by_route"] = calls_by_route(delta, registrations)
    counted["per_registration_by_function"] = calls_by_function(delta, registrations)
    if views := s.get("live_views"):
        # Directors watching (--live-views): the admin API's own cost per view and minute, which
        # must be the same at 100 runners and at 900 (issue 42).
        per_view_minute = calls_by_function(delta, views["view_minutes"])
        counted["live_views"] = views | {"admin_api_per_view_minute": per_view_minute.get("AdminApi", {})}
    counted["payment_provider"] = provider_costs(s.get("provider"), registrations)
    writes_per_reg = counted["dynamodb"]["write_requests_per_registration"]
    wcu_per_reg = counted["dynamodb"]["wcu_per_registration"]
    allowed = raw.get("conditional_writes_per_s", 0) / writes_per_reg if writes_per_reg else None
    cpu_start, cpu_end = marks["start"]["cpu"], marks["end"]["cpu"]
    cpu = {k: cpu_end[k] - cpu_start.get(k, 0) for k in cpu_end}
    wall = marks["end"]["t"] - marks["start"]["t"]
    machine_busy = cpu.pop("machine_total")
    stack_cpu = sum(cpu.values())
    cpu_report = {
        "idle_cores_before_the_burst": idle,
        "window_s": round(wall, 1),
        "machine_busy_cpu_s": round(machine_busy, 1),
        "machine_capacity_cpu_s": round(wall * (os.cpu_count() or 1), 1),
        "stack_cpu_s": round(stack_cpu, 1),
        "artillery_cpu_s": s["artillery_cpu_s"],
        "other_cpu_s (the bench, other users)": round(machine_busy - stack_cpu - s["artillery_cpu_s"], 1),
        "cpu_ms_per_registration": {
            k: round(v / max(registrations, 1) * 1000, 2) for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])
        },
        "stack_cpu_ms_per_registration": round(stack_cpu / max(registrations, 1) * 1000, 1),
    }
    own = cpu_report["cpu_ms_per_registration"]
    own_cpu_ms = own.get("gateway", 0) + own.get("pollers", 0)
    cpu_report["gateway_and_pollers_cpu_ms_per_registration"] = round(own_cpu_ms, 2)
    # Of that, the handlers themselves (each invocation's thread CPU): what Lambda would run.
    # The rest is the local stand-ins' share of those processes: API Gateway's HTTP serving
    # and event building in the gateway, the event-source mappings' polling in the pollers.
    handlers = handlers_cpu(bench, delta, counted, registrations)
    handlers_ms = handlers["handlers_cpu_ms_per_registration"]["total"]
    handlers["handlers_cpu_ms_per_registration"]["local_stand_ins (the rest of gateway + pollers)"] = round(
        own_cpu_ms - handlers_ms, 2
    )
    cpu_report |= handlers
    cpu_report["load_1min_at_the_burst_start_and_end"] = _loads(marks, "")
    if steady is not None and "steady_start" in marks and "steady_end" in marks:
        # The same split in the steady burst (b'): the machine is not saturated there, as the
        # floors' own samples are not (issue 30), so the two compare like for like.
        steady_delta = awscalls.subtract(marks["steady_end"]["calls"], marks["steady_start"]["calls"])
        steady_n = steady["registrations_completed"]
        steady_cpu = handlers_cpu(bench, steady_delta, per_registration(steady_delta, steady_n), steady_n)
        steady_cpu["load_1min_at_the_burst_start_and_end"] = _loads(marks, "steady_")
        cpu_report["at_a_steady_rate"] = steady_cpu
    cores = os.cpu_count() or 1
    per_reg_ms = (stack_cpu + s["artillery_cpu_s"]) / max(registrations, 1) * 1000
    needed_per_s = RUNSIGNUP_HOURLY / 3600
    bound = {
        "what": "CPU: every process of the flow (and the load generator) shares these cores",
        "cpu_ms_per_registration (stack + artillery)": round(per_reg_ms, 1),
        "registrations_per_s_if_every_core_were_the_flows": round(cores * 1000 / per_reg_ms, 1),
        "as_estimated_hourly": round(cores * 1000 / per_reg_ms * 3600),
        "registrations_per_s_needed_for_440510": round(needed_per_s, 1),
        "cpu_ms_per_registration_that_would_take": round(cores * 1000 / needed_per_s, 1),
        "dynamodb_local_alone_allows_per_s": round(allowed, 1) if allowed else None,
    }
    endpoints = s["endpoints"]
    hold_p99 = endpoints.get("hold", {}).get("p99")
    reg_p99 = endpoints.get("register", {}).get("p99")
    hourly = s["estimated_hourly_registrations"] or 0
    return {
        "b_full_flow": {
            "registrations_completed": registrations,
            "runners": cfg.runners,
            "runners_with_a_place": s["held"],
            "success_rate_for_runners_with_a_place": s["success_rate"],
            "first_request_to_last_confirmation_s": round(span, 2),
            "registrations_per_s": round(per_s, 1),
            "estimated_hourly_registrations": round(hourly),
            "peak_confirmations_per_s": s["peak_confirmations_per_s"],
            "latency_ms": {
                name: {k: st[k] for k in ("median", "p95", "p99", "max", "count")} for name, st in endpoints.items()
            },
            "errors": s["errors"],
            "audit_ok": bool(s["audit"] and s["audit"]["ok"]),
            "artillery_checks": s["checks"],
            "settings": {
                "arrival_window_s": cfg.arrival_s,
                "think_s": [cfg.think_min_s, cfg.think_max_s],
                "waiting_screen_backoff_scale": cfg.backoff_scale,
                "gateway": "an environment per invocation"
                if cfg.gateway_environments == "own"
                else f"shared: {cfg.gateway_workers} workers x {cfg.gateway_threads} threads",
                "ses_send_rate_per_s": cfg.email_rate,
                "warm_up_registrations_on_a_separate_race": cfg.warm_registrations,
            },
            "queues_drained_after_the_last_runner_s": s["drain_s"],
            "at_a_steady_rate": _steady_summary(steady),
            "report": s.get("report_path"),
        },
        "c_fraction_of_raw_limit": {
            "dynamodb_write_requests_per_registration": writes_per_reg,
            "registrations_per_s_the_raw_limit_allows": round(allowed, 1) if allowed else None,
            "fraction": round(per_s / allowed, 3) if allowed else None,
        },
        "d_aws_calls_and_cost": counted,
        "cpu_by_process": cpu_report,
        "what_bounds_it": bound,
        "target": {
            "estimated_hourly_registrations_over_440510": hourly > RUNSIGNUP_HOURLY,
            "success_100_percent": s["success_rate"] == 1,
            "hold_p99_under_1s": hold_p99 is not None and hold_p99 < P99_TARGET_MS,
            "register_p99_under_1s": reg_p99 is not None and reg_p99 < P99_TARGET_MS,
            "audit_ok": bool(s["audit"] and s["audit"]["ok"]),
            "dynamodb_writes_per_registration_at_most_6": 0 < writes_per_reg <= MAX_WRITES_PER_REGISTRATION,
            "wcu_per_registration_at_most_24": 0 < wcu_per_reg <= MAX_WCU_PER_REGISTRATION,
            "writer_contention_under_1_percent": contention["fraction"] is not None
            and contention["fraction"] < MAX_WRITER_CONTENTION,
            "gateway_and_pollers_cpu_at_most_20ms_per_registration": 0 < own_cpu_ms <= MAX_GATEWAY_POLLERS_CPU_MS,
        },
    }


def _loads(marks: dict[str, Any], prefix: str) -> list[float | None]:
    """The 1-minute load at a burst's start and end probes (``prefix``: "" or "steady_")."""
    return [marks[f"{prefix}{phase}"].get("load_1min") for phase in ("start", "end")]


def handlers_cpu(bench: Bench, delta: dict[str, Any], counted: dict[str, Any], registrations: int) -> dict[str, Any]:
    """The handlers' own CPU per registration between two probes: by function, by route, each
    new environment's first invocation, inside the SDKs' calls and outside them, and the floor
    at the same rates of invocations and AWS calls, with the ratio of the two."""
    invocations = counted["lambda_invocations"]
    by_invocation = {k: v["cpu_ms_per_registration"] for k, v in invocations.items()}
    handlers_ms = sum(by_invocation.values())
    first_ms = sum(v.get("first_invocations_cpu_ms_per_registration", 0) for v in invocations.values())
    # Of the handlers' CPU, what ran inside the SDKs' calls, and the rest (Racecap's code,
    # Powertools, pydantic, logging): where a further cut can come from.
    inside = sdk_cpu(delta, registrations)
    inside["outside_the_sdks_cpu_ms_per_registration"] = round(handlers_ms - inside["total_cpu_ms_per_registration"], 2)
    # The framework's and the SDK's own share at these rates (the floors section, when it ran).
    http_invocations = sum(v["per_registration"] for k, v in invocations.items() if k.endswith(":http"))
    aws_calls = sum(v["requests_per_registration"] for v in counted["aws_calls_per_registration"].values())
    floor = floor_per_registration(bench.results.get("floors") or {}, http_invocations, aws_calls)
    return {
        "handlers_cpu_ms_per_registration": {
            "total": round(handlers_ms, 2),
            # Each new execution environment's first invocation builds what its init left lazy
            # (on AWS as here); the rest is the warm path every later request takes.
            "of_which_environments_first_invocations": round(first_ms, 2),
            "new_environments": sum(v.get("first_invocations", 0) for v in invocations.values()),
            "by_function_and_source": dict(sorted(by_invocation.items(), key=lambda kv: -kv[1])),
            "by_route": handler_cpu_by_route(delta, registrations),
        },
        "handlers_cpu_inside_sdk_calls": inside,
        "floor": floor,
        "handlers_over_floor": round(handlers_ms / floor["total_ms"], 2) if floor and floor["total_ms"] else None,
    }


def _steady_summary(s: dict[str, Any] | None) -> dict[str, Any] | None:
    """The lighter burst: where p99 sits when the machine is not saturated."""
    if s is None:
        return None
    return {
        "runners": s["runners"],
        "arrival_rate_per_s": round(s["runners"] / s["config"]["arrival_s"], 1),
        "registrations_completed": s["registrations_completed"],
        "success_rate_for_runners_with_a_place": s["success_rate"],
        "estimated_hourly_registrations": round(s["estimated_hourly_registrations"] or 0),
        "latency_ms": {
            name: {k: st[k] for k in ("median", "p95", "p99", "max", "count")} for name, st in s["endpoints"].items()
        },
        "audit_ok": bool(s["audit"] and s["audit"]["ok"]),
        "problems": s["problems"],
        "report": s.get("report_path"),
    }
