"""The opening-queue scenario (``make burst SCENARIO=opening-queue``), short, through real
Artillery against the session's local stack.

160 runners arrive in the 20 s before the opening, 40 after it. Each solves the
proof-of-work in Artillery's processor, joins, polls as told until admitted, holds with its
admission token; one in ten registers and pays; one in ten opens a second tab. The scenario's
own checks (``tools/burst/opening_queue.py``) fail the run when the lottery looks
arrival-ordered, the later arrivals are not first in first out, a second tab got a second
place, an admitted runner got neither a place nor a clear sold out, or the audit fails.

Why these bounds cannot flake: under a fair lottery Spearman's rho over n = 160 is about
normal with standard deviation 1/sqrt(159) = 0.079; the bound, 4.4/sqrt(n-1) = 0.35, is
exceeded by a fair draw with probability 2·Phi(-4.4) = 1.1e-5 (about once in 90,000 runs),
while an arrival-ordered admission gives rho = 1. The later arrivals' order is the queue's
atomic counter: only joins in flight at the same instant can swap, and rho > 0.9 would take
a large share of them reordered. Latency is not judged here (a loaded two-core machine is not
a benchmark; ``make burst`` judges it against 1 s; at load ~2 the polls' p99 passed 10 s): only
a request that hung fails it (tests/integration/latency.py). The opening waits for the early
runners' joins.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from local.stack import LocalStack
from tests.integration.latency import assert_p99_within, machine
from tools.burst.config import BurstConfig
from tools.burst.run import run_burst

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

EARLY = 160
LATER = 40


def test_given_an_opening_behind_the_queue_then_lottery_before_fifo_after_one_place_per_device_and_every_runner_answered(
    stack: LocalStack, tmp_path: Path
) -> None:
    cfg = BurstConfig(
        scenario="opening-queue",
        runners=EARLY,
        arrival_s=20,
        think_min_s=0.5,
        think_max_s=1,
        warm_concurrency=4,
        warm_registrations=0,
        p99_limit_ms=None,  # behaviour here; latency bounded generously below, judged by `make burst`
        artillery_timeout_s=240,
        # A duplicate confirmation-email message sometimes waits out its 60 s visibility
        # timeout (the email sender's idempotency: "already in progress"); the audit counts
        # the emails sent, so it need not wait for the queue to be empty.
        drain_timeout_s=20,
        out_dir=tmp_path / "reports",
        quiet=True,
        options={
            "later_runners": LATER,
            "later_s": 8,
            "gap_s": 8,
            "admission_rate": 900,  # 15 a second: the later arrivals queue behind the pool
            "register_percent": 10,
            "second_tab_percent": 10,
        },
    )

    # Two attempts at most, each judged whole: this burst alone drives two shared cores to load
    # 10-12, where a runner's flow can run out of retries (seen on 2026-11-28 at this commit and
    # at the one before the session's changes). A failed first attempt is printed with the load;
    # a second failure fails the test. `SCENARIO=opening-queue make burst` has no second try.
    for attempt in (1, 2):
        result = run_burst(
            replace(cfg, out_dir=tmp_path / f"reports{attempt}"), stack=stack, work=tmp_path / f"work{attempt}"
        )
        if not result.problems:
            break
        print(f"\n[opening-queue] attempt {attempt} failed: {result.problems} ({machine()})")

    f = result.summary["opening-queue"]
    assert result.problems == [], (result.problems, f, machine())
    assert f["pool"] == EARLY and f["joined"] == f["numbers_issued"] == f["admitted"] == EARLY + LATER, f
    assert f["rho_pool"]["n"] == EARLY and f["rho_later"]["n"] == LATER, f
    assert abs(f["rho_pool"]["rho"]) < 0.35 and f["rho_later"]["fifo_violations"] == 0, f
    assert f["second_tabs"]["opened"] >= (EARLY + LATER) // 20, f  # one in ten per Artillery worker
    assert f["second_tabs"]["same_place"] == f["second_tabs"]["opened"], f
    held = f["outcomes"].get("held", 0) + f["outcomes"].get("confirmed", 0)
    assert held == f["places"] and f["outcomes"].get("unplaced", 0) == EARLY + LATER - held, f  # the rest: sold out
    assert f["outcomes"].get("confirmed", 0) > 0, f  # ensure: every runner who registered is confirmed
    assert_p99_within(result.summary)
