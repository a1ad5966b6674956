"""An event's ballot applications as CSV, for its director (issue 43): one row per application,
whatever its state, with its group and its place in the drawn line once drawn.

Paged like the registrations' export (``participants.service.build_export_page``): the cursor is
*(shard, rows of that shard already sent)*; a shard's rows come in key order (the application id),
which never changes, so a page boundary never moves. A withdrawn application's row keeps its id,
group and times, not its runner (their data went at withdrawal).
"""

from __future__ import annotations

from collections.abc import Iterator

from racecap.ballot.models import Application
from racecap.ballot.store import DrawStore
from racecap.participants.service import Position, csv_line, decode_cursor, encode_cursor
from racecap.questions.service import Questions
from racecap.races.models import Event, Race

BALLOT_CSV_COLUMNS = (
    "applicationId",
    "state",  # PENDING (address not confirmed: it does not count), CONFIRMED, WITHDRAWN
    "groupId",  # the group drawn as one; "" alone
    "groupSize",
    "firstName",
    "lastName",
    "email",
    "dateOfBirth",
    "appliedAt",
    "confirmedAt",
    "withdrawnAt",
)


class BallotExport:
    def __init__(self, store: DrawStore, answers: Questions | None = None) -> None:
        self._store = store
        self._answers = answers

    def lines(self, race: Race, event: Event, *, cursor: str | None = None) -> Iterator[tuple[str, str | None]]:
        """CSV lines (the header first on the first page), each with the cursor resuming after it.
        The event's questions (any version asked) are columns after the fixed ones, as in the
        registrations' export."""
        pos = decode_cursor(cursor)
        questions = self._answers.columns(race.raceId, [event.eventId]) if self._answers else []
        ids = [qid for qid, _ in questions]
        if cursor is None:
            yield csv_line((*BALLOT_CSV_COLUMNS, *(f"{label} [{qid}]" for qid, label in questions))), encode_cursor(pos)
        for shard in self._store.shards():
            if shard < pos.event:
                continue
            skip = pos.after_bib if shard == pos.event else 0
            apps = self._store.applications(race.raceId, event.eventId, shard, confirmed_only=False)
            for n, app in enumerate(apps, start=1):
                if n > skip:
                    cells = (
                        self._answers.cells(race.raceId, event.eventId, app.answers, app.questionsVersion, ids)
                        if self._answers is not None and ids
                        else []
                    )
                    yield csv_line((*_row(app), *cells)), encode_cursor(Position(shard, n))
        yield "", None


def _row(a: Application) -> tuple[object, ...]:
    return (a.applicationId, a.state, a.groupId or "", a.groupSize, a.firstName, a.lastName, a.email,
            a.dateOfBirth, a.appliedAt, a.confirmedAt or "", a.withdrawnAt or "")  # fmt: skip
