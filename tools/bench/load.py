"""How busy the machine was while a figure was measured (issue 30): a floor measured while
other work ran is not a floor. Each sample records the 1-minute load average before and after;
over ``QUIET_LOAD`` the section waits and measures again, and if it never got quiet the figure
is kept but marked unreliable, so a blocker argued from it must quote a quiet run instead."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# On this two-core machine a 1-minute load of 2 means both cores were already taken by
# something: above it the figure measures the machine as much as the code.
QUIET_LOAD = 2.0


def load_now() -> float:
    return round(os.getloadavg()[0], 2)


def measured_quietly(
    measure: Callable[[], T], say: Callable[[str], None], *, attempts: int = 3, settle_s: float = 30.0
) -> tuple[T, dict[str, Any]]:
    """``measure()`` with the load around it; measured again (after ``settle_s``) while it was
    over ``QUIET_LOAD``, up to ``attempts`` times. The last result, and what the load was."""
    tries: list[dict[str, float]] = []
    while True:
        before = load_now()
        result = measure()
        after = load_now()
        tries.append({"load_1min_before": before, "load_1min_after": after})
        loud = max(before, after) > QUIET_LOAD
        if not loud or len(tries) >= attempts:
            break
        say(f"    the load was {max(before, after)} (over {QUIET_LOAD}): measuring again in {settle_s:g} s")
        time.sleep(settle_s)
    return result, {
        **tries[-1],
        "quiet": not loud,
        "attempts": len(tries),
        "quiet_means_load_at_most": QUIET_LOAD,
        **({} if not loud else {"note": "the machine stayed busy: not a floor; quote a quiet run"}),
    }
