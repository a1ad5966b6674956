"""The ballot's draw as a batch job (issue 43, slice 3): run by ``BallotDraw`` every minute for each
ballot whose draw time has come, in three steps, each safe to repeat and each recorded on the
draw's item (``DRAW``) so that a run stopping before its deadline is taken on by the next:

1. **Order.** The seed is read and checked against the commitment the race page published (any
   other seed is refused: nothing is drawn). The confirmed applications' ids (and group ids) are
   read from every shard at once, ids only; the order and the winners are ``ballot.draw``'s. The
   line (winners first, then everyone else in drawn order; a group's runners side by side) and the
   published list (``ticket,size`` by id) are written as pages of ``PAGE_SIZE`` rows, then the
   draw's record, once. The same seed and applications give the same pages, byte for byte.
2. **Line.** Page by page, each runner becomes a WAITING entry of the event's waitlist with their
   place in the line as its number, and every runner after the winners is sent one result email
   ("you are number N on the waitlist", its key the application's: a re-run sends nothing twice).
   Then the LINE opens in one transaction, with the winners' places moved from the public shards
   to its pool: the waitlist's offer batch offers them in order, the winners' days to pay as the
   offer window, and an unclaimed offer passes to the next in line, as the waitlist does. The
   winners' one email is that offer.
3. **Done**: out of the job's to-do list.

A million applications: ids only in memory (a few hundred MB: ``docs/ballot.md``), the sort in
seconds; the line's writes (a million entries, 25 to a batch write) are what takes time, and the
cursor lets them span runs.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Protocol

from racecap.aws.keys import waitlist_entry_id
from racecap.aws.queues import MessageQueue
from racecap.ballot import draw
from racecap.ballot.models import DrawRecord
from racecap.ballot.store import LIST, ORDER, DrawStore
from racecap.emails.models import EmailMessage
from racecap.errors import RaceNotFound
from racecap.observability import logger, metrics
from racecap.races.catalog import RaceDefinitions
from racecap.races.models import Event, Race
from racecap.waitlist.models import WaitlistEntry

PAGE_SIZE = 10_000  # rows per ORDER#/LIST# item: ~30 bytes a row, well under DynamoDB's 400 KB
MARGIN_S = 30.0  # a run stops this long before its deadline; the next goes on
RESULT_KIND = "ballot-result"


class BallotLine(Protocol):
    """The waitlist's side (``waitlist.store.DynamoBallotLine``)."""

    def put_entries(self, entries: list[WaitlistEntry]) -> None: ...

    def open_line(
        self, race_id: str, event_id: str, waiting: int, takes: dict[str, int], caps: dict[str, int], at: str
    ) -> bool: ...


Shards = Callable[[str, str], list[tuple[str, int, int]]]  # (race, event) -> [(shard, cap, taken)]


class DrawJob:
    def __init__(
        self,
        catalog: RaceDefinitions,
        store: DrawStore,
        line: BallotLine,
        shards: Shards,
        emails: MessageQueue,
        site_url: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._catalog = catalog
        self._store = store
        self._line = line
        self._shards = shards
        self._emails = emails
        self._site = site_url.rstrip("/")
        self._clock = clock

    def run(self, remaining_s: Callable[[], float]) -> dict[str, int]:
        """Every ballot due, as far as the time left allows."""
        counts = {"due": 0, "done": 0}
        for race_id, event_id in self._store.due(self._now().isoformat()):
            counts["due"] += 1
            if remaining_s() < MARGIN_S:
                break
            try:
                state = self.draw(race_id, event_id, remaining_s)
            except Exception:  # one ballot failing (a refused seed) must not hold the others up
                logger.exception("ballot draw failed", extra={"raceId": race_id, "eventId": event_id})
                metrics.add_metric(name="BallotDrawFailed", unit="Count", value=1)
                counts["failed"] = counts.get("failed", 0) + 1
                continue
            if state == "DONE":
                counts["done"] += 1
        return counts

    def draw(self, race_id: str, event_id: str, remaining_s: Callable[[], float] = lambda: 900.0) -> str:
        """One ballot's draw, from wherever the last run stopped; its state after this run."""
        try:
            race, events = self._catalog.definition(race_id, fresh=True)
        except RaceNotFound:
            self._store.done(race_id, event_id)
            return "GONE"
        event = next((e for e in events if e.eventId == event_id), None)
        ballot = event.ballot if event else None
        if event is None or ballot is None or not ballot.enabled:
            self._store.done(race_id, event_id)
            return "GONE"
        if ballot.drawAt is None or self._now() < ballot.drawAt:
            return "NOT_DUE"  # the director moved the draw later: its due time moved too
        record = self._store.draw_record(race_id, event_id) or self._order(race, event)
        if record.state == "ORDERED":
            record = self._write_line(race, event, record, remaining_s)
        if record.state == "LINED":
            record = self._store.advance(record, state="DONE", doneAt=self._now().isoformat())
            self._store.done(race_id, event_id)
            logger.info("ballot drawn", extra={"raceId": race_id, "eventId": event_id, "winners": record.winners})
        return record.state

    # -- 1. the order --------------------------------------------------------------------------------
    def _order(self, race: Race, event: Event) -> DrawRecord:
        kept = self._store.seed(race.raceId, event.eventId)
        if kept is None or event.ballot.commitment is None:
            raise RuntimeError(f"ballot {race.raceId}/{event.eventId} has no seed")
        seed, _ = kept
        draw.check_seed(seed, event.ballot.commitment)  # the published commitment, not the stored copy
        started = time.monotonic()
        rows = self._read_rows(race.raceId, event.eventId)
        members: dict[str, list[str]] = {}
        for app_id, group_id in rows:
            if group_id is not None:
                members.setdefault(group_id, []).append(app_id)
        tickets = draw.tickets_of(rows)
        del rows
        drawn = draw.order(seed, tickets)
        places = event.ballot.places(event.cap)
        result = draw.winners(drawn, places)
        line = [
            (app_id, t.id if t.id in members else "")
            for t in (*result.winners, *result.rest)
            for app_id in (sorted(members[t.id]) if t.id in members else [t.id])
        ]
        pages = self._write_pages(race.raceId, event.eventId, ORDER, [f"{a},{g}" for a, g in line])
        listed = io.StringIO()
        draw.write_list(tickets, listed)
        list_pages = self._write_pages(race.raceId, event.eventId, LIST, listed.getvalue().splitlines())
        record = DrawRecord(
            raceId=race.raceId,
            eventId=event.eventId,
            state="ORDERED",
            seed=seed,
            commitment=event.ballot.commitment,
            places=places,
            applications=len(line),
            tickets=len(tickets),
            winners=sum(t.size for t in result.winners),
            winningTickets=len(result.winners),
            pages=pages,
            listPages=list_pages,
            drawnAt=self._now().isoformat(),
        )
        self._store.put_draw(record)
        metrics.add_metric(name="BallotDrawSeconds", unit="Seconds", value=time.monotonic() - started)
        kept_record = self._store.draw_record(race.raceId, event.eventId)
        return kept_record or record

    def _read_rows(self, race_id: str, event_id: str) -> list[tuple[str, str | None]]:
        """Every shard at once, each on a thread (ids only)."""
        with ThreadPoolExecutor(max_workers=len(self._store.shards())) as pool:
            parts = list(pool.map(lambda s: list(self._store.ticket_rows(race_id, event_id, s)), self._store.shards()))
        return [row for part in parts for row in part]

    def _write_pages(self, race_id: str, event_id: str, prefix: str, lines: list[str]) -> int:
        pages = 0
        for start in range(0, max(len(lines), 1), PAGE_SIZE):
            self._store.put_page(race_id, event_id, prefix, pages, "\n".join(lines[start : start + PAGE_SIZE]))
            pages += 1
        return pages

    # -- 2. the line -----------------------------------------------------------------------------------
    def _write_line(self, race: Race, event: Event, record: DrawRecord, remaining_s: Callable[[], float]) -> DrawRecord:
        for p in range(record.lined, record.pages):
            if remaining_s() < MARGIN_S:
                return record  # the next run goes on from page p
            rows = _rows(self._store.page(race.raceId, event.eventId, ORDER, p) or "")
            apps = self._store.applications_by_id(race.raceId, event.eventId, [a for a, _ in rows])
            entries: list[WaitlistEntry] = []
            results: list[EmailMessage] = []
            for i, (app_id, group_id) in enumerate(rows):
                app = apps.get(app_id)
                if app is None or not app.email:
                    continue  # purged since (its race's data): nobody to line up or to tell
                seq = p * PAGE_SIZE + i + 1
                entries.append(
                    WaitlistEntry(
                        entryId=waitlist_entry_id(race.raceId, event.eventId, app.email),
                        raceId=race.raceId,
                        eventId=event.eventId,
                        state="WAITING",
                        email=app.email,
                        firstName=app.firstName,
                        lastName=app.lastName,
                        seq=seq,
                        joinedAt=app.appliedAt,
                        confirmedAt=record.drawnAt,
                        ballotApplicationId=app_id,
                        groupId=group_id or None,
                    )
                )
                if seq > record.winners:
                    results.append(
                        self._result(race, event, app.applicationId, app.email, app.firstName, seq - record.winners)
                    )
            self._line.put_entries(entries)
            if results:
                self._emails.send_many(results)
            record = self._store.advance(record, lined=p + 1)
        takes, caps = self._takes(race.raceId, event.eventId, record.winners)
        if not self._line.open_line(race.raceId, event.eventId, record.applications, takes, caps, record.drawnAt):
            logger.info("ballot line already open", extra={"raceId": race.raceId, "eventId": event.eventId})
        return self._store.advance(record, state="LINED")

    def _takes(self, race_id: str, event_id: str, places: int) -> tuple[dict[str, int], dict[str, int]]:
        """``places`` spread over the shards with room (nobody holds first-come in a ballot event),
        and each shard's cap as read."""
        takes: dict[str, int] = {}
        caps: dict[str, int] = {}
        left = places
        for shard, cap, taken in sorted(self._shards(race_id, event_id)):
            caps[shard] = cap
            k = min(left, max(0, cap - taken))
            if k:
                takes[shard] = k
                left -= k
        if left:
            logger.warning("ballot places beyond the shards' room", extra={"raceId": race_id, "short": left})
        return takes, caps

    def _result(self, race: Race, event: Event, app_id: str, email: str, first: str, number: int) -> EmailMessage:
        return EmailMessage(
            kind=RESULT_KIND,
            dedupKey=f"{RESULT_KIND}:{app_id}",
            to=email,
            data={
                "firstName": first,
                "raceName": race.name,
                "eventName": event.name,
                "applicationId": app_id,
                "position": number,
                "raceUrl": f"{self._site}/#/races/{race.raceId}",
            },
        )

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)


def _rows(text: str) -> list[tuple[str, str]]:
    out = []
    for line in text.splitlines():
        app_id, _, group_id = line.partition(",")
        out.append((app_id, group_id))
    return out


def list_csv(pages: Iterable[str]) -> str:
    """The published list, whole, from its pages (the verification reads it as one file)."""
    text = "\n".join(p for p in pages if p)
    return text + "\n" if text else ""


__all__ = ["PAGE_SIZE", "DrawJob", "list_csv"]
