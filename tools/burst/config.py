"""What a burst is: its knobs (``BurstConfig``), its outcome (``BurstResult``) and the shape
of a scenario (``Scenario``, registered in ``tools/burst/scenarios.py``).
"""

from __future__ import annotations

from collections.abc import Callable
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
    drain_timeout_s: float = 300.0
    artillery_timeout_s: float = 1800.0
    # Registration questions each runner answers (tools/burst/stack.seed_questions): 0, as
    # before, or up to 5 (emergency contact name and phone, a T-shirt size, yes/no, a country).
    answers: int = 0
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
