"""Measurement: the paper's figures from what the runners saw (the outcomes file and
Artillery's JSON) and, locally, what the Registrations table holds.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from tools.burst.config import BurstConfig


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
    # The opening-queue scenario has a share of its runners hold a place and stay on the form
    # on purpose (artillery/queue.js, outcome "held"): success counts the runners who went on
    # to register, or every runner with a place would have to confirm for 100 %.
    stayed_on_form = outcome_counts.get("held", 0)
    registering = held - stayed_on_form
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
        for name in ("hold", "register", "poll"):  # poll: the opening queue's own checks
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
        "held_without_registering": stayed_on_form,
        "success_rate": (len(seen_confirmed) / registering) if registering > 0 else None,
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
        "payments": _payments(runners, counters),
        "codes": {k: int(counters.get(f"racecap.codes.{k}", 0)) for k in ("tried", "applied", "used_up")},
        # Team captains (TEAM_SHARE): each holds and pays for a whole team (every member a registration).
        "teams": {k: int(counters.get(f"racecap.teams.{k}", 0)) for k in ("captains", "held", "too_few_places")},
        "event_caps": [{"name": n, "cap": c} for n, c, _ in (event_caps_ or [])],
    }


def _payments(runners: list[dict[str, Any]], counters: dict[str, int]) -> dict[str, Any]:
    """How the runners paid: the card each started with, the declines they got past (a good
    card next), the 3-D Secure challenges, and the 429s they waited out (the provider's own,
    in the card form; the API's, with Retry-After, on the registration and confirm routes)."""
    paying = [r for r in runners if r.get("card") and r.get("held")]
    return {
        "first_card": dict(Counter(r["card"] for r in paying)),
        "declined_then_confirmed": sum(1 for r in paying if r.get("declines") and r["outcome"] == "confirmed"),
        "declines": int(counters.get("racecap.payments.declined", 0)),
        "three_ds_approved": int(counters.get("racecap.payments.three_ds", 0)),
        "provider_429": int(counters.get("racecap.payments.provider_429", 0)),
        "api_429_retry_after": int(counters.get("racecap.payments.busy_429", 0)),
    }


def _percentiles(values_: list[float]) -> dict[str, float] | None:
    if not values_:
        return None

    def pct(p: float) -> float:
        return values_[min(len(values_) - 1, int(p * len(values_)))]

    return {"p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "max": values_[-1]}
