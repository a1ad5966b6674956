"""One published version of an event's results, in memory: immutable, so everything
derived from it (pages, filters, the search index) is computed once and cached forever.

Stored compactly (``encode``/``decode``): one JSON array per runner, gzip-compressed, a
50,000-runner event with splits fits in ~1-2 MB.
"""

from __future__ import annotations

import bisect
import gzip
import heapq
import json
import re
import threading
import unicodedata
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from racecap.results.ranking import Runner

MAX_SUGGESTIONS = 10
MIN_QUERY = 2
_FIELDS = (
    "bib", "first_name", "last_name", "category", "age", "age_group", "status",
    "chip_ms", "gun_ms", "splits", "place", "gender_place", "age_group_place", "team",
)  # fmt: skip
_NOT_WORD = re.compile(r"[^0-9a-z ]+")


def fold(text: str) -> str:
    """Case- and accent-insensitive form: 'Zoë Łukasiewicz-O'Neil' -> 'zoe lukasiewicz oneil'."""
    decomposed = unicodedata.normalize("NFKD", text.replace("ł", "l").replace("Ł", "L").replace("ø", "o"))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()
    plain = plain.replace("-", " ").replace("ß", "ss")
    return " ".join(_NOT_WORD.sub("", plain).split())


def format_ms(ms: int | None) -> str | None:
    if ms is None:
        return None
    seconds, millis = divmod(ms, 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}"
    if millis:
        text += f".{millis:03d}".rstrip("0")
    return text


class Dataset:
    def __init__(self, meta: dict[str, Any], runners: Sequence[Runner]) -> None:
        self.meta = meta
        self.runners = list(runners)  # in results order (see ranking.rank)
        self.by_bib = {r.bib: i for i, r in enumerate(self.runners)}
        self._lock = threading.Lock()
        self._filtered: dict[tuple[str | None, str | None], list[int]] = {}

    # -- storage -----------------------------------------------------------------------
    def encode(self) -> bytes:
        rows = [[getattr(r, f) for f in _FIELDS] for r in self.runners]
        body = json.dumps({"meta": self.meta, "rows": rows}, separators=(",", ":"), ensure_ascii=False)
        return gzip.compress(body.encode(), compresslevel=6)

    @classmethod
    def decode(cls, blob: bytes) -> Dataset:
        doc = json.loads(gzip.decompress(blob))
        # Versions stored before a field was added have shorter rows: the missing fields (last) keep
        # their defaults.
        return cls(doc["meta"], [Runner(**dict(zip(_FIELDS[: len(row)], row, strict=True))) for row in doc["rows"]])

    # -- what the pages need ---------------------------------------------------------------
    @cached_property
    def categories(self) -> list[str]:
        return sorted({r.category for r in self.runners if r.category})

    @cached_property
    def age_groups(self) -> list[str]:
        groups = {r.age_group for r in self.runners if r.age_group}
        return sorted(groups, key=lambda g: int(g.split("-")[0]))

    @cached_property
    def finishers(self) -> int:
        return sum(1 for r in self.runners if r.place is not None)

    def filtered(self, category: str | None, group: str | None) -> list[int]:
        """Indexes of the runners in results order, for the filters (None = any)."""
        key = (category, group)
        with self._lock:
            found = self._filtered.get(key)
        if found is None:
            found = [
                i
                for i, r in enumerate(self.runners)
                if (category is None or r.category == category) and (group is None or r.age_group == group)
            ]
            with self._lock:
                self._filtered[key] = found
        return found

    def counts(self, runner: Runner) -> dict[str, int | None]:
        """How many places each of the runner's rankings has (for '12th of 3,410')."""
        cat = self.filtered(runner.category, None) if runner.category else None
        grp = self.filtered(runner.category, runner.age_group) if runner.age_group else None

        def placed(ix: list[int] | None) -> int | None:
            return None if ix is None else sum(1 for i in ix if self.runners[i].place is not None)

        return {"overall": self.finishers, "gender": placed(cat), "ageGroup": placed(grp)}

    # -- autocomplete --------------------------------------------------------------------
    @cached_property
    def _index(self) -> tuple[list[str], list[int]]:
        """Sorted folded keys (bib, first, last, 'first last', 'last first', each word) -> runner."""
        pairs: set[tuple[str, int]] = set()
        for i, r in enumerate(self.runners):
            first, last = fold(r.first_name), fold(r.last_name)
            for key in (str(r.bib), first, last, f"{first} {last}", f"{last} {first}", *first.split(), *last.split()):
                if key:
                    pairs.add((key, i))
        ordered = sorted(pairs)
        return [k for k, _ in ordered], [i for _, i in ordered]

    def suggest(self, query: str, limit: int = MAX_SUGGESTIONS) -> list[Runner]:
        """Runners whose name (any word, or the full name either way round) or bib starts
        with ``query``, best placed first, at most ``limit``. ``query`` is folded here."""
        q = fold(query)
        if len(q) < MIN_QUERY:
            return []
        keys, rows = self._index
        matches: set[int] = set()
        for k in range(bisect.bisect_left(keys, q), len(keys)):
            if not keys[k].startswith(q):
                break
            matches.add(rows[k])
        # Results order is already "best first": places, then DNF/DQ/DNS.
        return [self.runners[i] for i in heapq.nsmallest(limit, matches)]
