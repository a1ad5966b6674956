"""The registry of burst scenarios: ``SCENARIO=<name> make burst`` picks one.

To add one, write ``tools/burst/<name>.py`` building a ``Scenario`` (see ``config.py`` for
its hooks) and register it below with one line.
"""

from __future__ import annotations

from tools.burst.bots import BOTS
from tools.burst.chaos import CHAOS
from tools.burst.config import ARTILLERY_DIR, EVENT_SPLIT, BurstConfig, Scenario
from tools.burst.opening_queue import OPENING_QUEUE

OPENING = Scenario(
    name="opening",
    artillery=ARTILLERY_DIR / "opening-burst.yml",
    threshold_endpoints=("hold", "register", "confirm"),
)
OVERSUBSCRIBED = Scenario(
    name="oversubscribed",
    artillery=ARTILLERY_DIR / "oversubscribed.yml",
    threshold_endpoints=("hold",),
    places=lambda cfg: max(1, cfg.runners // 5),  # 5x more runners than places
)
RACE_PAGE = Scenario(
    name="race-page",
    artillery=ARTILLERY_DIR / "race-page-burst.yml",
    threshold_endpoints=("race", "races"),
    phase="readers",
    registers=False,
    think_s=(1, 2),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (OPENING, OVERSUBSCRIBED, RACE_PAGE, BOTS, CHAOS, OPENING_QUEUE)}


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise SystemExit(f"unknown scenario {name!r}; one of {sorted(SCENARIOS)}") from None


def event_caps(cfg: BurstConfig) -> list[tuple[str, int, int]]:
    """(distance, places, price) per distance: ``--cap`` or the scenario's places in all, split
    as ``EVENT_SPLIT``."""
    total = cfg.cap if cfg.cap is not None else scenario(cfg.scenario).places(cfg)
    caps = [(n, max(1, round(total * share)), price) for n, share, price in EVENT_SPLIT]
    return caps if total >= len(caps) else [("Marathon", total, 9500)]
