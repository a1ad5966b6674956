"""Race pages for runners, read through the caching hierarchy (see ``racecap.cache``).

Two kinds of data, cached differently (the paper, §3.2):
* the race definition changes only when a director edits it, so it is cached long and
  keyed by the race's version stamp — an edit orphans it at once;
* places left change with every hold, are only *displayed* here (holds decide with a
  conditional write, never with this number), so they are cached for two seconds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from racecap.cache import TieredCache
from racecap.errors import RaceNotFound
from racecap.places.store import Inventory
from racecap.races.models import (
    BallotView,
    Event,
    EventSummaryView,
    EventView,
    PublicEventStatus,
    PublicRaceStatus,
    Race,
    RaceList,
    RaceListItem,
    RaceSummaryView,
    RaceView,
)
from racecap.races.rules import rule_text
from racecap.races.store import RaceStore

DEFINITION_TTL = 300.0  # shared tier; the version stamp, not the TTL, is what invalidates


DEFINITION_LOCAL_TTL = 30.0


AVAILABILITY_TTL = 2.0


AVAILABILITY_LOCAL_TTL = 1.0


# The race list with every listed event's places: one entry, rebuilt at most this often for
# all environments (from the races' own cached definitions and places), so a list request
# costs no database read; a sell-out shows within about twice this plus the local copy.
LIST_TTL = 2.0


LIST_LOCAL_TTL = 1.0


def race_status(race: Race, now: datetime | None = None) -> PublicRaceStatus:
    now = now or datetime.now(UTC)
    if race.registrationState == "OPEN" and now < race.registrationClosesAt:
        return "OPEN"
    if race.registrationState == "CLOSED" or now >= race.registrationClosesAt:
        return "CLOSED"
    return "NOT_YET_OPEN"


def event_status(race_state: PublicRaceStatus, spots_left: int) -> PublicEventStatus:
    if race_state == "OPEN" and spots_left <= 0:
        return "SOLD_OUT"
    return race_state


def sold_out_flag(race_id: str, event_id: str) -> str:
    return f"soldout:{race_id}:{event_id}"


class RaceDefinitions(Protocol):
    """What the registration core reads of a race (``RaceCatalog`` is the cached one)."""

    def definition(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]: ...

    def for_runners(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]: ...

    def places_came_back(self, race_id: str, event_id: str) -> None: ...


class RaceCatalog:
    def __init__(self, store: RaceStore, inventory: Inventory, cache: TieredCache) -> None:
        self._store = store
        self._inventory = inventory
        self._cache = cache

    # -- the public pages ----------------------------------------------------
    def list_races(self) -> RaceList:
        version = self._cache.stamp("listing", self._store.listing_version)
        doc = self._cache.get_or_load(
            f"listing:v{version}:view", lambda: self._list_view(version), ttl=LIST_TTL, local_ttl=LIST_LOCAL_TTL
        )
        return RaceList.model_validate(doc)

    def _list_view(self, version: int) -> dict[str, Any]:
        docs = self._cache.get_or_load(
            f"listing:v{version}",
            lambda: [r.model_dump(mode="json") for r in self._store.list_published()],
            ttl=DEFINITION_TTL,
            local_ttl=DEFINITION_LOCAL_TTL,
        )
        items = []
        for race in (Race.model_validate(d) for d in docs):
            try:
                _, events = self.definition(race.raceId)
            except RaceNotFound:
                continue  # deleted between the two reads
            left = self.availability(race.raceId, events)
            status, now = race_status(race), datetime.now(UTC)
            items.append(
                RaceListItem(
                    **self._summary(race).model_dump(),
                    events=[
                        EventSummaryView(
                            eventId=e.eventId,
                            name=e.name,
                            spotsLeft=left.get(e.eventId, 0),
                            priceCents=e.price_at(now),
                            currency=e.currency,
                            status=event_status(status, left.get(e.eventId, 0)),
                        )
                        for e in events
                    ],
                )
            )
        return RaceList(races=items).model_dump(mode="json")

    def get_race(self, race_id: str) -> RaceView:
        race, events = self.for_runners(race_id)
        availability = self.availability(race_id, events)
        now = datetime.now(UTC)
        status = race_status(race)
        return RaceView(
            **self._summary(race).model_dump(),
            description=race.description,
            currency=race.currency,
            holdMinutes=race.holdMinutes,
            events=[
                EventView(
                    eventId=e.eventId,
                    name=e.name,
                    cap=e.cap,
                    spotsLeft=availability.get(e.eventId, 0),
                    priceCents=e.price_at(now),
                    currency=e.currency,
                    status=event_status(status, availability.get(e.eventId, 0)),
                    priceChanges=[t for t in e.priceTiers if t.startsAt > now],
                    minAge=e.minAge,
                    maxAge=e.maxAge,
                    ageRule=rule_text(e.minAge, e.maxAge),
                    teamMinSize=e.teamMinSize,
                    teamMaxSize=e.teamMaxSize,
                    waitlist=e.waitlist.enabled,
                    ballot=ballot_view(e, now),
                )
                for e in events
            ],
        )

    # -- building blocks shared with holds -----------------------------------
    def definition(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]:
        """The race and its events at its current version (``fresh``: the version read from
        Redis now rather than this environment's view of up to a second ago)."""
        version = self._cache.stamp(f"race:{race_id}", lambda: self._store.race_version(race_id), fresh=fresh)
        if version == 0:
            raise RaceNotFound(f"No race with id {race_id}.")

        def load() -> dict[str, Any] | None:
            found = self._store.get_race(race_id)
            if found is None:
                return None
            race, events = found
            return {
                "race": race.model_dump(mode="json"),
                "events": [e.model_dump(mode="json") for e in events],
            }

        doc = self._cache.get_or_load(
            f"race:{race_id}:v{version}:def", load, ttl=DEFINITION_TTL, local_ttl=DEFINITION_LOCAL_TTL
        )
        if doc is None:
            raise RaceNotFound(f"No race with id {race_id}.")
        return Race.model_validate(doc["race"]), [Event.model_validate(e) for e in doc["events"]]

    def for_runners(self, race_id: str, *, fresh: bool = False) -> tuple[Race, list[Event]]:
        """The race as runners may see it: a draft does not exist for them (404, no holds)."""
        race, events = self.definition(race_id, fresh=fresh)
        if race.is_draft:
            raise RaceNotFound(f"No race with id {race_id}.")
        return race, events

    def availability(self, race_id: str, events: list[Event]) -> dict[str, int]:
        return self._cache.get_or_load(
            f"race:{race_id}:avail",
            lambda: {e.eventId: self._inventory.usage(race_id, e.eventId).left for e in events},
            ttl=AVAILABILITY_TTL,
            local_ttl=AVAILABILITY_LOCAL_TTL,
        )

    def places_came_back(self, race_id: str, event_id: str) -> None:
        """A cap went up or a registration was cancelled: offer the places again at once."""
        self._cache.clear_flag(sold_out_flag(race_id, event_id))
        self._cache.delete(f"race:{race_id}:avail")

    def invalidate_listing(self) -> None:
        self._cache.bump("listing", self._store.listing_version())

    def invalidate(self, race_id: str, new_version: int) -> None:
        """After an edit: orphan the race's cached definition and the public listing."""
        self._cache.bump(f"race:{race_id}", new_version)
        self.invalidate_listing()
        self._cache.delete(f"race:{race_id}:avail")

    @staticmethod
    def _summary(race: Race) -> RaceSummaryView:
        return RaceSummaryView(
            raceId=race.raceId,
            name=race.name,
            location=race.location,
            raceDate=race.raceDate,
            timeZone=race.timeZone,
            status=race_status(race),
            registrationOpensAt=race.registrationOpensAt,
            registrationClosesAt=race.registrationClosesAt,
        )


def ballot_view(event: Event, now: datetime) -> BallotView | None:
    """The ballot as the race page shows it, once it has a window and a commitment."""
    b = event.ballot
    if b.opensAt is None or b.closesAt is None or b.drawAt is None or b.commitment is None or not b.enabled:
        return None
    return BallotView(
        phase=b.phase(now),
        opensAt=b.opensAt,
        closesAt=b.closesAt,
        drawAt=b.drawAt,
        places=b.places(event.cap),
        payDays=b.payDays,
        commitment=b.commitment,
    )
