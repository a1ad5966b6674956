"""The short chaos burst (``SCENARIO=chaos make burst`` is the long one): a small opening
burst through real Artillery on a dedicated stack while redis-server is killed and
restarted, the writer's and the email sender's processes are killed mid-batch, ElasticMQ
is restarted on its persisted store, and DynamoDB throttling and TransactionConflict are
injected under the handlers. Each fault must really hit, every runner with a place is
confirmed exactly once, the audit is clean and runners saw no 5xx but 503 + Retry-After.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from local.gateway import FUNCTION_TIMEOUT
from tests.integration.latency import ANSWER_WITHIN_MS, machine
from tools.burst.config import BurstConfig
from tools.burst.run import run_burst

pytestmark = [pytest.mark.integration, pytest.mark.timeout(840)]

RUNNERS = 40


def _api_errors(logs: Path, most: int = 6) -> list[str]:
    """What the API logged for its 5xx answers (the handlers' "unhandled error" with its
    exception, the gateway's tracebacks), so a failure on a loaded CI machine says why."""
    found: list[str] = []
    gateway = logs / "gateway.log"
    if gateway.exists():
        lines = gateway.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if "unhandled error" in line or line.startswith("Traceback"):
                found.append(" | ".join(lines[i : i + 30])[-3000:])
    return found[:most]


def _function_timeouts(logs: Path) -> int:
    """Invocations Lambda ended at the function's timeout (the gateway's one line each)."""
    gateway = logs / "gateway.log"
    text = gateway.read_text(errors="replace") if gateway.exists() else ""
    return sum(line.startswith(FUNCTION_TIMEOUT) for line in text.splitlines())


# What a burst reports when runners saw a bare 5xx (Artillery's ensure, and the chaos check).
SERVER_ERRORS = ("artillery exited 1; failed checks: ['racecap.server_errors == 0']", "chaos: runners saw ")


def test_given_faults_during_an_opening_burst_then_every_runner_with_a_place_is_confirmed_once_and_each_fault_hit(
    tmp_path: Path,
) -> None:
    cfg = BurstConfig(
        scenario="chaos",
        runners=RUNNERS,
        arrival_s=10,
        think_min_s=0.5,
        think_max_s=2,
        backoff_scale=0.05,
        confirm_timeout_s=180,
        cap=RUNNERS * 2,
        warm_concurrency=4,
        warm_registrations=0,
        drain_timeout_s=180,
        artillery_timeout_s=300,
        out_dir=tmp_path / "reports",
        quiet=True,
    )

    # Two attempts at most, each on a stack of its own and judged whole: on two shared cores a
    # starved handler can run past its timeout and a runner's flow out of retries (seen on
    # 2026-11-28 beside another job). A failed first attempt is printed with the load and why;
    # a second failure fails the test. `SCENARIO=chaos make burst` has no second try.
    for attempt in (1, 2):
        work = tmp_path / f"work{attempt}"
        result = run_burst(replace(cfg, out_dir=tmp_path / f"reports{attempt}"), work=work)
        s = result.summary
        logs = work / "stack" / "logs"
        # A handler that ran past its Lambda timeout is answered 500, as API Gateway does: on two
        # shared cores under load a starved handler can (seen at load ~3: 6 of ~600 answers), which
        # is speed, judged by `SCENARIO=chaos make burst` (there a 500 of any kind fails). Here the
        # 5xx must all be such timeouts, each runner still confirmed once; any other 5xx fails.
        timeouts = _function_timeouts(logs)
        bare_500s = s["chaos"]["answers"].get("500", 0)
        only_500s = s["chaos"]["unexpected_answers"] == bare_500s  # no other 5xx, no 429 without Retry-After
        problems = result.problems
        if only_500s and 0 < bare_500s <= timeouts:
            problems = [p for p in problems if not p.startswith(SERVER_ERRORS)]
            print(f"{bare_500s} answers were function timeouts ({timeouts} in the gateway's log); {machine()}")
        if not problems:
            break
        print(f"\n[chaos] attempt {attempt} failed: {problems}, {timeouts} function timeouts ({machine()})")
    assert problems == [], [*problems, f"{timeouts} function timeouts", machine(), *_api_errors(logs)]
    assert s["outcomes"] == {"confirmed": RUNNERS}, s["outcomes"]
    assert result.audit is not None, result.audit
    # Clean, or its only finding a duplicate email the email sender's kill accounts for
    # (tools/burst/chaos.py _audit_excuses: bounded by the emails that kill left in flight).
    assert set(result.audit["violations"]) <= set(s["audit_excused"]), (result.audit, s["audit_excused"])
    assert result.audit["confirmed"] == RUNNERS + 1, result.audit  # + the warm-up's runner
    chaos = s["chaos"]
    assert chaos["injected"]["throttle"] > 0 and chaos["injected"]["conflict"] > 0, chaos["injected"]
    faults = {row["fault"]: row["detail"] for row in chaos["timeline"]}
    redis = faults["redis killed and restarted"]
    assert redis["new_pid"] != redis["old_pid"]
    for name in ("registration writer killed mid-batch", "email sender killed mid-batch"):
        assert faults[name]["killed"] > 0 and faults[name]["stranded_after_kill"] > 0, faults[name]
        assert not set(faults[name]["new_pids"]) & set(faults[name]["old_pids"]), faults[name]
    mq = faults["ElasticMQ restarted on its persisted store"]
    assert mq["new_pid"] != mq["old_pid"] and set(mq["after"]) == set(mq["messages_before"]), mq
    not_timeouts = {code: n for code, n in chaos["answers"].items() if int(code) >= 500 and code not in ("503", "500")}
    assert not not_timeouts and chaos["answers"].get("500", 0) <= timeouts, (chaos["answers"], timeouts, machine())
    assert chaos["unexpected_answers"] == chaos["answers"].get("500", 0) <= timeouts, (chaos["answers"], timeouts)
    assert chaos["checks"]["faults_hit"]
    # No request hung in retries: every answer came within the runners' own timeout. Not a
    # speed bound (a quiet machine's slowest is the handler's 6-s budget plus one DynamoDB
    # call, ~10 s; one answer took 14.4 s at load ~2); `SCENARIO=chaos make burst` reports the
    # latency per fault. The gateway's Server-Timing says where the slowest one's time went.
    assert chaos["latency_ms"]["max_ms"] <= ANSWER_WITHIN_MS, (
        chaos["latency_ms"],
        chaos["where_time_went"],
        machine(),
    )
    html = Path(result.report_path or "").read_text()
    assert "chaos" in html
