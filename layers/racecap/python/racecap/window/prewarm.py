"""Pre-warm for an opening: warm environments raised before the burst, lowered after it.

The registration window's workflow runs ``prewarm`` right after its cache warm-up (ten
minutes before the opening) and ``cooldown`` at the cool-down time (``COOL_DOWN_AFTER``
the opening, or the closing if that comes first). Between openings the floor of the
registration API's provisioned environments is 0, so a quiet stage pays nothing for them
(PublicApi and ResultsApi use SnapStart instead, which needs no raising).

How many: the race's expected burst is its whole field arriving in the first minute (the
product's design case), each runner making ``CALLS_PER_RUNNER`` registration-API calls of
about ``SECONDS_PER_CALL``; Little's law gives the environments busy at once, plus
headroom, within the target's maximum. ``make preflight`` prints the same estimate.

Two openings whose windows overlap share the one floor: the pre-warm never lowers a floor
another opening raised, and the cool-down keeps it while another opening's own cool-down
is still scheduled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

from racecap.observability import logger
from racecap.races.store import RaceStore
from racecap.window.service import RaceGone
from racecap.window.store import WarmStartScaler, WindowStore

CALLS_PER_RUNNER = 4  # a hold, the registration, two status polls


SECONDS_PER_CALL = 0.25  # a registration-API call's duration under load, generously


HEADROOM = 1.5


COOL_DOWN_PREFIX = "racecap-cooldown-"


def environments_for(runners_per_minute: float, maximum: int) -> int:
    """Warm environments a burst of ``runners_per_minute`` keeps busy, within 1..maximum."""
    busy = runners_per_minute / 60 * CALLS_PER_RUNNER * SECONDS_PER_CALL * HEADROOM
    return max(1, min(maximum, math.ceil(busy)))


class WarmStarts:
    def __init__(
        self,
        store: RaceStore,
        windows: WindowStore,
        scaler: WarmStartScaler | None,
        maximum: int,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._windows = windows
        self._scaler = scaler
        self._maximum = maximum
        self._now = now

    def run(self, task: str, race_id: str, execution: str | None, cool_down_at: str | None) -> dict[str, object]:
        if self._scaler is None:  # no provisioned function on this stage: nothing to raise
            return {"raceId": race_id, "skipped": "no warm-start target"}
        if execution is not None and not self._is_current(race_id, execution):
            logger.info("replaced window execution: warm starts left alone", extra={"raceId": race_id})
            return {"raceId": race_id, "skipped": "replaced execution"}
        if task == "prewarm":
            if cool_down_at is None:
                raise ValueError("prewarm needs coolDownAt")
            return self.raise_floor(race_id, datetime.fromisoformat(cool_down_at))
        if task == "cooldown":
            return self.lower_floor(race_id)
        raise ValueError(f"unknown task {task!r}")

    def raise_floor(self, race_id: str, cool_down_at: datetime) -> dict[str, object]:
        assert self._scaler is not None
        found = self._store.get_race(race_id)
        if found is None:
            raise RaceGone(race_id)
        _, events = found
        runners_per_minute = sum(e.cap for e in events)
        needed = environments_for(runners_per_minute, self._maximum)
        before = self._scaler.floor()
        floor = max(before, needed)
        # The backstop first: once the floor is up, something must bring it down.
        self._scaler.schedule_floor(COOL_DOWN_PREFIX + race_id, cool_down_at, 0)
        if floor != before:
            self._scaler.set_floor(floor)
        logger.info(
            "warm starts raised",
            extra={"raceId": race_id, "runnersPerMinute": runners_per_minute, "floor": floor, "before": before},
        )
        return {"raceId": race_id, "floor": floor, "before": before, "needed": needed}

    def lower_floor(self, race_id: str) -> dict[str, object]:
        assert self._scaler is not None
        own = COOL_DOWN_PREFIX + race_id
        self._scaler.cancel(own)
        now = self._now()
        others = sorted(n for n, at in self._scaler.scheduled(COOL_DOWN_PREFIX).items() if n != own and at > now)
        before = self._scaler.floor()
        if others:  # another opening is still on: its own cool-down lowers the floor
            logger.info("warm starts kept for another opening", extra={"raceId": race_id, "others": others})
            return {"raceId": race_id, "floor": before, "before": before, "keptFor": others}
        if before != 0:
            self._scaler.set_floor(0)
        logger.info("warm starts lowered", extra={"raceId": race_id, "before": before})
        return {"raceId": race_id, "floor": 0, "before": before}

    def _is_current(self, race_id: str, execution: str) -> bool:
        window = self._windows.get(race_id)
        return window is not None and window.execution == execution
