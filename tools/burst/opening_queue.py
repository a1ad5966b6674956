"""``make burst SCENARIO=opening-queue``: a sell-out opening behind the opening queue
(issue 11), ``artillery/opening-queue.yml`` with its runners in ``artillery/queue.js``.

Runners arrive over the minutes before the opening (``RUNNERS`` over ``ARRIVAL_S``: 2,000
over 5 minutes by default), then more after it (``LATER_RUNNERS`` over ``LATER_S``, after a
pause of ``GAP_S`` in the middle of which registration opens). Each gets a device token,
solves the proof-of-work on the challenge the server issued (node's crypto), joins the queue,
polls it — waiting whatever each answer's ``Retry-After`` says — until admitted, then holds a
place with its admission token; ``REGISTER_PERCENT`` of those holding register and pay as in
the opening burst, and ``SECOND_TAB_PERCENT`` of the runners open a second tab (join again
from the same device), which must get the same place.

Before the runners arrive, the race's director (through the admin API, with a token from the
stack's local issuer) switches the queue on at ``ADMISSION_RATE`` runners a minute with a
proof-of-work of ``POW_DIFFICULTY`` bits, announces the opening and schedules the registration
window (whose pre-warm raises the registration API's provisioned environments, which the local
gateway keeps initialised as Lambda would). The proof-of-work is set
low for the burst: docs/operations.md's load-generator bypass is the WAF's only, the queue asks
every client for its proof, and 2,000 runners' worth of SHA-256 at the site's 18 bits would
measure Artillery's one CPU, not Racecap. The director opens registration ("open now") half
way through the pause, timed from Artillery's first arrival, so a slow start cannot push
pre-opening arrivals past the opening.

Afterwards, from what each runner saw and what the queue's own state says:

* queue wait: from sending the join to seeing ``ADMITTED``, p50/p99 (all, pool, later);
* Spearman's rho between arrival order (when each runner sent its join) and admission order
  (its admission number: number k is admitted exactly when "now serving" passes k, so the
  numbers' order is the order of admission, whatever a runner's polling adds), for the
  lottery's pool (arrival numbers up to the draw's size) and for the later arrivals.
  Under a fair lottery rho over n runners is about normal with mean 0 and standard deviation
  1/sqrt(n-1); the pool's bound is ``max(0.1, 4.4/sqrt(n-1))`` — the issue's 0.1 from
  n = 1,937 on, so for the full run's 2,000 — and a fair draw exceeds it with probability
  2·Φ(-4.4) ≈ 1e-5 (for n = 160: |rho| < 0.35). Later arrivals, first in first out: no join
  answered before another was sent may come after it in admission order (joins in flight at the
  same time may swap; on a loaded machine a join is in flight for seconds, so the later arrivals'
  rho, reported, fell to 0.81 with a correct queue);
* one number per device: the queue issued exactly one arrival number per runner (its
  ``seq``), every second tab got its first tab's number back, no admission number twice;
* every admitted runner holds a place or was told clearly that it is sold out (``ensure``).

The run fails on any of these, on a failed ``ensure`` threshold, or on the audit.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import blueprint
from local.runtime import install_layer_path
from tools.burst.config import ARTILLERY_DIR, DIRECTOR, BurstConfig, BurstRun, Scenario

install_layer_path()  # the scenario registry imports this module first: racecap is not on the path yet

from racecap.fairness.store import DynamoQueueStore  # noqa: E402

NAME = "opening-queue"
DEFAULTS = {
    "later_runners": 300,
    "later_s": 60,
    "gap_s": 10,
    "admission_rate": 1200,  # per minute: the pool of 2,000 is admitted in 100 s
    "pow_difficulty": 8,
    "register_percent": 20,
    "second_tab_percent": 10,
    "places_percent": 90,  # places for 90 % of the runners: the last admitted meet "sold out"
}
PRE_RHO_MAX = 0.1  # the bound for the full run's 2,000
PRE_RHO_Z = 4.4  # standard deviations of a fair draw's rho the bound allows at smaller n
MIN_SHARE = 0.95  # of the planned arrivals that must be in their group, or the figure means little
OPEN_LEAD_S = 5.0  # Artillery's start-up, for the opening time announced before it starts


def option(cfg: BurstConfig, name: str) -> int:
    return int(cfg.options.get(name, DEFAULTS[name]))


def pre_bound(n: int) -> float:
    return max(PRE_RHO_MAX, PRE_RHO_Z / math.sqrt(max(1, n - 1)))


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties)."""
    n = len(xs)
    if n < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx and vy else None


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def places(cfg: BurstConfig) -> int:
    return max(3, (cfg.runners + option(cfg, "later_runners")) * option(cfg, "places_percent") // 100)


def phases(cfg: BurstConfig) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "before the opening", "duration": cfg.arrival_s, "arrivalCount": cfg.runners},
        {"pause": option(cfg, "gap_s")},
    ]
    if option(cfg, "later_runners") > 0:
        out.append(
            {
                "name": "after the opening",
                "duration": option(cfg, "later_s"),
                "arrivalCount": option(cfg, "later_runners"),
            }
        )
    return out


def conditions(cfg: BurstConfig) -> list[str]:
    out = [
        "racecap.queue.joined == racecap.runners.arrived",
        "racecap.queue.admitted == racecap.queue.joined",
        "racecap.runners.held + racecap.queue.sold_out == racecap.queue.admitted",
        "racecap.queue.refused == 0",
        "racecap.queue.expired == 0",
        "racecap.queue.second_tab_new == 0",
        "racecap.runners.confirmed == racecap.queue.registering",
        "racecap.runners.not_confirmed == 0",
        "racecap.server_errors == 0",
        "vusers.failed == 0",
    ]
    if option(cfg, "second_tab_percent") > 0:
        out.append("racecap.queue.second_tab_same > 0")
    return out


# -- the director ---------------------------------------------------------------------------------
def _admin(run: BurstRun, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    assert run.stack is not None
    req = urllib.request.Request(  # noqa: S310 - the local stack's own URL
        f"{run.base}{path}", data=json.dumps(body).encode() if body is not None else None, method=method
    )
    req.add_header("Authorization", f"Bearer {run.stack.issuer.mint(DIRECTOR)}")
    req.add_header("Accept", "application/json")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {"raw": exc.read()[:300].decode(errors="replace")}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def before(run: BurstRun) -> None:
    if run.stack is None or run.clients is None:
        raise RuntimeError("the opening-queue scenario runs against the local stack only")
    cfg = run.cfg
    open_after = cfg.arrival_s + option(cfg, "gap_s") / 2
    settings = {
        "queueEnabled": True,
        "admissionRatePerMinute": option(cfg, "admission_rate"),
        "powDifficulty": option(cfg, "pow_difficulty"),
    }
    status, body = _admin(run, "PATCH", f"/api/admin/races/{run.race_id}/fairness", settings)
    if status != 200:
        raise RuntimeError(f"the director could not switch the queue on: {status} {body}")
    announced = time.time() + OPEN_LEAD_S + open_after
    status, body = _admin(run, "PATCH", f"/api/admin/races/{run.race_id}", {"registrationOpensAt": _iso(announced)})
    if status != 200:
        raise RuntimeError(f"the director could not announce the opening: {status} {body}")
    # And follow it with the registration window, as a director of a queued opening does: its
    # workflow pre-warms the registration API ten minutes ahead (here at once: the opening is a
    # few minutes off), so the holds after the opening find provisioned environments, locally as
    # on AWS. The director still opens by hand (the Opener), once every early runner is in line.
    status, body = _admin(run, "POST", f"/api/admin/races/{run.race_id}/window/schedule")
    if status != 200:
        raise RuntimeError(f"the director could not schedule the registration window: {status} {body}")
    run.figures.update({"settings": settings, "announced_opening": _iso(announced)})
    run.artillery_env.update(
        {
            "RACECAP_REGISTER_PERCENT": str(option(cfg, "register_percent")),
            "RACECAP_SECOND_TAB_PERCENT": str(option(cfg, "second_tab_percent")),
            # now-serving through the local CloudFront (nginx), as the site reads it
            "RACECAP_EDGE_URL": run.stack.edge_url,
        }
    )
    opener = Opener(run, cfg.arrival_s, option(cfg, "gap_s"), cfg.runners)
    run.figures["_opener"] = opener
    opener.start()
    run.say(
        f"opening queue: {cfg.runners} runners over {cfg.arrival_s:g}s before the opening, "
        f"{option(cfg, 'later_runners')} over {option(cfg, 'later_s')}s after; admission "
        f"{settings['admissionRatePerMinute']}/min, proof-of-work {settings['powDifficulty']} bits"
    )
    time.sleep(1.5)  # past the queue state's ~1 s cache, so the first challenge sees these settings


class Opener(threading.Thread):
    """The director's "open now", timed from Artillery's first arrival.

    Due half way through the pause between the phases; if by then not every pre-opening
    runner has joined (device, challenge and join take a few round trips, longer on a loaded
    machine), it waits for them, but no later than just before the later arrivals start.
    """

    def __init__(self, run: BurstRun, pre_s: float, gap_s: float, runners: int) -> None:
        super().__init__(name="opener", daemon=True)
        self.run_ = run
        self.pre_s, self.gap_s, self.runners = pre_s, gap_s, runners
        self.stopped = threading.Event()
        self.opened_at: float | None = None
        self.first_arrival: float | None = None
        self.joined_before: int = 0
        self.error: str | None = None
        self._tail = _Tail(run.work / "outcomes.jsonl")

    def run(self) -> None:
        started = time.time()
        while not self.stopped.wait(0.2):
            for row in self._tail.read():
                if row["e"] == "arrive" and self.first_arrival is None and row["t"] / 1000 >= started:
                    self.first_arrival = row["t"] / 1000
                elif row["e"] == "joined":
                    self.joined_before += 1
            if self.first_arrival is None:
                continue
            due = self.first_arrival + self.pre_s + self.gap_s / 2
            latest = self.first_arrival + self.pre_s + self.gap_s * 0.9
            now = time.time()
            if now >= latest or (now >= due and self.joined_before >= self.runners):
                break
        if self.stopped.is_set() or self.first_arrival is None:
            self.error = "Artillery ended before the opening"
            return
        status, body = _admin(self.run_, "POST", f"/api/admin/races/{self.run_.race_id}/window/open")
        if status != 200:
            self.error = f"open now answered {status} {body}"
            return
        self.opened_at = time.time()
        self.run_.say(
            f"the director opened registration {self.opened_at - self.first_arrival:.1f}s after the first "
            f"arrival; {self.joined_before} runners had joined"
        )


class _Tail:
    """New complete lines of the outcomes file since the last read (it grows while we read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.partial = ""

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open() as fh:
            fh.seek(self.pos)
            chunk = fh.read()
            self.pos = fh.tell()
        lines = (self.partial + chunk).split("\n")
        self.partial = lines.pop()
        rows = []
        for line in lines:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if row.get("e") in ("arrive", "joined"):
                rows.append(row)
        return rows


def during_end(run: BurstRun) -> None:
    opener = run.figures.get("_opener")
    if isinstance(opener, Opener):
        opener.stopped.set()
        opener.join(timeout=70)


# -- the figures ------------------------------------------------------------------------------------
def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)


def _waits(rows: list[dict[str, Any]]) -> dict[str, Any]:
    waits = [(r["admitted"] - r["joined"]) / 1000 for r in rows if r.get("admitted") and r.get("joined")]
    return {"n": len(waits), "p50_s": _pct(waits, 0.5), "p99_s": _pct(waits, 0.99), "max_s": _pct(waits, 1.0)}


def _rho(rows: list[dict[str, Any]], by: str) -> float | None:
    got = [r for r in rows if r.get("joined") and r.get(by) is not None]
    value = spearman([r["joined"] + r["arrival"] / 1e6 for r in got], [float(r[by]) for r in got])
    return None if value is None else round(value, 4)


def fifo_violations(rows: list[dict[str, Any]]) -> int:
    """Pairs where a join answered before another was even sent got the later admission number."""
    got = [r for r in rows if r.get("joined") and r.get("answered") and r.get("number") is not None]
    return sum(1 for a in got for b in got if a["answered"] < b["joined"] and a["number"] > b["number"])


def after(run: BurstRun, summary: dict[str, Any]) -> list[str]:
    assert run.clients is not None
    cfg = run.cfg
    opener = run.figures.pop("_opener", None)
    problems: list[str] = []
    if isinstance(opener, Opener):
        if opener.error:
            problems.append(f"opening-queue: {opener.error}")
        if opener.opened_at and opener.first_arrival:
            run.figures["opened_s_after_first_arrival"] = round(opener.opened_at - opener.first_arrival, 1)
            run.figures["joined_at_the_opening"] = opener.joined_before
    path = run.work / "outcomes.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    rows = [r for r in lines if r.get("e") == "queue"]
    state = DynamoQueueStore(run.clients.dynamodb, blueprint.table("Inventory").local_name).state(run.race_id) or {}
    pool = int(state["drawSize"]) if state.get("drawSize") is not None else None
    joined = [r for r in rows if r.get("arrival") is not None]
    pre = [r for r in joined if pool is not None and r["arrival"] <= pool]
    post = [r for r in joined if pool is not None and r["arrival"] > pool]
    admitted = [r for r in joined if r.get("number") is not None]
    rho_pre, rho_post = _rho(pre, "number"), _rho(post, "number")
    swapped = fifo_violations(post)
    bound = pre_bound(len(pre))
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r.get("outcome") or "none"] = outcomes.get(r.get("outcome") or "none", 0) + 1
    tabs = [r for r in rows if r.get("tab2") is not None]
    run.figures.update(
        {
            "arrivals": {"before_opening": cfg.runners, "after_opening": option(cfg, "later_runners")},
            "joined": len(joined),
            "pool": pool,
            "numbers_issued": int(state.get("seq", 0)),
            "admitted": len(admitted),
            "queue_wait_s": _waits(admitted),
            "queue_wait_pool_s": _waits([r for r in pre if r.get("number") is not None]),
            "queue_wait_later_s": _waits([r for r in post if r.get("number") is not None]),
            "rho_pool": {"rho": rho_pre, "n": len(pre), "bound_abs": round(bound, 3)},
            "rho_later": {"rho": rho_post, "n": len(post), "fifo_violations": swapped},
            # What the runners saw: the same orders by when each noticed its admission
            # (their polling back-off adds up to a few seconds): for information, not judged.
            "rho_seen_pool": _rho(pre, "admitted"),
            "rho_seen_later": _rho(post, "admitted"),
            "second_tabs": {"opened": len(tabs), "same_place": sum(1 for r in tabs if r["tab2"] == r["arrival"])},
            "outcomes": outcomes,
            "places": sum(e["cap"] for e in summary.get("event_caps", [])),
            "load_avg_1m": round(os.getloadavg()[0], 1),
        }
    )
    expected = cfg.runners + option(cfg, "later_runners")
    if len(joined) != expected:
        problems.append(f"opening-queue: {len(joined)} of {expected} runners joined the queue")
    if int(state.get("seq", 0)) != len(joined):
        problems.append(f"opening-queue: the queue issued {state.get('seq')} numbers for {len(joined)} runners")
    if len({r["arrival"] for r in joined}) != len(joined):
        problems.append("opening-queue: two runners hold the same arrival number")
    numbers = [r["number"] for r in admitted]
    if len(set(numbers)) != len(numbers):
        problems.append("opening-queue: an admission number was given to two runners")
    if any(r["tab2"] != r["arrival"] for r in tabs):
        problems.append("opening-queue: a second tab got a second place")
    if pool is None:
        problems.append("opening-queue: the lottery was never drawn")
    if len(pre) < MIN_SHARE * cfg.runners:
        problems.append(f"opening-queue: only {len(pre)} of {cfg.runners} pre-opening runners were in the lottery")
    if len(post) < MIN_SHARE * option(cfg, "later_runners"):
        problems.append(f"opening-queue: only {len(post)} of {option(cfg, 'later_runners')} later runners queued")
    if rho_pre is None or abs(rho_pre) >= bound:
        problems.append(f"opening-queue: pool rho = {rho_pre} over {len(pre)} (|rho| must be < {bound:.3f})")
    if option(cfg, "later_runners") >= 3 and (rho_post is None or swapped):
        problems.append(
            f"opening-queue: {swapped} later arrivals admitted before one that joined earlier "
            f"(rho {rho_post} over {len(post)})"
        )
    return problems


OPENING_QUEUE = Scenario(
    name=NAME,
    artillery=ARTILLERY_DIR / "opening-queue.yml",
    threshold_endpoints=("join", "poll", "hold", "register", "confirm"),
    places=places,
    before=before,
    during_end=during_end,
    after=after,
    ensure_conditions=conditions,
    phases=phases,
    seeded_open=False,
    default_runners=2000,
    default_arrival_s=300.0,
)
