"""``python -m tools.bench``: the command line (sections add their own options) and the
figures printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os

from tools.bench import __doc__ as USAGE
from tools.bench.run import ROOT, run
from tools.bench.sections import sections
from tools.burst.config import BurstConfig

# The burst knobs the bench's bursts take from its command line (tools/burst/config.py FLAGS).
BENCH_FLAGS = (
    "runners",
    "arrival",
    "think-min",
    "think-max",
    "backoff-scale",
    "gateway-environments",
    "gateway-workers",
    "gateway-threads",
    "email-rate",
    "provider-rate",
    "endpoint-rate",
    "live-views",
)


def _env_float(name: str, default: float) -> float:
    return float(os.environ[name]) if os.environ.get(name) else default


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The burst's knobs (tools/burst/config.py), with the bench's own defaults and help.
    BurstConfig.add_arguments(
        p,
        flags=BENCH_FLAGS,
        defaults={
            "runners": 900,
            "arrival": 30,
            "think-min": 1,
            "think-max": 3,
            "backoff-scale": 0.05,
            "email-rate": 50,
            "provider-rate": 100,
            "endpoint-rate": 100,
        },
        helps={
            "arrival": None,
            "backoff-scale": None,
            "email-rate": "SES sends/s (a production account's rate; confirmation emails drain behind the burst)",
            "provider-rate": "the payment provider's request limit (/s) during the bursts: a live Stripe account's "
            "100 by default, like --email-rate's production SES rate (test mode's 25/s bounds the flow at ~4 "
            "registrations/s: 6 provider calls each); the API's budget is 96%% of it",
            "endpoint-rate": "the provider's limit on any one endpoint (/s) during the bursts: creating "
            "intents, one per registration, meets it first. Stripe's default is 25/s; the bench models an "
            "account Stripe raised to the account's 100 for an opening (docs/payments.md, Stripe's own "
            "limits); --endpoint-rate 25 measures the flow at the default. The API's budget is 96%% of it",
        },
    )
    p.add_argument(
        "--steady-runners",
        type=int,
        default=int(_env_float("STEADY_RUNNERS", 300)),
        help="a second, lighter burst in the same run, for latency below saturation (0: skip)",
    )
    p.add_argument(
        "--answers",
        type=int,
        default=int(_env_float("ANSWERS", 0)),
        help="registration questions each runner answers (0-5; ANSWERS=5 make bench: a registration with five)",
    )
    BurstConfig.add_arguments(p, flags=("out",), defaults={"out": ROOT / "reports"})
    p.add_argument(
        "--only-flow",
        action="store_true",
        help="only the full-flow burst's figures: (b), (c), (d), CPU by process and its floors",
    )
    for section in sections():
        if section.options:
            section.options(p)
    args = p.parse_args(argv)
    bench = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench.json"
    path.write_text(json.dumps(bench, indent=2, default=str))
    b, c, t = bench["b_full_flow"], bench["c_fraction_of_raw_limit"], bench["target"]
    raw_rate = bench.get("a_raw_dynamodb_local_writes", {}).get("conditional_writes_per_s")
    writes = c["dynamodb_write_requests_per_registration"]
    print(
        f"\n[bench] wrote {path}\n"
        f"  (a) DynamoDB Local conditional writes/s {raw_rate}\n"
        f"  (b) registrations/s {b['registrations_per_s']}, estimated hourly {b['estimated_hourly_registrations']:,}"
        f"  (RunSignUp 440,510)\n"
        f"  (c) {c['fraction']} of what (a) allows at {writes} writes/registration\n"
        f"  (d) ${bench['d_aws_calls_and_cost']['cost_per_1000_registrations_usd']['total']} per 1,000 registrations\n"
        f"  (e) cold starts: "
        + ", ".join(f"{k} {v.get('median_ms')} ms" for k, v in bench.get("e_cold_start_import_ms", {}).items())
        + f"\n  (f) idle cost of a stage ${bench.get('f_idle_monthly_cost', {}).get('idle_monthly_usd')}/month"
        + f"\n  target met: {t['met']}  {json.dumps({k: v for k, v in t.items() if k != 'met'})}",
        flush=True,
    )
