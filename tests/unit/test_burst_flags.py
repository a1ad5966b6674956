"""The burst's knobs are declared once (tools/burst/config.py FLAGS) and read by both command
lines: ``python -m tools.burst`` and the bench's bursts, each with its own defaults."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from tools.bench import cli as bench_cli
from tools.bench import run as bench_run
from tools.burst import cli as burst_cli
from tools.burst.config import FLAGS, BurstConfig


@pytest.fixture(autouse=True)
def _no_knobs_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for flag in FLAGS.values():
        if flag.env:
            monkeypatch.delenv(flag.env, raising=False)
    monkeypatch.delenv("SCENARIO", raising=False)


def _bench(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> BurstConfig:
    got: dict[str, Any] = {}

    def fake_run(args: argparse.Namespace) -> dict[str, Any]:
        got["cfg"] = bench_run.burst_config(args)
        raise SystemExit(0)

    monkeypatch.setattr(bench_cli, "run", fake_run)
    with pytest.raises(SystemExit):
        bench_cli.main(argv)
    return got["cfg"]


def test_given_no_flags_then_each_command_keeps_its_own_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    burst = burst_cli.parse_args([])
    assert (burst.runners, burst.think_min_s, burst.think_max_s, burst.email_rate) == (450, 2.0, 8.0, 2000.0)
    assert (burst.code_share, burst.team_share, burst.provider_rate_per_second, burst.p99_limit_ms) == (
        0.2,
        0.05,
        None,
        1000,
    )
    bench = _bench([], monkeypatch)
    assert (bench.runners, bench.think_min_s, bench.think_max_s, bench.email_rate) == (900, 1, 3, 50)
    assert (bench.provider_rate_per_second, bench.payments_budget_per_second) == (100, 96)
    assert (bench.code_share, bench.team_share, bench.p99_limit_ms) == (0.0, 0.0, 1000)


def test_given_env_and_flags_then_both_commands_read_them_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNNERS", "77")
    monkeypatch.setenv("GATEWAY_ENVIRONMENTS", "shared")
    for cfg in (burst_cli.parse_args(["--think-min", "9"]), _bench(["--think-min", "9"], monkeypatch)):
        assert cfg.runners == 77 and cfg.gateway_environments == "shared"
        assert cfg.think_min_s == cfg.think_max_s == 9  # the longest think never below the shortest


def test_given_the_opening_queue_then_its_own_runners_and_window_are_the_default() -> None:
    cfg = burst_cli.parse_args(["--scenario", "opening-queue", "--no-warm"])
    assert (cfg.scenario, cfg.runners, cfg.arrival_s, cfg.warm) == ("opening-queue", 2000, 300.0, False)
