"""Closing an event's waitlist (issue 40, slice 2): when registration closes, or the director
closes the list. The line is marked ``closed`` first (from then on no freed place goes to the pool
and no offer is made: ``places.returns`` and the offers both read it), then every offer still out
ends (CLOSED) with its place back on its shard, the pool goes back to the shards, and every runner
still waiting, or whose offer the close ended, gets one "the list has closed" email (one per entry,
however often this runs; the latter's says the offered place went with it). A place already
claimed stays the runner's hold; unpaid, it goes to its shard (the line is closed).
Safe to repeat: each step finds the state it leaves."""

from __future__ import annotations

import time
from collections.abc import Callable

from racecap.aws.queues import MessageQueue
from racecap.aws.transactions import ConditionFailed, TransactItem
from racecap.emails.models import EmailMessage
from racecap.observability import logger, metrics
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event
from racecap.waitlist.rules import iso
from racecap.waitlist.store import WaitlistStore

CLOSED_KIND = "waitlist-closed"
GIVE_BACK_TRIES = 5


class WaitlistClosing:
    def __init__(
        self,
        store: WaitlistStore,
        catalog: RaceDefinitions,
        emails: MessageQueue,
        came_back: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._emails = emails
        self._came_back = came_back
        self._clock = clock

    def closed(self, race_id: str, events: list[Event]) -> None:
        """Registration closed (the window's callback): every event's list with one closes."""
        for event in events:
            if event.waitlist.enabled:
                try:
                    self.close(race_id, event.eventId)
                except Exception:
                    # The offers' batch closes a line with work it finds after the close, next run.
                    logger.exception("a waitlist did not close", extra={"raceId": race_id, "eventId": event.eventId})

    def close(self, race_id: str, event_id: str, also: list[TransactItem] | None = None) -> dict[str, int]:
        """``also``: written with the mark (the director's audit entry)."""
        self._store.close_line(race_id, event_id, iso(self._clock()), also)
        ended = 0
        for offer in self._store.offers(race_id, event_id):
            if offer.state != "OFFERED":
                continue
            try:
                self._store.end_offer(offer, "CLOSED", iso(self._clock()))
                ended += 1
            except ConditionFailed:
                continue  # claimed or ended meanwhile
        returned = self._return_pool(race_id, event_id)
        if ended or returned:
            self._store.rest(race_id, event_id)
            if self._came_back is not None:
                self._came_back(race_id, event_id)
        told = self._tell_the_waiting(race_id, event_id)
        metrics.add_metric(name="WaitlistClosed", unit="Count", value=1)
        return {"offersEnded": ended, "placesReturned": returned + ended, "told": told}

    def _return_pool(self, race_id: str, event_id: str) -> int:
        for _ in range(GIVE_BACK_TRIES):
            line = self._store.line(race_id, event_id)
            if line.pool <= 0:
                return 0
            try:
                self._store.give_back(race_id, event_id, line, dict(line.pool_by_shard))
                return line.pool
            except ConditionFailed:
                continue  # a place was pooled or someone left meanwhile: read again
        raise RuntimeError("the waitlist's pool kept changing while it closed")

    def _tell_the_waiting(self, race_id: str, event_id: str) -> int:
        race, events = self._catalog.definition(race_id)
        event = next((e for e in events if e.eventId == event_id), None)
        # An offer the close ended leaves its entry OFFERED (the entry is not in the transaction):
        # that runner was told a place was theirs to claim, so they hear it went with the list.
        ended = {o.entryId for o in self._store.offers(race_id, event_id) if o.state == "CLOSED"}
        told = 0
        for entry in self._store.entries(race_id, event_id):
            offer_ended = entry.state == "OFFERED" and entry.entryId in ended
            if not (entry.state == "WAITING" or offer_ended) or not entry.email:
                continue
            self._emails.send(
                EmailMessage(
                    kind=CLOSED_KIND,
                    dedupKey=f"{CLOSED_KIND}:{entry.entryId}",
                    to=entry.email,
                    data={
                        "firstName": entry.firstName,
                        "raceName": race.name,
                        "eventName": event.name if event else event_id,
                        "entryId": entry.entryId,
                        "offerEnded": offer_ended,
                    },
                )
            )
            told += 1
        return told
