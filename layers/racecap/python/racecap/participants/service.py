"""Who registered: the directors' paginated, searchable list and the CSV export.

Both walk a race's registrations event by event in bib order (the Registrations
table's ``gsi1``), so a cursor is just *(event, last bib seen)*: stable while runners
keep registering, and meaningless to anyone for another race.

**Search.** A number is a bib (one read per event); a whole email address is the
email's claim (one read). Anything else matches every word against first name, last
name and email, case-insensitively, reading the race's registrations in pages: a call
reads at most ``SEARCH_READ_BUDGET`` registrations and returns what matched with a
cursor to go on — DynamoDB has no text index, and a race has tens of thousands of rows,
not millions, so this costs cents and keeps every call short.

**Export.** A 50,000-row CSV is ~7 MB: more than a Lambda response may carry (6 MB),
and no S3 bucket is needed to get round that. The export is *paged by size and time*:
one response holds as many rows as fit in ``MAX_GZIP_BYTES`` gzipped (when the client
accepts gzip — 50,000 rows fit in one) or ``MAX_PLAIN_BYTES`` plain, and stops early if
the Lambda's time runs short; ``nextCursor`` (also in a ``Link: rel="next"`` header) gets
the rest, header-less, so pages concatenate into one file. The same code works on AWS
and on the local stack, for any race size.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from racecap.errors import EventNotFound, ValidationFailed
from racecap.ledger.models import ledger_state, refunded_of
from racecap.models import ActorKind, director_kind
from racecap.money import in_units
from racecap.participants.models import AnsweredPage, AnsweredRow
from racecap.questions.models import WaiverRecord
from racecap.races.models import Event, Race
from racecap.registration.models import (
    EMAIL_RE,
    RegistrationPhase,
    RegistrationRowData,
    _row,
    normalize_email,
)
from racecap.registration.store import RegistrationStore

if TYPE_CHECKING:
    from racecap.questions.service import Questions  # the answers' one implementation

PAGE_MAX = 500


SEARCH_READ_BUDGET = 5_000


_READ_PAGE = 500


# Lambda's response limit is 6 MB, after base64 for a binary (gzipped) body.
MAX_GZIP_BYTES = 4_000_000  # -> ~5.3 MB of base64


GZIP_PENDING_MARGIN = 512_000  # what the compressor may still hold back unflushed


MAX_PLAIN_BYTES = 4_500_000


TIME_MARGIN_S = 4.0  # stop a page this long before the function's deadline


CSV_COLUMNS = (
    "event",
    "bib",
    "firstName",
    "lastName",
    "email",
    "dateOfBirth",
    "status",
    "amountCents",
    "currency",
    "confirmedAt",
    "cancelledAt",
    "registrationId",
    # Added last, so the columns a director's sheet already reads by position stay put.
    "amount",  # amountCents in the currency's own units (25.00 USD; 2500 JPY, a zero-decimal currency)
    # The ledger (issue 25), in the currency's own units too: what was paid (0 for a free
    # entry), what was refunded in all (ours and outside), the ledger's last state, and how
    # many refunds were made outside Racecap (the provider's dashboard; flagged: > 0).
    "amountPaid",
    "amountRefunded",
    "ledgerState",
    "outsideRefunds",
    "code",  # the discount code the place was held with (racecap.codes), if any
    "discount",  # what it took off, in the currency's own units; amountPaid is what was paid
    "team",  # the team's name for a team entry (racecap.teams); amountPaid is the member's share
    # The waiver the runner accepted (racecap.questions): the version of its text, when, and
    # for a runner under 18 on race day the parent or guardian who accepted it too.
    "waiverVersion",
    "waiverAcceptedAt",
    "waiverGuardian",
    "refundFailures",  # refunds the provider failed after the fact (flagged: > 0): refund again
    "cancelledBy",  # who cancelled, in words (CANCELLED_BY_WORDS); empty for a live entry
    "transfers",  # how many times the place was handed to another runner (registration.transfer)
    "transferredAt",  # when it last was; the row's runner is the one who holds it now
    "switches",  # how many times the runner switched event (registration.switch)
    "switchedTo",  # on a SWITCHED row (the entry left for another event): the registration now
    "deferredTo",  # deferred: the next edition's race id (ledger.deferral); its code there is personal
    "deferralCredit",  # what the code there takes off, in the currency's units (paid here, kept in this ledger)
)


# Who cancelled a registration, as the export says it (by ``models.director_kind`` of its
# ``cancelledBy``): never a director's id, which means nothing on a sheet.
CANCELLED_BY_WORDS: dict[ActorKind, str] = {
    "runner": "runner",
    "director": "organiser",
    "provider": "payment provider",
    "system": "Racecap",
}


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Position:
    event: int  # index into the race's events, in their stored order
    after_bib: int


# A cursor is a position, "<event index>.<last bib>", and any position the pattern allows
# is a valid place to go on from (past the last event it is simply the end). It reveals
# nothing: it only ever moves within the director's own race.
CURSOR_PATTERN = r"^[0-9]{1,4}\.[0-9]{1,9}$"


def encode_cursor(pos: Position) -> str:
    return f"{pos.event}.{pos.after_bib}"


def decode_cursor(cursor: str | None) -> Position:
    if not cursor:
        return Position(0, 0)
    if not re.fullmatch(CURSOR_PATTERN, cursor):
        raise ValidationFailed("The cursor is not one this API gave out.", fields={"cursor": "Invalid."})
    event, bib = cursor.split(".")
    return Position(int(event), int(bib))


@dataclass(frozen=True)
class ExportPage:
    body: bytes | str  # gzipped bytes, or text
    lines: int  # CSV lines in this page, the header included
    next_cursor: str | None
    gzipped: bool


class Participants:
    def __init__(self, registrations: RegistrationStore, answers: Questions | None = None) -> None:
        self._regs = registrations
        self._answers = answers

    # -- the list ----------------------------------------------------------------------------
    def page(
        self,
        race: Race,
        events: list[Event],
        *,
        q: str | None = None,
        event_id: str | None = None,
        status: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> AnsweredPage:
        chosen = _chosen(race, events, event_id)
        query = (q or "").strip()
        if query.isdigit():
            found = [self._regs.by_bib(race.raceId, e.eventId, int(query)) for e in chosen]
            return self._page(race, [r for r in found if r and _wanted(r, status)], None)
        if EMAIL_RE.match(normalize_email(query)):
            reg = self._regs.by_email(race.raceId, normalize_email(query))
            row = _row(reg) if reg is not None else None
            keep = row is not None and row["eventId"] in {e.eventId for e in chosen} and _wanted(row, status)
            return self._page(race, [row] if row is not None and keep else [], None)
        words = query.lower().split()
        rows: list[RegistrationRowData] = []
        pos = decode_cursor(cursor)
        read = 0
        while pos.event < len(chosen) and len(rows) < limit and read < SEARCH_READ_BUDGET:
            want = limit - len(rows) if not words and not status else _READ_PAGE
            batch, more = self._regs.event_page(race.raceId, chosen[pos.event].eventId, pos.after_bib, want)
            for item in batch:
                read += 1
                pos = Position(pos.event, int(item["bib"]))
                if _matches(item, words) and _wanted(item, status):
                    rows.append(item)
                    if len(rows) == limit:
                        break
            if len(rows) < limit and not more:
                pos = Position(pos.event + 1, 0)
        return self._page(race, rows, encode_cursor(pos) if pos.event < len(chosen) else None)

    def _page(self, race: Race, items: list[RegistrationRowData], cursor: str | None) -> AnsweredPage:
        rows = []
        for item in items:
            row = AnsweredRow.model_validate(
                {k: v for k, v in item.items() if v is not None and k not in ("answers", "waiver")}
                | {"refundedCents": refunded_of(item)}
            )
            if item.get("waiver"):
                row.waiver = WaiverRecord.model_validate_json(str(item.get("waiver")))
            if self._answers is not None and item.get("answers"):
                row.answers = self._answers.described(
                    race.raceId, row.eventId, item.get("answers"), item.get("questionsVersion")
                )
            rows.append(row)
        return AnsweredPage(registrations=rows, nextCursor=cursor)

    # -- the export ------------------------------------------------------------------------------
    def export_lines(
        self, race: Race, events: list[Event], *, cursor: str | None = None, include_cancelled: bool = False
    ) -> Iterator[tuple[str, str | None]]:
        """CSV lines — the header first on the first page — each with the cursor that
        resumes right after it (None after the last one)."""
        names = {e.eventId: e.name for e in events}
        pos = decode_cursor(cursor)
        # One column per question any event of the race asks or asked, after the fixed ones
        # (a director's sheet reading those by position keeps working). Every page has the
        # same columns: they come from saved versions only, never from the rows read.
        questions = self._answers.columns(race.raceId, [e.eventId for e in events]) if self._answers else []
        ids = [qid for qid, _ in questions]
        if cursor is None:
            yield csv_line((*CSV_COLUMNS, *(f"{label} [{qid}]" for qid, label in questions))), encode_cursor(pos)
        for index in range(pos.event, len(events)):
            after = pos.after_bib if index == pos.event else 0
            for item in self._regs.event_rows(race.raceId, events[index].eventId, after):
                if item.get("status") != RegistrationPhase.CONFIRMED and not include_cancelled:
                    continue
                row = (
                    names.get(item["eventId"], item.get("eventName", "")),
                    item["bib"],
                    item.get("firstName", ""),
                    item.get("lastName", ""),
                    item.get("email", ""),
                    item.get("dateOfBirth", ""),
                    item.get("status", ""),
                    item.get("amountCents", ""),
                    item.get("currency", ""),
                    item.get("confirmedAt", ""),
                    item.get("cancelledAt", ""),
                    item.get("registrationId", ""),
                    _in_units(item),
                    _in_units(item),
                    _in_units(item, refunded_of(item)),
                    ledger_state(item),
                    item.get("outsideRefunds", 0),
                    item.get("code", ""),
                    _in_units(item, item.get("discountCents")) if item.get("discountCents") else "",
                    item.get("teamName", ""),
                    *_waiver_cells(item.get("waiver")),
                    item.get("refundFailures", 0),
                    _cancelled_by(item),
                    item.get("transfers", 0),
                    item.get("transferredAt", ""),
                    item.get("switches", 0),
                    item.get("switchedTo", ""),
                    item.get("deferredTo", ""),
                    _in_units(item, item.get("deferralCreditCents")) if item.get("deferralCreditCents") else "",
                    *(
                        self._answers.cells(
                            race.raceId, item["eventId"], item.get("answers"), item.get("questionsVersion"), ids
                        )
                        if self._answers is not None and ids
                        else ()
                    ),
                )
                yield csv_line(row), encode_cursor(Position(index, int(item["bib"])))
        yield "", None


def _cancelled_by(item: RegistrationRowData) -> str:
    """Who cancelled the registration, in words; "" while it is confirmed (a live entry)."""
    if item.get("status") == RegistrationPhase.CONFIRMED:
        return ""
    return CANCELLED_BY_WORDS[director_kind(item.get("cancelledBy") or "")]


def _waiver_cells(waiver: str | None) -> tuple[Any, str, str]:
    """The waiver's columns: its version, when it was accepted, the guardian ("" for none)."""
    if not waiver:
        return "", "", ""
    record = WaiverRecord.model_validate_json(waiver)
    return record.version, record.acceptedAt.isoformat(), record.guardianName or ""


def _in_units(item: Mapping[str, Any], amount: int | None = None) -> str:
    """``amount`` (the row's amountCents when None) in the row's currency's own units."""
    value = item.get("amountCents") if amount is None else amount
    currency = item.get("currency")
    if value in (None, "") or not currency:
        return ""
    return str(in_units(int(value), str(currency)))


def build_export_page(
    lines: Iterator[tuple[str, str | None]], *, gzip: bool, remaining_s: float | None = None
) -> ExportPage:
    """As many lines as fit one Lambda response (see the module doc), and where to go on.

    ``remaining_s`` is the invocation's time left; the page ends ``TIME_MARGIN_S`` before it."""
    deadline = None if remaining_s is None else time.monotonic() + remaining_s
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31) if gzip else None  # wbits 31: gzip framing
    chunks: list[bytes] = []
    text: list[str] = []
    size = 0
    count = 0
    resume: str | None = None
    for n, (line, after) in enumerate(lines):
        if after is None:  # the end: no more pages
            resume = None
            break
        if compressor is not None:
            if size + GZIP_PENDING_MARGIN > MAX_GZIP_BYTES:
                break
            out = compressor.compress(line.encode())
            size += len(out)
            chunks.append(out)
        else:
            cost = len(json.dumps(line))  # what the line costs inside the JSON response
            if size + cost > MAX_PLAIN_BYTES:
                break
            size += cost
            text.append(line)
        count += 1
        resume = after
        if deadline is not None and n % 1000 == 0 and time.monotonic() > deadline - TIME_MARGIN_S:
            break
    else:
        resume = None
    if compressor is not None:
        chunks.append(compressor.flush())
        return ExportPage(b"".join(chunks), count, resume, True)
    return ExportPage("".join(text), count, resume, False)


# -- helpers -----------------------------------------------------------------------------------
def _chosen(race: Race, events: list[Event], event_id: str | None) -> list[Event]:
    if event_id is None:
        return events
    chosen = [e for e in events if e.eventId == event_id]
    if not chosen:
        raise EventNotFound(f"Race {race.raceId} has no event {event_id}.")
    return chosen


def _matches(item: RegistrationRowData, words: list[str]) -> bool:
    if not words:
        return True
    haystack = f"{item.get('firstName', '')} {item.get('lastName', '')} {item.get('email', '')}".lower()
    return all(w in haystack for w in words)


def _wanted(item: RegistrationRowData, status: str | None) -> bool:
    return status is None or item.get("status") == status


def csv_line(values: tuple[Any, ...]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(_safe(v) for v in values)
    return out.getvalue()


def _safe(value: Any) -> Any:
    """Spreadsheets run a cell that starts with = + - @ as a formula: runners type names."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value
