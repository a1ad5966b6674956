"""The demo race `make run` shows: several events with caps and prices, registration open."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from local.auth import DEFAULT_DIRECTOR, director_sub
from local.runtime import install_layer_path

install_layer_path()

from racecap.places.wiring import inventory  # noqa: E402
from racecap.races.wiring import race_store  # noqa: E402
from racecap.setup.models import EventDraft, RaceDraft  # noqa: E402
from racecap.setup.service import RaceAdmin  # noqa: E402

# The director `make token` signs in as by default: the demo race is theirs to manage.
DEMO_DIRECTOR = director_sub(DEFAULT_DIRECTOR)


def demo_draft(now: datetime | None = None) -> RaceDraft:
    now = now or datetime.now(UTC)
    return RaceDraft(
        name="Racecap City Marathon",
        location="Riverside Park",
        raceDate=(now + timedelta(days=120)).date().isoformat(),
        description="Four distances along the river. Places are limited: hold one, then register.",
        currency="USD",
        registrationOpensAt=now - timedelta(minutes=1),
        registrationClosesAt=now + timedelta(days=60),
        holdMinutes=10,
        listing="LISTED",
        events=[
            EventDraft(name="Marathon", cap=500, priceCents=9500),
            EventDraft(name="Half Marathon", cap=1000, priceCents=6500),
            EventDraft(name="10K", cap=2000, priceCents=3500),
            EventDraft(name="Kids 1K", cap=20, priceCents=1000),
        ],
    )


def seed_demo(owner: str = DEMO_DIRECTOR) -> str:
    """The demo race, owned by ``owner`` (a director's ``sub``)."""
    race = RaceAdmin(race_store(), inventory()).create_race(owner, demo_draft(), open_now=True)
    return race.raceId
