"""``SCENARIO=chaos make burst``: the opening burst with faults injected while it runs.

On its own dedicated stack (never a shared one), timed from the first runner:

- DynamoDB throttling (10 % of every call) and ``TransactionConflict`` (10 % of the
  transactions), injected under the unchanged handlers by ``local/faults.py`` and turned
  on for the runners' whole burst;
- redis-server killed (SIGKILL) and started again, empty, two seconds later;
- the registration writer's execution environments killed while a batch is in flight
  (received, not yet deleted), then the email sender's likewise; the pollers' supervisor
  starts new ones and the batch comes back when its visibility timeout ends;
- ElasticMQ killed and started again on its persisted queues and messages.

Each fault must really hit, and the run fails otherwise: a new pid for every killed
process, messages in flight when a poller died, injected throttles and conflicts counted
from the processes' own log. Afterwards, as for every burst: every runner who paid is
confirmed exactly once (the audit: no duplicate, no gap, no missing email, no DLQ), and
runners saw only 2xx, 4xx, or 429/503 with Retry-After. The report's chaos section lists
when each fault hit and the latency runners saw in the seconds after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blueprint
from local import faults
from local.stack import LocalStack
from tools.burst.config import ARTILLERY_DIR, BurstConfig, BurstRun, Scenario

THROTTLE = 0.10  # of every DynamoDB call
CONFLICT = 0.10  # of every TransactWriteItems
REDIS_DOWN_S = 2.0
IN_FLIGHT_WAIT_S = 60.0  # how long to wait for a batch in flight before calling the fault missed
WINDOW_S = 10.0  # the latency "caused" by a fault: requests in the seconds after it hit


def _stack_env(_cfg: BurstConfig) -> dict[str, str]:
    # A fresh switch folder per run; the hook reads it, the fault thread writes it. A message
    # the faults lose (ElasticMQ killed before its store has it) is re-sent by the sweeper's
    # backstop: after 30 s here, not the deployed 5 minutes, so the run sees it within its
    # wait. A burst this small drains in seconds, so 30 s unconfirmed is a loss, not a backlog.
    return {
        faults.ENV_VAR: tempfile.mkdtemp(prefix="racecap-faults-"),
        "REQUEUE_UNCONFIRMED_AFTER_SECONDS": "30",
    }


class Chaos(threading.Thread):
    """The fault schedule, run beside Artillery; ``timeline`` records what hit and when."""

    def __init__(self, run: BurstRun) -> None:
        super().__init__(name="chaos", daemon=True)
        assert run.stack is not None
        assert run.clients is not None
        self.run_ = run
        self.stack: LocalStack = run.stack
        self.sqs = run.clients.sqs
        self.dir = Path(self.stack.extra_env[faults.ENV_VAR])
        self.stopping = threading.Event()
        self.timeline: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.t0 = time.time()
        # The kills spread over the arrival window, so each lands amid the runners.
        a = run.cfg.arrival_s
        self.plan: list[tuple[float, str, Callable[[], dict[str, Any]]]] = [
            (0.15 * a, "redis killed and restarted", self._redis),
            (0.3 * a, "registration writer killed mid-batch", lambda: self._poller("RegistrationWriter")),
            (0.5 * a, "email sender killed mid-batch", lambda: self._poller("EmailSender")),
            (0.7 * a, "ElasticMQ restarted on its persisted store", self._elasticmq),
        ]

    def run(self) -> None:
        # Timed from the first runner's arrival: Artillery (node) takes seconds to start.
        outcomes = self.run_.work / "outcomes.jsonl"
        deadline = time.monotonic() + 120
        while not (outcomes.exists() and outcomes.stat().st_size) and time.monotonic() < deadline:
            if self.stopping.wait(0.1):
                break
        self.t0 = time.time()
        faults.switch_on(self.dir, throttle=THROTTLE, conflict=CONFLICT)
        self._note("DynamoDB faults on", {"throttle": THROTTLE, "conflict": CONFLICT})
        for at, name, act in self.plan:
            if self.stopping.wait(max(0.0, self.t0 + at - time.time())):
                self.problems.append(f"chaos: the burst ended before '{name}'")
                continue
            started = time.time()
            try:
                detail = act()
            except Exception as exc:  # a fault that could not be applied is a failed run
                self.problems.append(f"chaos: {name}: {type(exc).__name__}: {exc}")
                continue
            self._note(name, detail, started)

    def finish(self) -> None:
        """The runners are done: DynamoDB faults off (the drain and the audit run clean)."""
        self.stopping.set()
        faults.switch_off(self.dir)
        self._note("DynamoDB faults off", {})
        self.join(timeout=120)

    # -- the faults ------------------------------------------------------------------------------
    def _redis(self) -> dict[str, Any]:
        old = self.stack.kill("redis")
        time.sleep(REDIS_DOWN_S)
        new = self.stack.restart("redis")
        if new == old:
            self.problems.append(f"chaos: redis kept pid {old}")
        return {"old_pid": old, "new_pid": new, "down_s": REDIS_DOWN_S}

    def _poller(self, function: str) -> dict[str, Any]:
        queue = next(t.queue for t in blueprint.QUEUE_TRIGGERS if t.function == function)
        url = self.stack.queue_urls[queue]
        deadline = time.monotonic() + IN_FLIGHT_WAIT_S
        in_flight = 0
        while time.monotonic() < deadline and not in_flight:
            in_flight = self._count(url, "ApproximateNumberOfMessagesNotVisible")
            if not in_flight:
                time.sleep(0.02)
        old = {k: v for k, v in self.stack.poller_pids().items() if k.startswith(f"{function}-")}
        if not in_flight:
            self.problems.append(f"chaos: {function}: no batch in flight within {IN_FLIGHT_WAIT_S:.0f}s; not killed")
            return {"killed": 0}
        for pid in old.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # Still invisible right after the kill: received by a dead process, never deleted.
        stranded = self._count(url, "ApproximateNumberOfMessagesNotVisible")
        new = self._await_new_pids(function, old)
        if not old or set(new.values()) & set(old.values()) or len(new) != len(old):
            self.problems.append(f"chaos: {function}: processes not replaced (old {old}, new {new})")
        if not stranded:
            self.problems.append(f"chaos: {function}: killed, but no batch was left in flight")
        return {
            "killed": len(old),
            "old_pids": sorted(old.values()),
            "new_pids": sorted(new.values()),
            "in_flight_at_kill": in_flight,
            "stranded_after_kill": stranded,
        }

    def _await_new_pids(self, function: str, old: dict[str, int]) -> dict[str, int]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            now = {k: v for k, v in self.stack.poller_pids().items() if k.startswith(f"{function}-")}
            if len(now) == len(old) and not set(now.values()) & set(old.values()):
                return now
            time.sleep(0.1)
        return {k: v for k, v in self.stack.poller_pids().items() if k.startswith(f"{function}-")}

    def _elasticmq(self) -> dict[str, Any]:
        before = self._messages()
        old = self.stack.kill("elasticmq")
        down = time.time()
        new = self.stack.restart("elasticmq")
        up_s = time.time() - down
        after = self._messages()
        if new == old:
            self.problems.append(f"chaos: ElasticMQ kept pid {old}")
        missing = [q for q in before if q not in after]
        if missing:
            self.problems.append(f"chaos: ElasticMQ came back without the queues {missing}")
        return {"old_pid": old, "new_pid": new, "down_s": round(up_s, 1), "messages_before": before, "after": after}

    # -- helpers ------------------------------------------------------------------------------
    def _count(self, url: str, attribute: str) -> int:
        attrs = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[attribute])["Attributes"]
        return int(attrs[attribute])

    def _messages(self) -> dict[str, int]:
        out = {}
        for q in blueprint.QUEUES:
            url = self.stack.queue_urls[q.id]
            out[q.id] = self._count(url, "ApproximateNumberOfMessages") + self._count(
                url, "ApproximateNumberOfMessagesNotVisible"
            )
        return out

    def _note(self, name: str, detail: dict[str, Any], started: float | None = None) -> None:
        t = started if started is not None else time.time()
        self.timeline.append({"t": t, "fault": name, "detail": detail})
        self.run_.say(f"chaos: {name} {detail}")


_RUNNING: dict[str, Chaos] = {}


def _before(run: BurstRun) -> None:
    if run.stack is None or faults.ENV_VAR not in run.stack.extra_env:
        raise SystemExit("the chaos scenario kills servers: it runs on its own stack only (no TARGET, no shared stack)")
    # Runners wait what a 503 says (Retry-After, unscaled) and keep trying for as long as a
    # restarting ElasticMQ can take on a loaded machine (~15 s), as the site does.
    run.artillery_env.update({"RACECAP_MAX_RETRIES": "30", "RACECAP_RETRY_SCALE": "1"})
    chaos = Chaos(run)
    _RUNNING[run.race_id] = chaos
    chaos.start()


def _during_end(run: BurstRun) -> None:
    _RUNNING[run.race_id].finish()


def _after(run: BurstRun, summary: dict[str, Any]) -> list[str]:
    chaos = _RUNNING.pop(run.race_id)
    problems = list(chaos.problems)
    injected = faults.injected(chaos.dir)
    kinds = Counter(i["kind"] for i in injected)
    ops = Counter(f"{i['kind']}:{i['op']}" for i in injected)
    if kinds["throttle"] == 0:
        problems.append("chaos: no DynamoDB throttle was injected")
    if kinds["conflict"] == 0:
        problems.append("chaos: no TransactionConflict was injected")
    reqs = _requests(run.work / "outcomes.jsonl")
    statuses = Counter(r["status"] for r in reqs)
    bad = [
        r
        for r in reqs
        if (r["status"] >= 500 and not (r["status"] == 503 and r.get("retryAfter") is not None))
        or (r["status"] == 429 and r.get("retryAfter") is None)
    ]
    if bad:
        problems.append(
            f"chaos: runners saw {len(bad)} answers other than 2xx/4xx/429-503 with Retry-After: "
            + ", ".join(f"{k}x{v}" for k, v in Counter(f"{r['name']} {r['status']}" for r in bad).items())
        )
    if run.stack is not None:
        dlq = _dead_letters(run)
        if any(dlq.values()):
            problems.append(f"chaos: messages left in a DLQ: {dlq}")
    baseline = _latency([r for r in reqs if r["t"] / 1000 < chaos.t0 + 0.15 * run.cfg.arrival_s])
    timeline = []
    for row in sorted(chaos.timeline, key=lambda r: r["t"]):
        window = [r for r in reqs if row["t"] <= r["t"] / 1000 < row["t"] + WINDOW_S]
        timeline.append(
            {
                "at_s": round(row["t"] - chaos.t0, 1),
                "fault": row["fault"],
                "detail": row["detail"],
                "next_10s": _latency(window)
                | {"answers": dict(Counter(str(r["status"]) for r in window)), "where": breakdown(window)},
            }
        )
    run.figures.update(
        {
            "injected": dict(kinds),
            "injected_by_operation": dict(ops),
            "injected_over_time_s": _histogram([i["t"] - chaos.t0 for i in injected]),
            "answers": {str(k): v for k, v in sorted(statuses.items())},
            "baseline_latency_ms": baseline,
            "latency_ms": _latency(reqs),
            "where_time_went": breakdown(reqs),
            "p99_per_10s": _periods(reqs, chaos.t0),
            "timeline": timeline,
            "checks": {"faults_hit": not chaos.problems and kinds["throttle"] > 0 and kinds["conflict"] > 0},
            "unexpected_answers": len(bad),
        }
    )
    return problems


def _requests(outcomes: Path) -> list[dict[str, Any]]:
    if not outcomes.exists():
        return []
    rows = []
    for line in outcomes.read_text().splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if row.get("e") == "req":
                rows.append(row)
    return rows


def _latency(reqs: list[dict[str, Any]]) -> dict[str, Any]:
    ms = sorted(r["ms"] for r in reqs if r.get("ms") is not None)
    if not ms:
        return {"requests": 0}
    return {"requests": len(ms), "p50_ms": _pct(ms, 0.5), "p99_ms": _pct(ms, 0.99), "max_ms": round(ms[-1], 1)}


def _pct(values: list[float], p: float) -> float:
    return round(values[min(len(values) - 1, int(p * len(values)))], 1)


# Where a request's time went (the gateway's Server-Timing, local/runtime.py Timing):
# queued before the gateway took it (the runner's latency less the gateway's time), waiting
# for an execution environment, in the handler, and of that asleep in retries.
PARTS = ("queued", "env-wait", "handler", "asleep")


def _parts(r: dict[str, Any]) -> dict[str, float] | None:
    t = r.get("timing")
    if not t or r.get("ms") is None or "gateway" not in t:
        return None
    return {
        "queued": max(0.0, r["ms"] - t["gateway"]),
        "env-wait": t.get("env-wait", 0.0),
        "handler": t.get("handler", 0.0),
        "asleep": t.get("sdk-sleep", 0.0) + t.get("limiter", 0.0) + t.get("own-sleep", 0.0),
        "sdk-sleep": t.get("sdk-sleep", 0.0),
        "limiter": t.get("limiter", 0.0),
        "own-sleep": t.get("own-sleep", 0.0),
    }


def breakdown(reqs: list[dict[str, Any]], slow_ms: float = 1000.0) -> dict[str, Any]:
    """p50/p99 of each part, and for the slow requests (over ``slow_ms``) each part's share
    of their total time: the figure that says which part made them slow."""
    rows = [(r, p) for r in reqs if (p := _parts(r)) is not None]
    if not rows:
        return {"requests": 0}
    out: dict[str, Any] = {"requests": len(rows)}
    for part in (*PARTS, "sdk-sleep", "limiter", "own-sleep"):
        values = sorted(p[part] for _, p in rows)
        out[part] = {"p50_ms": _pct(values, 0.5), "p99_ms": _pct(values, 0.99), "max_ms": round(values[-1], 1)}
    slow = [(r, p) for r, p in rows if r["ms"] >= slow_ms]
    total = sum(r["ms"] for r, _ in slow)
    out["slow"] = {"over_ms": slow_ms, "requests": len(slow), "total_s": round(total / 1000, 1)}
    if total:
        for part in (*PARTS, "sdk-sleep", "limiter", "own-sleep"):
            out["slow"][f"{part}_share"] = round(sum(p[part] for _, p in slow) / total, 3)
    return out


def _periods(reqs: list[dict[str, Any]], t0: float, period_s: float = WINDOW_S) -> list[dict[str, Any]]:
    """Latency per 10-s period from the first runner, answers by the time they arrived."""
    by: dict[int, list[dict[str, Any]]] = {}
    for r in reqs:
        by.setdefault(int(max(0.0, r["t"] / 1000 - t0) // period_s), []).append(r)
    return [
        {"from_s": int(k * period_s)} | _latency(rows) | {"where": breakdown(rows)} for k, rows in sorted(by.items())
    ]


def _histogram(offsets: list[float]) -> dict[str, int]:
    out: Counter[str] = Counter(str(int(max(0.0, o))) for o in offsets)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def _dead_letters(run: BurstRun) -> dict[str, int]:
    assert run.stack is not None
    assert run.clients is not None
    out = {}
    for q in blueprint.QUEUES:
        dlq = q.dlq_id
        url = run.stack.queue_urls.get(dlq)
        if url is None:
            continue
        attrs = run.clients.sqs.get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        out[dlq] = int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])
    return out


_TWICE = re.compile(r"^(\d+) registrations got more than one confirmation email$")


def _audit_excuses(run: BurstRun, violations: list[str]) -> dict[str, str]:
    """The one violation a kill can cause by design: an email sender SIGKILLed after SES
    accepted an email and before it recorded the send (one SES call and one write apart)
    leaves the key unrecorded, and the redelivery sends it again. Email is at least once
    across a crash (recording first would lose emails instead). Accounted for only up to
    the emails that kill left in flight; any more, or any other violation, fails the run."""
    chaos = _RUNNING.get(run.race_id)
    if chaos is None:
        return {}
    kill = next((r["detail"] for r in chaos.timeline if r["fault"] == "email sender killed mid-batch"), None)
    stranded = int(kill.get("stranded_after_kill", 0)) if kill else 0
    out: dict[str, str] = {}
    for v in violations:
        m = _TWICE.match(v)
        if m and 0 < int(m.group(1)) <= stranded:
            out[v] = (
                f"the email sender was SIGKILLed with {stranded} emails in flight; a send SES had "
                "accepted but the dead process had not recorded is sent again on redelivery"
            )
    return out


CHAOS = Scenario(
    name="chaos",
    artillery=ARTILLERY_DIR / "opening-burst.yml",
    # No p99 thresholds: the faults are meant to cost latency, which the report shows per
    # fault. Every other `ensure` condition of the opening burst holds (all confirmed, no
    # server error, no failed runner).
    threshold_endpoints=(),
    stack_env=_stack_env,
    persist_queues=True,  # ElasticMQ is restarted mid-burst: SQS never loses a message
    pulse_exact=False,  # Redis is killed mid-burst: the counts it held are gone (gaps, by design)
    before=_before,
    during_end=_during_end,
    after=_after,
    audit_excuses=_audit_excuses,
)
