"""The registry of bench sections, in the order each phase runs them.

To add a section, write ``tools/bench/<name>.py`` ending in ``SECTION = Section(...)``
(``tools/bench/section.py`` says what a section is) and add one line to ``sections()`` below.
Only the runner and the CLI import this registry: a section takes its types from ``section.py``,
so it never imports the module that imports it.
"""

from __future__ import annotations

from tools.bench.section import Section


def sections() -> list[Section]:
    """Every section, in the order each phase runs them."""
    from tools.bench import ballot, coldstart, floors, gateway_profile, idle_cost, race_list, raw, results

    return [
        idle_cost.SECTION,
        coldstart.SECTION,
        raw.SECTION,
        floors.SECTION,
        gateway_profile.SECTION,
        results.SECTION,
        race_list.SECTION,
        ballot.SECTION,
    ]
