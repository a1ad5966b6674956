"""What a bench section is, and the registry of them.

A section measures one thing and owns one key of ``reports/bench.json``. To add one, write
``tools/bench/<name>.py`` ending in ``SECTION = Section(...)`` and add one line to
``sections()`` below. ``when`` says where in the run it measures:

- ``cold``: before any server starts (the machine as quiet as it gets);
- ``idle``: the instrumented stack is up and idle, before the bursts;
- ``after_burst``: the stack is still up, after the full-flow bursts (``Bench.burst`` holds
  the opening burst's summary).

``targets`` adds lines to ``target`` from the whole report; ``options`` adds command-line
arguments (read back from ``Bench.args``); ``with_flow`` runs the section with
``--only-flow`` too, when the flow's own figures use it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from local.stack import LocalStack
    from tools.burst.config import BurstConfig


@dataclass
class Bench:
    """One bench run, as the sections see it."""

    args: argparse.Namespace
    work: Path
    cfg: BurstConfig
    stack: LocalStack | None = None
    burst: dict[str, Any] | None = None  # the opening burst's summary, once it ran
    results: dict[str, Any] = field(default_factory=dict)  # key -> what each section measured

    def say(self, msg: str) -> None:
        print(f"[bench] {msg}", flush=True)


@dataclass(frozen=True)
class Section:
    key: str
    when: Literal["cold", "idle", "after_burst"]
    measure: Callable[[Bench], Any]
    targets: Callable[[dict[str, Any]], dict[str, bool]] | None = None
    options: Callable[[argparse.ArgumentParser], None] | None = None
    with_flow: bool = False


def sections() -> list[Section]:
    """Every section, in the order each phase runs them."""
    from tools.bench import coldstart, floors, gateway_profile, idle_cost, race_list, raw, results

    return [
        idle_cost.SECTION,
        coldstart.SECTION,
        raw.SECTION,
        floors.SECTION,
        gateway_profile.SECTION,
        results.SECTION,
        race_list.SECTION,
    ]
