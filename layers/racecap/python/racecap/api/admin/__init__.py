"""The race directors' admin API, one router per capability (``functions/admin_api`` includes
them, each on the first request that needs it: ``racecap.api.lazy``): races, window, stats,
fairness, runners, questions, codes, audit, waitlist, ballot; ``common`` holds what every route needs
(the calling director, their race, the JSON answer)."""

from __future__ import annotations

import re

# The routers in the order they were always included (the OpenAPI document's order).
ORDER = ("races", "window", "stats", "fairness", "runners", "questions", "codes", "audit", "waitlist", "ballot")

# What follows /races/<raceId>/ (or /races/<raceId>/events/<eventId>/) names the capability;
# anything else (the race list, a race, its events, copy, publish) is the races router's.
_SEGMENT = re.compile(r"^/api/admin/races/[^/]+/(?:events/[^/]+/)?([a-z]+)")
_BY_SEGMENT = {
    "window": "window",
    "stats": "stats",
    "pulse": "stats",
    "fairness": "fairness",
    "queue": "fairness",
    "registrations": "runners",
    "questions": "questions",
    "codes": "codes",
    "audit": "audit",
    "waitlist": "waitlist",
    "ballot": "ballot",
}


def capability_of(path: str) -> str:
    """The router a request's path needs (``tests/unit/test_admin_lazy.py`` checks every route)."""
    m = _SEGMENT.match(path)
    return _BY_SEGMENT.get(m.group(1), "races") if m else "races"
