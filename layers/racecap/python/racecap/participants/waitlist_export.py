"""The race's waitlists as CSV, for its director (issue 40): one row per entry of every event's
list, in line order, with its place, its state and what happened to its offer.

A sheet of rows rather than a few totals: the figures the stats show (the length, offers out,
accepted, expired) are each a count of one column's value here (``state`` WAITING; ``offerState``
OFFERED, CLAIMED, EXPIRED), and the rows say who, which a director writing to the runners on the
list needs. Every event's list is in it, an event whose list was switched off since included (its
entries are still personal data the director holds until the retention purge deletes them).

Paged like the registrations' export (``participants.service.build_export_page``): the cursor is
*(event, rows of that event already sent)*. Rows come in line order, by join number, then the
entries still to confirm (no number yet) by when they joined: a number is never given twice nor
taken back, so a page boundary moves only if an entry confirms during the export (it may then
appear twice, never be missed). A list is a few thousand entries, so one page nearly always holds
the whole race.
"""

from __future__ import annotations

from collections.abc import Iterator

from racecap.participants.service import Position, csv_line, decode_cursor, encode_cursor
from racecap.races.models import Event, Race
from racecap.waitlist.models import Offer, WaitlistEntry
from racecap.waitlist.rules import position
from racecap.waitlist.store import WaitlistStore

WAITLIST_CSV_COLUMNS = (
    "event",
    "number",  # the join number, given when the address was confirmed
    "position",  # number - head while WAITING (1: next to be offered a place)
    "state",  # PENDING, WAITING, OFFERED, LEFT, REMOVED
    "firstName",
    "lastName",
    "email",  # "" once the runner left: their data is dropped then
    "joinedAt",
    "confirmedAt",
    "offerState",  # OFFERED (out), CLAIMED, EXPIRED, DECLINED, USELESS (registered another way), CLOSED
    "offeredAt",
    "offerExpiresAt",
    "claimedAt",
    "offerEndedAt",  # when an offer not claimed ended (expired, declined, passed on, closed)
    "leftAt",
    "removedAt",
    "entryId",  # what the console, the API and the audit trail name an entry by
    "eventId",
)

_ENDED = frozenset({"EXPIRED", "DECLINED", "USELESS", "CLOSED"})


def line_order(entry: WaitlistEntry) -> tuple[bool, int, str, str]:
    """By join number; the entries still to confirm (no number) after, by when they joined."""
    return (entry.seq is None, entry.seq or 0, entry.joinedAt, entry.entryId)


class WaitlistExport:
    def __init__(self, store: WaitlistStore) -> None:
        self._store = store

    def lines(self, race: Race, events: list[Event], *, cursor: str | None = None) -> Iterator[tuple[str, str | None]]:
        """CSV lines — the header first on the first page — each with the cursor that resumes
        right after it (None after the last one), as ``build_export_page`` takes them."""
        pos = decode_cursor(cursor)
        if cursor is None:
            yield csv_line(WAITLIST_CSV_COLUMNS), encode_cursor(pos)
        for index in range(pos.event, len(events)):
            event = events[index]
            entries = sorted(self._store.entries(race.raceId, event.eventId), key=line_order)
            if not entries:
                continue
            head = self._store.line(race.raceId, event.eventId).head
            offers = {o.entryId: o for o in self._store.offers(race.raceId, event.eventId)}
            skip = pos.after_bib if index == pos.event else 0
            for n, entry in enumerate(entries[skip:], start=skip + 1):
                yield csv_line(_row(event, entry, head, offers.get(entry.entryId))), encode_cursor(Position(index, n))
        yield "", None


def _row(event: Event, entry: WaitlistEntry, head: int, offer: Offer | None) -> tuple[object, ...]:
    waiting = entry.state == "WAITING" and entry.seq is not None
    ended = offer.endedAt if offer is not None else None
    return (
        event.name,
        entry.seq if entry.seq is not None else "",
        position(entry.seq, head) if waiting and entry.seq is not None else "",
        entry.state,
        entry.firstName,
        entry.lastName,
        entry.email,
        entry.joinedAt,
        entry.confirmedAt or "",
        offer.state if offer else "",
        offer.offeredAt if offer else "",
        offer.expiresAt if offer else "",
        (ended or "") if offer is not None and offer.state == "CLAIMED" else "",
        (ended or "") if offer is not None and offer.state in _ENDED else "",
        entry.leftAt or "",
        entry.removedAt or "",
        entry.entryId,
        event.eventId,
    )
