"""One whole burst: stack, seed, warm-up, the scenario's hooks around Artillery, drain,
audit, summary and report.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from local.stack import LocalStack
from tools.audit import AuditReport
from tools.burst.artillery import ARTILLERY_CPU_S, ensure_checks, run_artillery
from tools.burst.clients import Clients
from tools.burst.config import BurstConfig, BurstResult, BurstRun
from tools.burst.live_views import LiveViews
from tools.burst.provider import ProviderWindow
from tools.burst.pulse_check import compare as compare_pulse
from tools.burst.pulse_check import failed_charges, pulse_sums
from tools.burst.scenarios import event_caps, scenario
from tools.burst.stack import (
    audit_until_clean,
    confirmations,
    drain,
    seed_code,
    seed_questions,
    seed_race,
    start_stack,
)
from tools.burst.summary import summarize
from tools.burst.warm import http, warm_servers, warm_up


def run_burst(
    cfg: BurstConfig,
    stack: LocalStack | None = None,
    work: Path | None = None,
    probe: Callable[[str], None] | None = None,
) -> BurstResult:
    """Run one burst. Locally, ``stack`` may be an already running stack (tests, bench).

    ``probe("start")`` is called after the warm-up, just before Artillery starts, and
    ``probe("end")`` once the queues have drained (before the audit): the bench measures
    what happened in between.
    """

    def say(msg: str) -> None:
        if not cfg.quiet:
            print(f"[burst] {msg}", flush=True)

    sc = scenario(cfg.scenario)
    own_work = work is None
    work = work or Path(tempfile.mkdtemp(prefix="racecap-burst-"))
    work.mkdir(parents=True, exist_ok=True)
    own_stack = cfg.local and stack is None
    problems: list[str] = []
    excused: dict[str, str] = {}
    audit_report: AuditReport | None = None
    clients: Clients | None = None
    caps: list[tuple[str, int, int]] | None = None
    try:
        if cfg.local:
            if stack is None:
                say(f"starting a dedicated local stack in {work} (gateway environments: {cfg.gateway_environments})")
                t0 = time.monotonic()
                extra_env = sc.stack_env(cfg) if sc.stack_env else None
                stack = start_stack(cfg, work / "stack", extra_env=extra_env, persist_queues=sc.persist_queues)
                say(f"stack up in {time.monotonic() - t0:.1f}s at {stack.url}")
            clients = Clients.for_stack(stack)
            caps = event_caps(cfg)
            race_id = seed_race(clients, caps, open_now=sc.seeded_open)
            base = stack.url
            say(f"seeded race {race_id}: " + ", ".join(f"{n} cap {c}" for n, c, _ in caps))
            if cfg.code_share > 0:
                uses = seed_code(clients, race_id, cfg)
                say(f"discount code {cfg.code}: 20 % off, {uses} uses, tried by {cfg.code_share:.0%} of runners")
            if cfg.team_share > 0:
                say(f"teams: {cfg.team_share:.0%} of runners are captains of a team of {cfg.team_size}")
        else:
            if not cfg.race_id:
                raise SystemExit("TARGET needs RACE_ID (a race open for registration on that stage)")
            race_id, base = cfg.race_id, cfg.target.rstrip("/")  # type: ignore[union-attr]
        status, race = http("GET", f"{base}/api/races/{race_id}")
        if status != 200:
            raise RuntimeError(f"race {race_id} answered {status}: {race}")
        event_ids = [e["eventId"] for e in race["events"]]
        if cfg.warm:
            open_events = [e for e in race["events"] if e["spotsLeft"] > 0]
            concurrency = cfg.warm_concurrency or min(64, 2 * cfg.gateway_workers * cfg.gateway_threads)  # 16
            if cfg.local and stack is not None and clients is not None:
                warm_servers(stack, clients, cfg.warm_registrations, concurrency, cfg.drain_timeout_s, say)
            warm_up(base, race_id, open_events[0]["eventId"], concurrency, say, initial_test=sc.seeded_open)
        say(
            f"{cfg.scenario}: {cfg.runners} runners within {cfg.arrival_s:.0f}s, think "
            f"{cfg.think_min_s:g}-{cfg.think_max_s:g}s, waiting-screen back-off x{cfg.backoff_scale:g}"
        )
        ctx = BurstRun(cfg, base, race_id, event_ids, work, say, stack, clients)
        if cfg.answers and clients is not None and stack is not None:
            answers = seed_questions(clients, race_id, cfg.answers, f"redis://127.0.0.1:{stack.ports.redis}/0")
            ctx.artillery_env["RACECAP_ANSWERS"] = json.dumps(answers)
            say(f"each runner answers {len(answers)} registration questions: {', '.join(answers)}")
        hooks = cfg.local
        if probe:
            probe("start")
        pulse_before = pulse_sums(stack, race_id) if cfg.local and stack is not None and sc.registers else None
        if hooks and sc.before:
            sc.before(ctx)
        provider = (
            ProviderWindow.open(stack, cfg.provider_rate_per_second, cfg.provider_endpoint_rate_per_second)
            if cfg.local and stack
            else None
        )
        if provider and cfg.provider_rate_per_second is not None:
            say(f"the payment provider's limit is {cfg.provider_rate_per_second:g} requests/s for this burst")
        if provider and cfg.provider_endpoint_rate_per_second is not None:
            say(f"... and {cfg.provider_endpoint_rate_per_second:g} requests/s to any one endpoint")
        views = LiveViews(stack, base, race_id, cfg.live_views) if cfg.live_views and stack is not None else None
        if views:
            say(f"{cfg.live_views} directors' live views poll the admin API through the burst")
        try:
            with views or contextlib.nullcontext():
                code, outcomes, art_json, log = run_artillery(
                    cfg, base, race_id, work, clients, event_ids, say, ctx.artillery_env
                )
        finally:
            if provider:
                provider.restore()
            if hooks and sc.during_end:
                sc.during_end(ctx)
        checks = ensure_checks(log)
        if code != 0:
            failed = [c["check"] for c in checks if not c["ok"]]
            problems.append(f"artillery exited {code}" + (f"; failed checks: {failed}" if failed else f" (see {log})"))
            if not failed and not cfg.quiet:
                print("\n".join(log.read_text(errors="replace").splitlines()[-30:]), file=sys.stderr)
        rows = None
        drain_s = None
        if probe and not (cfg.local and sc.registers):
            probe("end")
        if cfg.local and stack is not None and clients is not None and sc.registers:
            drain_s = drain(stack, clients, cfg.drain_timeout_s, say)
            if probe:
                probe("end")
        provider_figures = provider.figures(race_id) if provider else None
        if cfg.local and stack is not None and clients is not None and sc.registers:
            audit_report = audit_until_clean(stack, clients, race_id, 60.0)
            say(audit_report.summary())
            excused = sc.audit_excuses(ctx, audit_report.violations) if hooks and sc.audit_excuses else {}
            problems += [f"audit: {v}" for v in audit_report.violations if v not in excused]
            for violation, why in excused.items():
                say(f"audit: {violation} — accounted for: {why}")
            rows = confirmations(clients, race_id, event_ids)
        summary = summarize(cfg, outcomes, art_json, rows, caps)
        if pulse_before is not None and audit_report is not None and stack is not None:
            # The handlers' per-second counts against the audit, Artillery and the provider.
            figures, mismatched = compare_pulse(
                pulse_before,
                pulse_sums(stack, race_id),
                audit_report,
                int(summary["held"]),
                int(summary["outcomes"].get("aborted (timeout or connection error)", 0)),
                failed_charges(stack, race_id),
                teams=cfg.team_share > 0,
            )
            summary["pulse"] = figures
            if sc.pulse_exact:
                problems += mismatched
            elif mismatched:
                say(f"pulse (not compared: {sc.name} kills Redis): " + "; ".join(mismatched))
        if hooks and sc.after:
            problems += sc.after(ctx, summary)
        if ctx.figures:
            summary[sc.name] = ctx.figures
        if provider_figures is not None:
            summary["provider"] = provider_figures
        if views is not None:
            summary["live_views"] = views.figures()
        summary["race_id"] = race_id
        summary["audit_excused"] = excused
        summary["artillery_cpu_s"] = round(ARTILLERY_CPU_S.get(str(art_json), 0.0), 1)
        summary["drain_s"] = drain_s
        summary["checks"] = checks
        summary["audit"] = asdict(audit_report) | {"ok": audit_report.ok} if audit_report else None
        summary["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}
        summary["machine"] = {"cpus": os.cpu_count(), "load_avg_1m_at_end": os.getloadavg()[0]}
        result = BurstResult(
            config=summary["config"],
            summary=summary,
            artillery_exit=code,
            checks=checks,
            audit=summary["audit"],
            problems=problems,
        )
        summary["problems"] = problems
        if cfg.report:
            from tools import report

            cfg.out_dir.mkdir(parents=True, exist_ok=True)
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            path = cfg.out_dir / f"burst-{stamp}.html"
            path.write_text(report.render(summary))
            (cfg.out_dir / f"burst-{stamp}.json").write_text(json.dumps(summary, indent=2, default=str))
            result.report_path = str(path)
            summary["report_path"] = str(path)
            say(f"report: {path}")
        return result
    finally:
        if own_stack and stack is not None:
            stack.stop()
        if own_work and not os.environ.get("RACECAP_KEEP_WORK"):
            shutil.rmtree(work, ignore_errors=True)
