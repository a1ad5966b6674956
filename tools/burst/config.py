"""What a burst is: its knobs (``BurstConfig``), its outcome (``BurstResult``) and the shape
of a scenario (``Scenario``, registered in ``tools/burst/scenarios.py``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blueprint

if TYPE_CHECKING:
    from local.stack import LocalStack
    from tools.burst.clients import Clients

ROOT = blueprint.ROOT
ARTILLERY_DIR = ROOT / "artillery"
P99_LIMIT_MS = 1000
DIRECTOR = "director-burst"
# Three distances; runners spread over them in proportion to the places left.
EVENT_SPLIT = (("Marathon", 0.5, 9500), ("Half Marathon", 0.3, 6500), ("10K", 0.2, 3500))


@dataclass
class BurstConfig:
    scenario: str = "opening"
    runners: int = 450
    arrival_s: float = 30.0
    think_min_s: float = 2.0
    think_max_s: float = 8.0
    backoff_scale: float = 0.1
    confirm_timeout_s: float = 600.0
    cap: int | None = None  # places in total; default: the scenario's (1.25x runners for the opening)
    target: str | None = None
    race_id: str | None = None
    # One request at a time per gateway worker, as Lambda runs one invocation per execution
    # environment. Not only faithful: Powertools keeps the current event in a class
    # attribute (BaseRouter.current_event), so two threads of one process can swap request
    # bodies; with --threads > 1 a burst sees 400s and wrong-email 409s (see the docs).
    # "own" (each invocation in its own environment, local/environments.py) or "shared"
    # (gateway_workers x gateway_threads processes running every function in-process).
    gateway_environments: str = "own"
    gateway_workers: int = 8
    gateway_threads: int = 1
    email_rate: float = 2000.0
    warm: bool = True
    warm_registrations: int = 400  # JIT warm-up of the local JVMs (a separate race); 0 to skip
    warm_concurrency: int | None = None  # default: one request per gateway thread, twice over
    # The scenario's `ensure` p99 thresholds (the product's: 1 s; `make burst`, `make bench`).
    # None: no latency threshold in the run (the integration tests: they assert behaviour and
    # bound latency themselves, far above a loaded machine: tests/integration/latency.py).
    p99_limit_ms: int | None = P99_LIMIT_MS
    # The Stripe stand-in's request limit during the burst (requests/s; locally only). None:
    # its default, Stripe's test-mode 25/s. Set low, runners meet the provider's limit.
    provider_rate_per_second: float | None = None
    # The API's own budget for provider calls (the PaymentsRatePerSecond parameter; None: the
    # blueprint's default, 24/s for a test-mode account). A burst that models a live account
    # raises both together, the budget a little under the provider's limit.
    payments_budget_per_second: float | None = None
    # The stand-in's limit on any one endpoint during the burst (None: its default, Stripe's 25/s
    # unless Stripe raised it), and the API's budget per endpoint (PaymentsEndpointRatePerSecond;
    # None: the blueprint's 24/s). Creating intents (one per registration) meets this limit first:
    # a burst that models an account Stripe raised for an opening raises both together.
    provider_endpoint_rate_per_second: float | None = None
    payments_endpoint_budget_per_second: float | None = None
    drain_timeout_s: float = 300.0
    artillery_timeout_s: float = 1800.0
    # Registration questions each runner answers (tools/burst/stack.seed_questions): 0, as
    # before, or up to 5 (emergency contact name and phone, a T-shirt size, yes/no, a country).
    answers: int = 0
    # Directors' live views polling the admin API through the burst (tools/burst/live_views.py).
    live_views: int = 0
    out_dir: Path = ROOT / "reports"
    report: bool = True
    quiet: bool = False
    # A discount code posted at the opening: this share of runners apply it once they hold a
    # place, racing for ``code_uses`` uses (default: a tenth of them get it); 0 for none.
    # Locally the burst makes the code (``BURST20``, 20 % off); on a stage, name one (CODE).
    code_share: float = 0.0
    code_uses: int | None = None
    code: str = "BURST20"
    # A share of runners are team captains: each holds ``team_size`` places at once and pays
    # for the team once (racecap.teams); 0 for none.
    team_share: float = 0.0
    team_size: int = 4
    # Knobs one scenario reads (e.g. bots: BOT_TOKENS, ADDRESS_CEILING); each documents its own.
    options: dict[str, int] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return not self.target

    @staticmethod
    def add_arguments(
        parser: argparse.ArgumentParser,
        flags: Sequence[str] | None = None,
        defaults: Mapping[str, Any] | None = None,
        helps: Mapping[str, str | None] | None = None,
    ) -> None:
        """Declare the burst's knobs ``flags`` (``FLAGS``' names, in that order; all by default)
        on ``parser``.

        Each one's default: its environment variable when set, else ``defaults[flag]`` (a
        command line's own, e.g. the bench's 900 runners), else ``BurstConfig``'s. ``helps``
        replaces a flag's help text (None: none)."""
        base = BurstConfig()
        for name in flags if flags is not None else FLAGS:
            knob = FLAGS[name]
            default = (defaults or {}).get(name, getattr(base, knob.field) if knob.field else None)
            raw = os.environ.get(knob.env) if knob.env else None
            if raw:
                default = knob.from_env(raw)
            text = helps[name] if helps and name in helps else knob.help
            kw: dict[str, Any] = {"help": text} if text is not None else {}
            if knob.store_true:
                parser.add_argument(f"--{name}", action="store_true", **kw)
            elif knob.choices:
                parser.add_argument(f"--{name}", choices=knob.choices, default=default, **kw)
            else:
                parser.add_argument(f"--{name}", type=knob.type, default=default, **kw)

    @classmethod
    def from_args(cls, ns: argparse.Namespace, **fixed: Any) -> BurstConfig:
        """The config from parsed ``add_arguments`` flags (those the parser declared), plus
        ``fixed`` fields; the rest keep their defaults."""
        given = vars(ns)
        values: dict[str, Any] = {}
        for name, knob in FLAGS.items():
            dest = name.replace("-", "_")
            if knob.field is None or dest not in given:
                continue
            values[knob.field] = given[dest]
        if "no_warm" in given:
            values["warm"] = not given["no_warm"]
        if "think_max_s" in values:
            values["think_max_s"] = max(values.get("think_min_s", cls.think_min_s), values["think_max_s"])
        for rate in ("provider_rate_per_second", "provider_endpoint_rate_per_second"):
            if rate in values:  # 0: the stand-in's own limit, as unset
                values[rate] = values[rate] or None
        return cls(**(values | fixed))


def _int(raw: str) -> int:
    return int(float(raw))


@dataclass(frozen=True)
class Flag:
    """One command-line knob of a burst: the ``BurstConfig`` field it sets, the environment
    variable that sets its default, and how that variable's text is read."""

    field: str | None
    env: str | None = None
    type: Callable[[str], Any] = float
    from_env: Callable[[str], Any] = float
    help: str | None = None
    choices: tuple[str, ...] | None = None
    store_true: bool = False


# Every knob `python -m tools.burst` has, in its order (the bench declares a few of them);
# ``--scenario`` is the burst command's own (its choices are the scenario registry).
FLAGS: dict[str, Flag] = {
    "live-views": Flag(
        "live_views", "LIVE_VIEWS", int, _int, help="directors' live views polling the admin API through the burst"
    ),
    "provider-rate": Flag(
        "provider_rate_per_second",
        "PROVIDER_RATE",
        help="the Stripe stand-in's requests/s during the burst (default: its 25/s, Stripe's test mode)",
    ),
    "endpoint-rate": Flag(
        "provider_endpoint_rate_per_second",
        "PROVIDER_ENDPOINT_RATE",
        help="the Stripe stand-in's requests/s to any one endpoint during the burst (default: its 25/s, Stripe's "
        "default per endpoint)",
    ),
    "runners": Flag("runners", "RUNNERS", int, _int),
    "arrival": Flag("arrival_s", "ARRIVAL_S", help="seconds"),
    "think-min": Flag("think_min_s", "THINK_MIN"),
    "think-max": Flag("think_max_s", "THINK_MAX"),
    "backoff-scale": Flag(
        "backoff_scale", "BACKOFF_SCALE", help="multiplies the waiting screen's 10/20/40/60 s (1 = real)"
    ),
    "cap": Flag("cap", "CAP", int, int),
    "target": Flag("target", "TARGET", str, str, help="a deployed stage's URL"),
    "race-id": Flag("race_id", "RACE_ID", str, str),
    "gateway-environments": Flag("gateway_environments", "GATEWAY_ENVIRONMENTS", str, str, choices=("own", "shared")),
    "gateway-workers": Flag("gateway_workers", "GATEWAY_WORKERS", int, _int),
    "gateway-threads": Flag("gateway_threads", "GATEWAY_THREADS", int, _int),
    "email-rate": Flag("email_rate", "EMAIL_RATE"),
    "no-warm": Flag(None, store_true=True),
    "warm-registrations": Flag(
        "warm_registrations",
        "WARM_REGISTRATIONS",
        int,
        _int,
        help="full flows on a separate race first, to warm the local JVMs (0: none)",
    ),
    "p99-limit": Flag("p99_limit_ms", "P99_LIMIT_MS", int, _int, help=f"ms (default {P99_LIMIT_MS})"),
    "code-share": Flag(
        "code_share",
        "CODE_SHARE",
        help="share of runners applying a discount code once they hold a place (0.2; 0: none)",
    ),
    "code-uses": Flag(
        "code_uses",
        "CODE_USES",
        int,
        int,
        help="the code's use limit (default: half of the runners who try it, so it runs out)",
    ),
    "code": Flag("code", "CODE", str, str, help="the code (on a stage: an existing one)"),
    "team-share": Flag(
        "team_share",
        "TEAM_SHARE",
        help="share of runners who are team captains, holding and paying for a whole team at once (0.05; 0: none)",
    ),
    "team-size": Flag("team_size", "TEAM_SIZE", int, _int, help="a team's size (4)"),
    "out": Flag("out_dir", None, Path, Path),
}


@dataclass
class BurstResult:
    config: dict[str, Any]
    summary: dict[str, Any]
    artillery_exit: int
    checks: list[dict[str, Any]] = field(default_factory=list)
    audit: dict[str, Any] | None = None
    report_path: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class BurstRun:
    """What a scenario's hooks can see and touch while its burst runs."""

    cfg: BurstConfig
    base: str
    race_id: str
    event_ids: list[str]
    work: Path
    say: Callable[[str], None]
    stack: LocalStack | None = None  # None against a deployed TARGET
    clients: Clients | None = None
    # Filled by the hooks; lands in the summary (and the JSON report) under the scenario's name.
    figures: dict[str, Any] = field(default_factory=dict)
    # Set by ``before``: extra environment for Artillery's processor (identities it plays).
    artillery_env: dict[str, str] = field(default_factory=dict)


def default_places(cfg: BurstConfig) -> int:
    return max(3, int(cfg.runners * 1.25))


@dataclass(frozen=True)
class Scenario:
    """One way to burst the stack. A new one: a module that builds one, plus one line in
    ``tools/burst/scenarios.py``.

    The hooks run locally only, around Artillery: ``before`` after the warm-up, just before
    the runners arrive; ``during_end`` as soon as Artillery has exited (stop what ``before``
    started); ``after`` once the queues drained and the audit ran, returning problems (each
    fails the run).
    """

    name: str
    artillery: Path  # the Artillery script (artillery/*.yml)
    threshold_endpoints: tuple[str, ...]  # endpoints its `ensure` p99 thresholds name
    phase: str = "opening"  # the arrival phase's name in the report
    registers: bool = True  # runners register: drain the queues and audit afterwards
    think_s: tuple[float, float] | None = None  # fixed think time, overriding the config's
    places: Callable[[BurstConfig], int] = default_places  # places in total unless --cap
    stack_env: Callable[[BurstConfig], dict[str, str]] | None = None  # for a dedicated stack
    persist_queues: bool = False  # a dedicated stack's ElasticMQ keeps queues and messages on disk
    # The per-second counts are checked against the audit, Artillery and the provider afterwards
    # (tools/burst/pulse_check.py); False for a scenario that kills Redis, which loses what it
    # held (the view shows those seconds as gaps): the figures are reported, not compared.
    pulse_exact: bool = True
    before: Callable[[BurstRun], None] | None = None
    during_end: Callable[[BurstRun], None] | None = None
    after: Callable[[BurstRun, dict[str, Any]], list[str]] | None = None
    # Audit violations the scenario itself caused on purpose and can account for, each with
    # the reason (e.g. a process killed between SES accepting an email and recording it).
    # Anything it does not name fails the run as usual.
    audit_excuses: Callable[[BurstRun, list[str]], dict[str, str]] | None = None
    # The `ensure` conditions for this config, replacing the script's (whose numbers are the
    # full run's), when they depend on the config.
    ensure_conditions: Callable[[BurstConfig], list[str]] | None = None
    # Artillery's phases for this config, replacing the one arrival phase (e.g. arrivals
    # before an opening, a pause, arrivals after it).
    phases: Callable[[BurstConfig], list[dict[str, Any]]] | None = None
    # False: the race is seeded not yet open (the scenario's hooks open it during the burst),
    # so the warm-up skips its one registration on it (the warm-up race still proves the flow).
    seeded_open: bool = True
    # The command line's defaults for RUNNERS and ARRIVAL_S when this scenario is picked.
    default_runners: int | None = None
    default_arrival_s: float | None = None
