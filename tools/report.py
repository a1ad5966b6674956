"""The burst report: one self-contained HTML page (inline CSS and SVG, no CDN, no script).

``tools/burst/run.py`` calls :func:`render` with its summary and writes
``reports/burst-<timestamp>.html`` (and the same figures as ``.json``). To re-render a
saved summary:

    python -m tools.report reports/burst-20260101-120000.json
"""

from __future__ import annotations

import html
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RUNSIGNUP_HOURLY = 440_510

CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
main{max-width:1040px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px}
.sub{color:#5b6475;margin:0 0 16px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:12px}
.card{background:#fff;border:1px solid #e2e5ea;border-radius:8px;padding:12px 14px}
.card b{display:block;font-size:24px;margin-top:2px}
.card small{color:#5b6475}
.ok{color:#137333} .bad{color:#b3261e}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid #e2e5ea;border-radius:8px}
th,td{padding:6px 10px;border-bottom:1px solid #eef0f3;text-align:right}
th:first-child,td:first-child{text-align:left} th{background:#f0f2f5;font-weight:600}
.chart{background:#fff;border:1px solid #e2e5ea;border-radius:8px;padding:8px}
.note{color:#5b6475;font-size:13px}
code{background:#eef0f3;padding:1px 4px;border-radius:3px}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _num(value: Any, spec: str = ",.0f", none: str = "n/a") -> str:
    if value is None:
        return none
    return format(value, spec)


def _nice_step(max_value: float, ticks: int = 5) -> float:
    if max_value <= 0:
        return 1.0
    raw = max_value / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * mag:
            return mult * mag
    return 10 * mag


def bar_chart(
    bars: list[float],
    *,
    line: list[float] | None = None,
    width: int = 980,
    height: int = 300,
    x_label: str = "",
    y_label: str = "",
    bar_name: str = "",
    line_name: str = "",
) -> str:
    """Bars per x (e.g. per second), an optional line over them; inline SVG."""
    left, right, top, bottom = 56, 16, 24, 44
    n = max(len(bars), len(line or []), 1)
    top_value = max([*bars, *(line or []), 1])
    step = _nice_step(top_value)
    y_max = step * math.ceil(top_value / step)
    plot_w, plot_h = width - left - right, height - top - bottom
    bw = plot_w / n

    def y(v: float) -> float:
        return top + plot_h - (v / y_max) * plot_h

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" font-size="11" font-family="system-ui,sans-serif">'
    ]
    tick = 0.0
    while tick <= y_max + 1e-9:
        parts.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eef0f3"/>'
            f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" fill="#5b6475">{tick:,.0f}</text>'
        )
        tick += step
    for i, v in enumerate(bars):
        if v:
            parts.append(
                f'<rect x="{left + i * bw + bw * 0.1:.2f}" y="{y(v):.2f}" width="{max(bw * 0.8, 0.8):.2f}" '
                f'height="{top + plot_h - y(v):.2f}" fill="#2f6fde"><title>{i}s: {v:,.0f}</title></rect>'
            )
    if line:
        pts = " ".join(f"{left + (i + 0.5) * bw:.1f},{y(v):.1f}" for i, v in enumerate(line))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#e8710a" stroke-width="1.5"/>')
    x_step = _nice_step(n, 10)
    tick = 0.0
    while tick < n:
        x = left + tick * bw
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" stroke="#5b6475"/>'
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle" fill="#5b6475">{tick:.0f}</text>'
        )
        tick += x_step
    parts.append(
        f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#5b6475"/>'
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle" fill="#1d2330">{_e(x_label)}</text>'
        f'<text x="14" y="{top + plot_h / 2}" text-anchor="middle" fill="#1d2330" '
        f'transform="rotate(-90 14 {top + plot_h / 2})">{_e(y_label)}</text>'
    )
    legend_x = left + 8
    if bar_name:
        parts.append(
            f'<rect x="{legend_x}" y="6" width="10" height="10" fill="#2f6fde"/>'
            f'<text x="{legend_x + 14}" y="15">{_e(bar_name)}</text>'
        )
        legend_x += 24 + 7 * len(bar_name)
    if line and line_name:
        parts.append(
            f'<line x1="{legend_x}" x2="{legend_x + 14}" y1="11" y2="11" stroke="#e8710a" stroke-width="2"/>'
            f'<text x="{legend_x + 18}" y="15">{_e(line_name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def latency_chart(endpoints: dict[str, dict[str, float]], width: int = 980) -> str:
    """Horizontal bars: p50, p95, p99 per endpoint (milliseconds)."""
    if not endpoints:
        return "<p class='note'>No requests were timed.</p>"
    names = list(endpoints)
    row_h, left, right, top = 54, 90, 70, 26
    height = top + row_h * len(names) + 24
    top_value = max([s.get("p99", 0) for s in endpoints.values()] + [1000 * 1.05])
    step = _nice_step(top_value)
    x_max = step * math.ceil(top_value / step)
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + v / x_max * plot_w

    colours = (("median", "#9ec1f7", "p50"), ("p95", "#2f6fde", "p95"), ("p99", "#173a7a", "p99"))
    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="100%" xmlns="http://www.w3.org/2000/svg" '
        f'font-size="11" font-family="system-ui,sans-serif" role="img">'
    ]
    tick = 0.0
    while tick <= x_max + 1e-9:
        parts.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{top - 6}" y2="{height - 20}" stroke="#eef0f3"/>'
            f'<text x="{x(tick):.1f}" y="{height - 6}" text-anchor="middle" fill="#5b6475">{tick:,.0f} ms</text>'
        )
        tick += step
    parts.append(
        f'<line x1="{x(1000):.1f}" x2="{x(1000):.1f}" y1="{top - 10}" y2="{height - 20}" '
        f'stroke="#b3261e" stroke-dasharray="4 3"/>'
        f'<text x="{x(1000) + 4:.1f}" y="{top - 12}" fill="#b3261e">1 s target (hold, register)</text>'
    )
    for i, name in enumerate(names):
        s = endpoints[name]
        y0 = top + i * row_h
        parts.append(f'<text x="{left - 8}" y="{y0 + 26}" text-anchor="end" font-size="13">{_e(name)}</text>')
        for j, (key, colour, label) in enumerate(colours):
            v = s.get(key, 0)
            parts.append(
                f'<rect x="{left}" y="{y0 + 4 + j * 15}" width="{max(x(v) - left, 1):.1f}" height="12" '
                f'fill="{colour}"><title>{_e(name)} {label}: {v:,.1f} ms</title></rect>'
                f'<text x="{x(v) + 4:.1f}" y="{y0 + 14 + j * 15}" fill="#1d2330">{label} {v:,.0f}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def periods_table(periods: list[dict[str, Any]]) -> str:
    """Latency over the burst, per Artillery reporting period (10 s)."""
    if not periods:
        return ""
    cols: tuple[str, ...] = ("hold_p50", "hold_p99", "register_p50", "register_p99")
    if any(p.get("poll_p99") is not None for p in periods):
        cols += ("poll_p50", "poll_p99")  # the opening queue's own checks
    rows = "".join(
        f"<tr><td>{_num(p.get('t'), '.0f')} s</td><td>{_num(p.get('request_rate'), ',.0f')}</td>"
        + "".join(f"<td>{_num(p.get(c), ',.0f', '')}</td>" for c in cols)
        + "</tr>"
        for p in periods
    )
    return (
        "<h2>Over time (Artillery's 10-second periods)</h2><table><tr><th>period start</th><th>requests/s</th>"
        "<th>hold p50</th><th>hold p99</th><th>register p50</th><th>register p99</th>"
        + ("<th>poll p50</th><th>poll p99</th>" if "poll_p99" in cols else "")
        + "</tr>"
        f"{rows}</table><p class='note'>A slow period while the request rate is flat points at the machine "
        "(other processes, the JVMs' garbage collection), a slow start at cold environments.</p>"
    )


def _card(title: str, value: str, note: str = "", cls: str = "") -> str:
    return f'<div class="card"><small>{_e(title)}</small><b class="{cls}">{value}</b><small>{note}</small></div>'


def _time(epoch: float | None) -> str:
    if epoch is None:
        return "n/a"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _payments_html(pay: dict[str, Any] | None, provider: dict[str, Any] | None) -> str:
    """How the runners paid, and what the payment provider counted (tools/burst/summary.py)."""
    if not pay:
        return ""
    cards = ", ".join(f"{_e(card)} {n:,}" for card, n in sorted(pay["first_card"].items()))
    text = (
        f"<p>Payments: first card {cards or 'none'}; declined {pay['declines']:,} (then paid with a good card: "
        f"{pay['declined_then_confirmed']:,}); 3-D Secure approved {pay['three_ds_approved']:,}; 429s waited out: "
        f"the provider's own {pay['provider_429']:,}, the API's with Retry-After {pay['api_429_retry_after']:,}."
    )
    if provider:
        text += (
            f" The provider (limit {provider['limit_per_second']:g} requests/s) counted {provider['api_calls']:,} "
            f"API calls and answered {provider['answered_429']:,} of them 429."
        )
    return text + "</p>"


def _chaos(c: dict[str, Any] | None) -> str:
    """The chaos burst's faults: when each hit, what it did, and the latency in the 10 s after."""
    if not c:
        return ""
    base = c.get("baseline_latency_ms", {})
    rows = "".join(
        f"<tr><td>{r['at_s']:.1f} s</td><td>{_e(r['fault'])}</td><td><code>{_e(r['detail'])}</code></td>"
        f"<td>{_num(r['next_10s'].get('requests'))}</td><td>{_num(r['next_10s'].get('p50_ms'), ',.0f')}</td>"
        f"<td>{_num(r['next_10s'].get('p99_ms'), ',.0f')}</td><td>{_e(r['next_10s'].get('answers'))}</td></tr>"
        for r in c.get("timeline", [])
    )
    return (
        _where(c) + "<h2>Chaos: faults injected</h2>"
        f"<p>Injected into DynamoDB calls: {_e(c.get('injected'))} ({_e(c.get('injected_by_operation'))}). "
        f"Answers runners saw: {_e(c.get('answers'))}. Before the first fault: p50 "
        f"{_num(base.get('p50_ms'), ',.0f')} ms, p99 {_num(base.get('p99_ms'), ',.0f')} ms.</p>"
        "<table><tr><th>at</th><th>fault</th><th>what hit</th><th>requests in the next 10 s</th>"
        f"<th>p50 ms</th><th>p99 ms</th><th>answers</th></tr>{rows}</table>"
    )


_PARTS = ("queued", "env-wait", "handler", "asleep", "sdk-sleep", "limiter", "own-sleep")


def _where(c: dict[str, Any]) -> str:
    """Where the time went (the gateway's Server-Timing per request): p50/p99 of each part
    overall and per 10-s period, and each part's share of the slow requests' time."""
    w = c.get("where_time_went") or {}
    if not w.get("requests"):
        return ""
    head = "".join(f"<th>{p} p50 / p99 ms</th>" for p in _PARTS)

    def cells(x: dict[str, Any]) -> str:
        return "".join(
            f"<td>{_num((x.get(p) or {}).get('p50_ms'), ',.0f')} / {_num((x.get(p) or {}).get('p99_ms'), ',.0f')}</td>"
            for p in _PARTS
        )

    periods = "".join(
        f"<tr><td>{r['from_s']} s</td><td>{_num(r.get('requests'))}</td><td>{_num(r.get('p50_ms'), ',.0f')}</td>"
        f"<td>{_num(r.get('p99_ms'), ',.0f')}</td>{cells(r.get('where') or {})}</tr>"
        for r in c.get("p99_per_10s", [])
    )
    slow = w.get("slow", {})
    shares = ", ".join(f"{p} {slow.get(p + '_share', 0) * 100:.0f} %" for p in _PARTS if p + "_share" in slow)
    return (
        "<h2>Where the time went</h2>"
        f"<p>{_num(w.get('requests'))} answers timed by the gateway. The {_num(slow.get('requests'))} slower than "
        f"{_num(slow.get('over_ms'))} ms ({_num(slow.get('total_s'), ',.1f')} s in all) spent: {_e(shares)} "
        "(queued = the runner's latency less the gateway's time; asleep = SDK backoffs + the adaptive "
        "rate limiter + our own retries, all inside the handler's time).</p>"
        f"<table><tr><th>all</th><th>requests</th><th>p50 ms</th><th>p99 ms</th>{head}</tr>"
        f"<tr><td>all</td><td>{_num(w.get('requests'))}</td><td></td><td></td>{cells(w)}</tr>{periods}</table>"
    )


def _queue(q: dict[str, Any] | None) -> str:
    """The opening queue's figures: who was in the lottery, the waits, the two orders."""
    if not q:
        return ""

    def wait(w: dict[str, Any]) -> str:
        return f"p50 {_num(w.get('p50_s'), '.1f')} s, p99 {_num(w.get('p99_s'), '.1f')} s (n {_num(w.get('n'))})"

    pool, later = q.get("rho_pool", {}), q.get("rho_later", {})
    tabs = q.get("second_tabs", {})
    return (
        "<h2>The opening queue</h2>"
        f"<p>{_num(q.get('joined'))} runners joined ({_num(q.get('pool'))} before the opening: the lottery's pool; "
        f"the queue issued {_num(q.get('numbers_issued'))} numbers), {_num(q.get('admitted'))} were admitted. "
        f"Settings: {_e(q.get('settings'))}; the director opened registration "
        f"{_num(q.get('opened_s_after_first_arrival'), '.1f')} s after the first arrival.</p>"
        "<table><tr><th>figure</th><th>value</th></tr>"
        "<tr><td>queue wait (join → admitted, as the runner saw it), all</td>"
        f"<td>{wait(q.get('queue_wait_s', {}))}</td></tr>"
        f"<tr><td>… the lottery's pool (includes the wait for the opening)</td>"
        f"<td>{wait(q.get('queue_wait_pool_s', {}))}</td></tr>"
        f"<tr><td>… later arrivals</td><td>{wait(q.get('queue_wait_later_s', {}))}</td></tr>"
        f"<tr><td>Spearman &rho;, arrival vs admission order, pool</td><td>{_num(pool.get('rho'), '.3f')} "
        f"over {_num(pool.get('n'))} (must be within ±{_num(pool.get('bound_abs'), '.3f')})</td></tr>"
        f"<tr><td>later arrivals, first in first out</td><td>{_num(later.get('fifo_violations'))} admitted before "
        f"one that joined earlier (must be 0; &rho; {_num(later.get('rho'), '.3f')} over {_num(later.get('n'))}, "
        "not judged: joins in flight together may swap)</td></tr>"
        f"<tr><td>&rho; by when runners saw their admission (not judged)</td><td>pool "
        f"{_num(q.get('rho_seen_pool'), '.3f')}, later {_num(q.get('rho_seen_later'), '.3f')}</td></tr>"
        f"<tr><td>second tabs</td><td>{_num(tabs.get('opened'))} opened, {_num(tabs.get('same_place'))} "
        "got the same place</td></tr>"
        f"<tr><td>outcomes</td><td>{_e(q.get('outcomes'))} ({_num(q.get('places'))} places)</td></tr>"
        "</table>"
        "<p class='note'>Admission order is the admission number each runner was given: number k is admitted "
        "when “now serving” passes k. Under a fair lottery &rho; is about normal with standard deviation "
        "1/√(n-1); the pool's bound is max(0.1, 4.4/√(n-1)).</p>"
    )


def render(s: dict[str, Any]) -> str:
    cfg = s.get("config", {})
    hourly = s.get("estimated_hourly_registrations")
    success = s.get("success_rate")
    problems = s.get("problems", [])
    verdict = (
        '<b class="ok">PASSED</b> — every threshold and the audit'
        if not problems
        else '<b class="bad">FAILED</b> — ' + "; ".join(_e(p) for p in problems)
    )
    cards = [
        _card(
            "Registrations completed",
            _num(s.get("registrations_completed")),
            f"of {_num(s.get('held'))} runners who got a place; {_num(s.get('arrived'))} arrived",
        ),
        _card(
            "Success rate (runners with a place who registered)",
            _num(success * 100 if success is not None else None, ".1f") + "%",
            "confirmed ÷ (held minus those who stayed on the form by design)"
            if s.get("held_without_registering")
            else "confirmed ÷ held",
            "ok" if success == 1 else "bad",
        ),
        _card(
            "First request → last confirmation",
            _num(s.get("first_to_last_s"), ".1f") + " s",
            f"completion = {_e(s.get('completion_source', ''))}",
        ),
        _card(
            "Estimated hourly registrations",
            _num(hourly),
            f"RunSignUp, 45 web servers: {RUNSIGNUP_HOURLY:,}",
            "ok" if hourly and hourly > RUNSIGNUP_HOURLY else "",
        ),
        _card("Peak confirmations per second", _num(s.get("peak_confirmations_per_s")), "from confirmedAt"),
        _card(
            "HTTP requests",
            _num(s.get("http_requests")),
            f"peak {_num(s.get('peak_request_rate'))}/s (10-s periods)",
        ),
    ]
    if s.get("scenario") == "race-page":
        race = s.get("endpoints", {}).get("race", {})
        cards = [
            _card("Page reads", _num(s.get("http_requests")), f"from {_num(s.get('arrived'))} readers"),
            _card("Peak request rate", _num(s.get("peak_request_rate")) + "/s", "10-s periods"),
            _card("Race page p99", _num(race.get("p99"), ",.0f") + " ms", f"p50 {_num(race.get('median'))} ms"),
        ]
    queue = s.get("opening-queue")
    if queue:
        pool, later, waits = queue.get("rho_pool", {}), queue.get("rho_later", {}), queue.get("queue_wait_s", {})
        cards = [
            _card("Runners admitted", _num(queue.get("admitted")), f"of {_num(queue.get('joined'))} who joined"),
            _card(
                "Queue wait",
                f"p50 {_num(waits.get('p50_s'), '.0f')} s",
                f"p99 {_num(waits.get('p99_s'), '.0f')} s",
            ),
            _card("&rho; before the opening", _num(pool.get("rho"), ".3f"), f"n {_num(pool.get('n'))}: the lottery"),
            _card(
                "&rho; after the opening",
                _num(later.get("rho"), ".3f"),
                f"n {_num(later.get('n'))}: first in, first out",
            ),
            cards[0],
        ]
    endpoints = s.get("endpoints", {})
    latency_rows = "".join(
        f"<tr><td>{_e(name)}</td><td>{st['count']:,.0f}</td><td>{st['min']:,.1f}</td>"
        f"<td>{st['median']:,.1f}</td><td>{st['p95']:,.1f}</td><td>{st['p99']:,.1f}</td>"
        f"<td>{st['max']:,.1f}</td></tr>"
        for name, st in endpoints.items()
    )
    error_rows = (
        "".join(
            f"<tr><td>{_e(e['endpoint'])}</td><td>{_e(e['kind'])}</td><td>{_e(e['code'])}</td>"
            f"<td>{e['count']:,}</td></tr>"
            for e in s.get("errors", [])
        )
        or '<tr><td colspan="4">None: every request got the answer it expected.</td></tr>'
    )
    outcomes = s.get("outcomes", {})
    outcome_rows = "".join(f"<tr><td>{_e(k)}</td><td>{v:,}</td></tr>" for k, v in sorted(outcomes.items()))
    checks = s.get("checks", [])
    check_rows = (
        "".join(
            f"<tr><td>{_e(c['check'])}</td><td class='{'ok' if c['ok'] else 'bad'}'>"
            f"{'ok' if c['ok'] else 'FAIL'}</td></tr>"
            for c in checks
        )
        or '<tr><td colspan="2">No ensure checks ran.</td></tr>'
    )
    audit = s.get("audit")
    if audit:
        events = "".join(
            f"<tr><td>{_e(eid)}</td><td>{e['cap']:,}</td><td>{e['taken']:,}</td><td>{e['confirmed']:,}</td></tr>"
            for eid, e in audit["events"].items()
        )
        violations = "".join(f"<li class='bad'>{_e(v)}</li>" for v in audit["violations"]) or (
            "<li class='ok'>No violations: confirmed ≤ cap, one registration per email, bibs 1..N, "
            "every charge confirmed, one email per confirmation, DLQs empty.</li>"
        )
        audit_html = (
            f"<table><tr><th>event</th><th>cap</th><th>places taken</th><th>confirmed</th></tr>{events}</table>"
            f"<p>Confirmed {audit['confirmed']:,}; successful charges {audit['charges_succeeded']:,} "
            f"(refunded {audit['refunds']:,}); confirmation emails {audit['emails_sent']:,}; "
            f"DLQ messages {audit['dlq_messages']:,}. Queues drained "
            f"{_num(s.get('drain_s'), '.1f')} s after the last runner finished.</p><ul>{violations}</ul>"
            + _payments_html(s.get("payments"), s.get("provider"))
        )
    else:
        audit_html = (
            "<p class='note'>Not run: a deployed stage's backend is not reachable from here. "
            "Run <code>python -m tools.audit</code> where it is.</p>"
        )
    h2c = s.get("hold_to_confirmation_s") or {}
    p2c = s.get("paid_to_confirmed_s") or {}
    scale = cfg.get("backoff_scale", 1)
    config_rows = "".join(
        f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>"
        for k, v in (
            ("scenario", s.get("scenario")),
            ("target", s.get("target")),
            ("race", s.get("race_id")),
            ("runners (arrival window)", f"{cfg.get('runners')} within {cfg.get('arrival_s')} s"),
            ("time on the form (think)", f"{cfg.get('think_min_s')} to {cfg.get('think_max_s')} s"),
            (
                "waiting-screen back-off",
                f"x{scale} of 10/20/40/60 s = " + "/".join(f"{w * scale:g}" for w in (10, 20, 40, 60)) + " s",
            ),
            ("event caps", ", ".join(f"{e['name']} {e['cap']:,}" for e in s.get("event_caps", [])) or "n/a"),
            (
                "gateway",
                "an environment per invocation"
                if cfg.get("gateway_environments", "shared") == "own"
                else f"shared: {cfg.get('gateway_workers')} workers x {cfg.get('gateway_threads')} threads",
            ),
            (
                "machine",
                f"{s.get('machine', {}).get('cpus')} CPUs, load {s.get('machine', {}).get('load_avg_1m_at_end', 0):.1f}"
                " at the end; Artillery, the stack and the servers share it",
            ),
        )
    )
    per_second = s.get("confirmations_per_second", [])
    arrivals = s.get("arrivals_per_second", [])
    chart = (
        bar_chart(
            per_second,
            line=arrivals,
            x_label="seconds since the first request",
            y_label="per second",
            bar_name="registrations confirmed",
            line_name="runners arriving",
        )
        if per_second
        else "<p class='note'>No confirmations.</p>"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Racecap burst — {_e(s.get("scenario"))} — {_e(_time(s.get("first_request")))}</title>
<style>{CSS}</style></head>
<body><main>
<h1>Racecap burst: {_e(s.get("scenario"))}</h1>
<p class="sub">{_e(s.get("target"))} · first request {_e(_time(s.get("first_request")))} ·
last confirmation {_e(_time(s.get("last_completion")))} · {verdict}</p>
<div class="cards">{"".join(cards)}</div>
<p class="note">Estimated hourly registrations, as the RunSignUp paper computes it (§5.3): registrations
completed &divide; time from the first request to the last completion &times; 3,600. Here a registration is
complete when its <code>confirmedAt</code> is written (locally read from the Registrations table);
the last confirmation a runner's waiting screen saw was {_e(_time(s.get("last_completion_seen_by_runner")))}.
Think times and the waiting screen's back-off are shortened for a local run (see the settings below);
the paper used 15 to 60 s on each form and the real 10/20/40/60 s waits.</p>

<h2>Registrations confirmed per second</h2>
<div class="chart">{chart}</div>
<p class="note">Like the paper's Figure 6. Hold → confirmation seen by the runner: p50 {_num(h2c.get("p50"), ".1f")} s,
p99 {_num(h2c.get("p99"), ".1f")} s (includes the form and the waiting screen). Paid → confirmed by the writer:
p50 {_num(p2c.get("p50"), ".2f")} s, p99 {_num(p2c.get("p99"), ".2f")} s, max {_num(p2c.get("max"), ".2f")} s.</p>

<h2>Latency per endpoint (ms, time to first byte)</h2>
<div class="chart">{latency_chart(endpoints)}</div>
<table><tr><th>endpoint</th><th>requests</th><th>min</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>
{latency_rows}</table>

{periods_table(s.get("periods", []))}

<h2>Errors by code</h2>
<table><tr><th>endpoint</th><th>kind</th><th>code</th><th>count</th></tr>{error_rows}</table>
<p class="note">API codes are the contract's (<code>SOLD_OUT</code> is the expected answer once places
run out); HTTP codes are every non-2xx status; network errors are timeouts or refused connections.</p>

<h2>Runners</h2>
<table><tr><th>outcome</th><th>runners</th></tr>{outcome_rows}</table>

<h2>Thresholds (Artillery ensure)</h2>
<table><tr><th>check</th><th>result</th></tr>{check_rows}</table>

<h2>Post-burst audit</h2>
{audit_html}
{_chaos(s.get("chaos"))}
{_queue(s.get("opening-queue"))}

<h2>Settings</h2>
<table>{config_rows}</table>
</main></body></html>
"""


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    src = Path(sys.argv[1])
    out = src.with_suffix(".html")
    out.write_text(render(json.loads(src.read_text())))
    print(out)


if __name__ == "__main__":
    main()
