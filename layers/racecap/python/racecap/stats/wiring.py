"""The stats capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from racecap.stats.pulse import PulseSeries
    from racecap.stats.service import RaceStats


@lru_cache(maxsize=1)
def race_stats() -> RaceStats:
    from racecap.cache import shared as cache
    from racecap.codes.wiring import race_code_uses
    from racecap.places.wiring import inventory
    from racecap.registration.wiring import registrations
    from racecap.stats.service import RaceStats
    from racecap.waitlist.wiring import waitlist_store

    return RaceStats(
        inventory(),
        registrations(),
        pulse_series().unwritten,
        cache(),
        code_uses=race_code_uses,
        waitlist=waitlist_store().line,
    )


@lru_cache(maxsize=1)
def pulse_series() -> PulseSeries:
    """The opening's per-second counts: Redis while it holds them, the durable copy after."""
    from racecap import clients
    from racecap.config import get_settings
    from racecap.stats.pulse import DynamoPulseCopies, PulseSeries, RedisPulse

    return PulseSeries(RedisPulse(clients.cache), DynamoPulseCopies(clients.dynamodb(), get_settings().inventory_table))
