"""The director's side of an event's ballot: its settings, and the figures while it runs.

* **Settings** (the window, the draw time, places kept out of the draw, the winners' days to pay)
  may change until the window opens, never after: applicants were told them. The first save
  draws the event's secret seed (kept once, in its own item: ``ballot.store``) and publishes its
  commitment with the settings, so the race page shows it before any application is taken.
* **Figures**: confirmed applications, withdrawn, and confirmations per day in the race's zone,
  from the ballot's counter items (a handful of reads whatever the number of applications).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from racecap.ballot import draw
from racecap.ballot.models import BallotAdminView, BallotDay, BallotFields
from racecap.ballot.store import BallotStore
from racecap.errors import BallotStarted, EventNotFound, ValidationFailed
from racecap.models import Director
from racecap.races.models import BallotSettings, Event, Race
from racecap.setup.service import RaceAdmin


class BallotAdmin:
    def __init__(
        self,
        races: RaceAdmin,
        store: BallotStore,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._races = races
        self._store = store
        self._clock = clock

    def set(self, director: Director, race_id: str, event_id: str, fields: BallotFields) -> BallotAdminView:
        def decide(race: Race, event: Event) -> BallotSettings:
            now = self._clock()
            if event.ballot.phase(now) not in ("NONE", "UPCOMING"):
                raise BallotStarted(f"The ballot for {event.name} has opened: its settings are fixed.")
            opens, closes, draws = (_utc(t, race.timeZone) for t in (fields.opensAt, fields.closesAt, fields.drawAt))
            _check_times(race, now, opens, closes, draws)
            if fields.keptPlaces >= event.cap:
                message = f"Keep fewer places than the cap ({event.cap}): at least one must be drawn."
                raise ValidationFailed(message, fields={"keptPlaces": message})
            seed, commitment = self._seed(race_id, event_id, now)
            del seed  # kept in the store until the draw reveals it
            return BallotSettings(
                enabled=True,
                opensAt=opens,
                closesAt=closes,
                drawAt=draws,
                keptPlaces=fields.keptPlaces,
                payDays=fields.payDays,
                commitment=commitment,
            )

        race, event = self._races.set_ballot(director, race_id, event_id, decide)
        assert event.ballot.drawAt is not None
        self._store.schedule(race_id, event_id, event.ballot.drawAt.isoformat())
        return self._view(race, event)

    def get(self, director: Director, race_id: str, event_id: str) -> BallotAdminView:
        race, events = self._races.owned(director, race_id)
        event = next((e for e in events if e.eventId == event_id), None)
        if event is None:
            raise EventNotFound(f"Race {race_id} has no event {event_id}.")
        return self._view(race, event)

    def _seed(self, race_id: str, event_id: str, now: datetime) -> tuple[str, str]:
        kept = self._store.seed(race_id, event_id)
        if kept is not None:
            return kept
        seed = draw.new_seed()
        return self._store.keep_seed(race_id, event_id, seed, draw.commitment(seed), now.isoformat())

    def _view(self, race: Race, event: Event) -> BallotAdminView:
        counts = self._store.counts(race.raceId, event.eventId) if event.ballot.enabled else None
        return BallotAdminView(
            raceId=race.raceId,
            eventId=event.eventId,
            settings=event.ballot,
            phase=event.ballot.phase(self._clock()),
            places=event.ballot.places(event.cap),
            confirmed=counts.confirmed if counts else 0,
            withdrawn=counts.withdrawn if counts else 0,
            byDay=[BallotDay(day=d, applications=n) for d, n in sorted(counts.by_day.items()) if n] if counts else [],
        )


def _utc(value: datetime, zone: str) -> datetime:
    """A time given without an offset is the race's local time."""
    return (value if value.tzinfo else value.replace(tzinfo=ZoneInfo(zone))).astimezone(UTC)


def _check_times(race: Race, now: datetime, opens: datetime, closes: datetime, draws: datetime) -> None:
    problems: dict[str, str] = {}
    if opens <= now:
        problems["opensAt"] = "Must be in the future: the commitment is published before the window opens."
    if closes <= opens:
        problems["closesAt"] = "Must be after opensAt."
    if draws < closes:
        problems["drawAt"] = "Must be at or after closesAt."
    race_day = datetime.fromisoformat(race.raceDate).replace(tzinfo=ZoneInfo(race.timeZone))
    if "drawAt" not in problems and draws >= race_day:
        problems["drawAt"] = f"Must be before race day ({race.raceDate}): winners need days to pay."
    if problems:
        raise ValidationFailed(next(iter(problems.values())), fields=problems)
