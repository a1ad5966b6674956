"""A director's results CSV, checked line by line.

Columns (header names are case-insensitive; order is free):

    bib          required: a bib of a confirmed registration in this event
    chip_time    H:MM:SS, MM:SS, optionally .s to .sss — required for finishers ranked by chip
    gun_time     the same — required for finishers ranked by gun time
    status       finished (or empty), DNF, DNS, DQ
    category     optional, e.g. the gender division (also accepted as ``gender``); left empty
                 (or left out), the runner's answer to the built-in division question
    split_<name> optional, any number: times at intermediate points (``split_10k``)

Names and age on race day come from the registrations, never from the file. Every
problem is reported as ``(line, reason)`` with the file's own line numbers (the header
is line 1), and a file with any problem changes nothing.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from datetime import date

from racecap.results.ranking import STATUSES, Runner, age_group

MAX_ROWS = 100_000
MAX_ERRORS_REPORTED = 500
_TIME = re.compile(r"^(?:(\d{1,2}):)?([0-5]?\d):([0-5]\d)(?:\.(\d{1,3}))?$")
_ALIASES = {
    "bib": "bib",
    "chip_time": "chip",
    "chiptime": "chip",
    "chip": "chip",
    "gun_time": "gun",
    "guntime": "gun",
    "gun": "gun",
    "status": "status",
    "category": "category",
    "gender": "category",
}
_STATUS_WORDS = {"": "FINISHED", "FINISHED": "FINISHED", "FINISHER": "FINISHED", "FIN": "FINISHED", "DSQ": "DQ"}


@dataclass(frozen=True)
class Entrant:
    """What the registrations say about a bib."""

    first_name: str
    last_name: str
    date_of_birth: date | None
    # Once the race's personal data is deleted only the age on race day is left (retention.service).
    age_on_race_day: int | None = None
    # The runner's answer to the built-in division question (racecap.questions), if asked.
    division: str | None = None
    team: str | None = None  # a team entry's team name (racecap.teams)


@dataclass(frozen=True)
class SheetRules:
    categories: tuple[str, ...] = ("F", "M", "X")
    age_group_years: int = 5
    rank_by: str = "chip"  # or "gun"
    team_scoring: int = 3  # team standings: the best k members' times count


@dataclass
class Sheet:
    runners: list[Runner] = field(default_factory=list)
    split_names: list[str] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    error_count: int = 0
    has_category: bool = False

    def problem(self, line: int, reason: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS_REPORTED:
            self.errors.append((line, reason))


def parse_time(text: str) -> int | None:
    """Milliseconds of ``H:MM:SS(.sss)`` or ``MM:SS``; None if it is not a time."""
    m = _TIME.match(text.strip())
    if m is None:
        return None
    hours, minutes, seconds, frac = m.groups()
    ms = int((frac or "0").ljust(3, "0"))
    return ((int(hours or 0) * 60 + int(minutes)) * 60 + int(seconds)) * 1000 + ms


def age_on(born: date | None, day: date) -> int | None:
    if born is None:
        return None
    return day.year - born.year - ((day.month, day.day) < (born.month, born.day))


def read_sheet(data: bytes, entrants: dict[int, Entrant], rules: SheetRules, race_day: date) -> Sheet:
    sheet = Sheet()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        sheet.problem(data[: exc.start].count(b"\n") + 1, "The file is not UTF-8 text (save it as CSV UTF-8).")
        return sheet
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        sheet.problem(1, "The file is empty: it needs a header line and one line per runner.")
        return sheet
    except csv.Error as exc:
        sheet.problem(1, f"The header line is not valid CSV: {exc}.")
        return sheet
    columns = _columns(header, sheet)
    if columns is None:
        return sheet
    known = set(rules.categories)
    first_line_of: dict[int, int] = {}
    line = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            sheet.problem(reader.line_num, f"Not valid CSV: {exc}.")
            break
        start = line + 1
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue  # blank lines are harmless
        if len(sheet.runners) + sheet.error_count >= MAX_ROWS:
            sheet.problem(start, f"A file holds at most {MAX_ROWS:,} runners.")
            break
        runner = _runner(row, start, columns, sheet, entrants, known, rules, race_day, first_line_of)
        if runner is not None:
            sheet.runners.append(runner)
    if not sheet.runners and not sheet.error_count:
        sheet.problem(2, "The file has a header but no runners.")
    return sheet


@dataclass(frozen=True)
class _Columns:
    index: dict[str, int]
    splits: list[tuple[str, int]]
    width: int


def _columns(header: list[str], sheet: Sheet) -> _Columns | None:
    index: dict[str, int] = {}
    splits: list[tuple[str, int]] = []
    ok = True
    for i, raw in enumerate(header):
        name = re.sub(r"[\s\-]+", "_", raw.strip().lower())
        if name.startswith("split"):
            label = raw.strip()[5:].strip(" _-:") or f"{len(splits) + 1}"
            splits.append((label, i))
            continue
        key = _ALIASES.get(name)
        if key is None:
            sheet.problem(1, f"Unknown column {raw.strip()!r} (expected bib, chip_time, gun_time, status, "
                          "category and split_<name> columns).")  # fmt: skip
            ok = False
        elif key in index:
            sheet.problem(1, f"Column {raw.strip()!r} appears twice.")
            ok = False
        else:
            index[key] = i
    if "bib" not in index:
        sheet.problem(1, "The header has no bib column.")
        ok = False
    if "chip" not in index and "gun" not in index:
        sheet.problem(1, "The header needs a chip_time or gun_time column.")
        ok = False
    if not ok:
        return None
    sheet.split_names = [label for label, _ in splits]
    sheet.has_category = "category" in index
    return _Columns(index, splits, len(header))


def _runner(
    row: list[str],
    line: int,
    cols: _Columns,
    sheet: Sheet,
    entrants: dict[int, Entrant],
    known: set[str],
    rules: SheetRules,
    race_day: date,
    first_line_of: dict[int, int],
) -> Runner | None:
    problems: list[str] = []

    def cell(key: str) -> str:
        i = cols.index.get(key)
        return row[i].strip() if i is not None and i < len(row) else ""

    if len(row) > cols.width:
        problems.append(f"{len(row)} values for {cols.width} columns")
    bib_text = cell("bib")
    bib = int(bib_text) if bib_text.isdigit() else None
    entrant = None
    if bib is None:
        problems.append(f"bib {bib_text!r} is not a number" if bib_text else "the bib is missing")
    elif bib in first_line_of:
        problems.append(f"bib {bib} is repeated (first on line {first_line_of[bib]})")
    else:
        first_line_of[bib] = line
        entrant = entrants.get(bib)
        if entrant is None:
            problems.append(f"bib {bib} is not a registered runner of this event")
    status_text = cell("status").upper()
    status = _STATUS_WORDS.get(status_text, status_text)
    if status not in STATUSES:
        problems.append(f"status {cell('status')!r} is not one of finished, DNF, DNS, DQ")
    times: dict[str, int | None] = {}
    for key, label in (("chip", "chip time"), ("gun", "gun time")):
        text = cell(key)
        times[key] = parse_time(text) if text else None
        if text and times[key] is None:
            problems.append(f"{label} {text!r} is not a time (H:MM:SS or MM:SS)")
    if status == "FINISHED" and not cell(rules.rank_by):
        problems.append(f"a finisher needs a {rules.rank_by} time (results are ranked by it)")
    splits: list[int | None] = []
    for label, i in cols.splits:
        text = row[i].strip() if i < len(row) else ""
        value = parse_time(text) if text else None
        if text and value is None:
            problems.append(f"split {label} {text!r} is not a time")
        splits.append(value)
    category = cell("category").upper() or None
    if category is not None and category not in known:
        problems.append(f"category {cell('category')!r} is not one of {', '.join(sorted(known))}")
    elif category is None and entrant is not None and entrant.division:
        category = entrant.division.upper()  # the division the runner chose at registration
        if category not in known:
            problems.append(
                f"the runner's division {entrant.division!r} is not one of {', '.join(sorted(known))} "
                "(give the category in the file, or add it to the categories)"
            )
    if problems:
        text = "; ".join(problems)
        sheet.problem(line, text[0].upper() + text[1:] + ".")
        return None
    if bib is None or entrant is None:  # pragma: no cover - no problems means both were found
        return None
    age = age_on(entrant.date_of_birth, race_day) if entrant.date_of_birth else entrant.age_on_race_day
    return Runner(
        bib=bib,
        first_name=entrant.first_name,
        last_name=entrant.last_name,
        category=category,
        age=age,
        age_group=age_group(age, rules.age_group_years),
        status=status,
        chip_ms=times["chip"],
        gun_ms=times["gun"],
        splits=splits,
        team=entrant.team,
    )
