"""Directors watching the opening (issue 42): N console live views polling the admin API while
the burst runs, as ``site/admin/src/live.js`` does — the race's per-second counts every 2 s
(from the last seconds it has) and its figures every 5 s. What they cost is the bench's: the
admin API's calls per view-minute, which must not grow with the runners."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

from tools.burst.config import DIRECTOR

PULSE_EVERY_S = 2.0  # live.js PULSE_MS
STATS_EVERY_S = 5.0  # live.js STATS_MS
LATE_S = 5  # live.js LATE_S: the last seconds are read again


class LiveViews:
    """``with LiveViews(stack, base, race_id, n) as views:`` … ``views.figures()``."""

    def __init__(self, stack: Any, base: str, race_id: str, views: int) -> None:
        self._token = stack.issuer.mint(DIRECTOR)
        self._base, self._race, self._n = base, race_id, views
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.answers: Counter[str] = Counter()
        self._started = self._ended = 0.0

    def __enter__(self) -> LiveViews:
        self._started = time.monotonic()
        for i in range(self._n):
            t = threading.Thread(target=self._view, args=(i,), name=f"live-view-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)
        self._ended = time.monotonic()

    def _get(self, path: str) -> dict[str, Any]:
        req = urllib.request.Request(f"{self._base}/api/admin/races/{self._race}/{path}")  # noqa: S310
        req.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - the local stack
                body, status = json.loads(resp.read() or b"{}"), resp.status
        except urllib.error.HTTPError as exc:
            body, status = {}, exc.code
        except OSError:
            body, status = {}, 0
        with self._lock:
            self.answers[f"{path.split('?', maxsplit=1)[0]} {status}"] += 1
        return dict(body)

    def _view(self, i: int) -> None:
        # Each view opens at its own moment in the first 2 s, as ten directors would.
        self._stop.wait(i * PULSE_EVERY_S / max(1, self._n))
        start = int(time.time()) - 600
        # On a fixed schedule, as setInterval keeps it: a slow answer does not thin the polls.
        next_pulse = next_stats = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_stats:
                self._get("stats?minutes=1")
                next_stats += STATS_EVERY_S
            if now >= next_pulse:
                view = self._get(f"pulse?start={start}")
                start = max(start, int(view.get("end", start + LATE_S)) - LATE_S)
                next_pulse += PULSE_EVERY_S
            self._stop.wait(max(0.0, min(next_pulse, next_stats) - time.monotonic()))

    def figures(self) -> dict[str, Any]:
        minutes = self._n * (self._ended - self._started) / 60
        requests = sum(self.answers.values())
        return {
            "views": self._n,
            "view_minutes": round(minutes, 2),
            "requests": requests,
            "requests_per_view_minute": round(requests / minutes, 1) if minutes else None,
            "answers": dict(self.answers),
        }
