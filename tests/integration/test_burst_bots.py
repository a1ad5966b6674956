"""The bots scenario (``SCENARIO=bots make burst``), small, through real Artillery.

A token bot hammers holds with one device token, an address bot cycles fresh device
tokens from one address, honest runners hold from addresses of their own, against the
session's local stack. The limits are checked where they are kept (the hold transaction's
counters in DynamoDB) as well as from what the clients saw; latency is not judged here (a
loaded two-core machine is not a benchmark; ``make burst`` judges it): only a request that
hung fails it (tests/integration/latency.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from local.stack import LocalStack
from tests.integration.latency import assert_p99_within, machine
from tools.burst.bots import HOLD_LIMIT
from tools.burst.config import BurstConfig
from tools.burst.run import run_burst

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RUNNERS = 24
CEILING = 8
TOKENS = 24  # three times the ceiling: the address bot must run into it


def test_given_two_bots_and_honest_runners_then_the_bots_stop_at_their_limits_and_every_runner_is_answered(
    stack: LocalStack, tmp_path: Path
) -> None:
    cfg = BurstConfig(
        scenario="bots",
        runners=RUNNERS,
        arrival_s=4,
        warm_concurrency=4,
        warm_registrations=0,
        p99_limit_ms=None,  # behaviour here; latency bounded generously below, judged by `make burst`
        artillery_timeout_s=180,
        out_dir=tmp_path / "reports",
        quiet=True,
        options={"bot_tokens": TOKENS, "address_ceiling": CEILING, "bot_tries": 30},
    )

    result = run_burst(cfg, stack=stack, work=tmp_path / "work")

    assert result.problems == [], (result.problems, result.summary.get("bots"), machine())
    assert_p99_within(result.summary)
    f = result.summary["bots"]
    assert f["token_bot"]["held_in_db"] == f["token_bot"]["held"] == HOLD_LIMIT, f  # exactly N, then refused
    assert f["token_bot"]["too_many_holds"] > 0, f
    assert f["address_bot"]["held_in_db"] == f["address_bot"]["held"] == CEILING, f  # up to the ceiling, no more
    assert f["address_bot"]["too_many_holds"] > 0, f
    runners = f["runners"]
    assert runners["arrived"] == RUNNERS - 2 and runners["refused"] == 0, runners  # two clients were the bots
    assert runners["held"] == runners["arrived"], runners  # room for all: none shut out by the bots
