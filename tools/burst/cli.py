"""``python -m tools.burst``: the command line (every knob also an env variable) and the
figures printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from tools.burst import __doc__ as USAGE
from tools.burst.config import BurstConfig
from tools.burst.run import run_burst
from tools.burst.scenarios import SCENARIOS, scenario


def print_figures(summary: dict[str, Any]) -> None:
    def fmt(v: Any, spec: str = ",.0f") -> str:
        return "n/a" if v is None else format(v, spec)

    latency = [
        f"  {name:<9} p50 {s['median']:>6.0f} ms  p95 {s['p95']:>6.0f} ms  p99 {s['p99']:>6.0f} ms"
        f"  ({s['count']:,.0f} requests)"
        for name, s in summary["endpoints"].items()
    ]
    figures = summary.get(summary["scenario"])
    if figures:
        print("\n".join(f"  {k:<16} {json.dumps(v)}" for k, v in figures.items()), flush=True)
    if not scenario(summary["scenario"]).registers:
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
                f"  (runners who got a place: {summary['held']:,}{_stayed(summary)}; success "
                f"{fmt(summary['success_rate'] and summary['success_rate'] * 100, '.1f')}% of those who registered)",
                f"  first request -> last confirmation  {fmt(summary['first_to_last_s'], '.1f')} s",
                f"  estimated hourly registrations      {fmt(summary['estimated_hourly_registrations'])}"
                "   (RunSignUp, 45 web servers: 440,510)",
                f"  peak confirmations per second       {summary['peak_confirmations_per_s']}",
                *_payment_lines(summary.get("payments"), summary.get("provider")),
                *_code_lines(summary.get("codes"), summary.get("audit")),
                *_team_lines(summary.get("teams")),
                *latency,
                "",
            ]
        ),
        flush=True,
    )


def _stayed(summary: dict[str, Any]) -> str:
    n = summary.get("held_without_registering") or 0
    return f", {n:,} of them stayed on the form as the scenario has them" if n else ""


def _payment_lines(p: dict[str, Any] | None, provider: dict[str, Any] | None) -> list[str]:
    if not p:
        return []
    calls = []
    if provider:
        calls = [
            f"  the provider (limit {provider['limit_per_second']:g}/s): {provider['api_calls']} API calls, "
            f"{provider['answered_429']} answered 429"
        ]
    return [
        *calls,
        f"  payments: declined {p['declines']} (then paid with a good card: {p['declined_then_confirmed']}), "
        f"3-D Secure approved {p['three_ds_approved']}",
        f"  429s waited out: provider's own {p['provider_429']}, API's with Retry-After {p['api_429_retry_after']}",
    ]


def _team_lines(teams: dict[str, int] | None) -> list[str]:
    if not teams or not teams.get("captains"):
        return []
    return [
        f"  teams: {teams['captains']} captains, {teams['held']} teams held "
        f"({teams['too_few_places']} times too few places left for a whole team)"
    ]


def _code_lines(codes: dict[str, int] | None, audit: dict[str, Any] | None) -> list[str]:
    if not codes or not codes.get("tried"):
        return []
    uses = ", ".join(
        f"{c} {u['taken']} uses of {u['limit']} on {u['registrations']} registrations"
        for c, u in ((audit or {}).get("code_uses") or {}).items()
    )
    return [
        f"  discount code: tried by {codes['tried']}, applied {codes['applied']}, used up for {codes['used_up']}"
        + (f" (audit: {uses})" if uses else "")
    ]


# A scenario's own knobs, from the environment (each scenario's module says which it reads).
SCENARIO_OPTIONS = (
    "BOT_TOKENS",
    "ADDRESS_CEILING",
    "BOT_TRIES",
    *(
        "LATER_RUNNERS",
        "LATER_S",
        "GAP_S",
        "ADMISSION_RATE",
        "POW_DIFFICULTY",
        "REGISTER_PERCENT",
        "SECOND_TAB_PERCENT",
        "PLACES_PERCENT",
    ),  # opening-queue
)


def parse_args(argv: list[str] | None = None) -> BurstConfig:
    d = BurstConfig()
    # The scenario's own defaults for the runners and their arrival window (e.g. the opening
    # queue's 2,000 runners over 5 minutes), unless RUNNERS / ARRIVAL_S / the flags say otherwise.
    named = os.environ.get("SCENARIO", d.scenario)
    given = sys.argv[1:] if argv is None else argv
    for i, arg in enumerate(given):
        if arg == "--scenario" and i + 1 < len(given):
            named = given[i + 1]
        elif arg.startswith("--scenario="):
            named = arg.split("=", 1)[1]
    sc = SCENARIOS.get(named)
    p = argparse.ArgumentParser(description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default=os.environ.get("SCENARIO", d.scenario))
    BurstConfig.add_arguments(
        p,
        defaults={
            "runners": (sc.default_runners if sc else None) or d.runners,
            "arrival": (sc.default_arrival_s if sc else None) or d.arrival_s,
            "code-share": 0.2,
            "team-share": 0.05,
        },
    )
    a = p.parse_args(argv)
    return BurstConfig.from_args(
        a,
        scenario=a.scenario,
        options={k.lower(): int(os.environ[k]) for k in SCENARIO_OPTIONS if os.environ.get(k)},
    )


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    result = run_burst(cfg)
    print_figures(result.summary)
    if result.problems:
        print("[burst] FAILED:\n  " + "\n  ".join(result.problems), file=sys.stderr, flush=True)
        sys.exit(1)
    print("[burst] passed: every check and the audit", flush=True)
