"""Places, computed once per version in pure Python (no database sort involved).

Finishers are ranked by their ranking time (chip or gun, the director's choice); equal
times share a place and the next place skips (1, 2, 2, 4), as results are usually read.
Runners who did not finish, start, or were disqualified get no place and do not push
anyone down. Gender places rank within the runner's category; age-group places within
the category *and* the age group (F40-44 is one group, M40-44 another; without categories,
the age group alone).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

FINISHED = "FINISHED"
STATUSES = ("FINISHED", "DNF", "DNS", "DQ")
_NOT_FINISHED_ORDER = {"DNF": 0, "DQ": 1, "DNS": 2}


@dataclass
class Runner:
    bib: int
    first_name: str
    last_name: str
    category: str | None
    age: int | None
    age_group: str | None
    status: str
    chip_ms: int | None
    gun_ms: int | None
    splits: list[int | None] = field(default_factory=list)
    place: int | None = None
    gender_place: int | None = None
    age_group_place: int | None = None
    team: str | None = None  # a team entry's team (racecap.teams), from the registration

    @property
    def name(self) -> str:
        return f"{self.first_name} {self.last_name}".strip()


def age_group(age: int | None, years: int) -> str | None:
    """``40-44`` for age 42 in 5-year groups; None when the age is unknown."""
    if age is None:
        return None
    low = (age // years) * years
    return f"{low}-{low + years - 1}"


def rank(runners: Sequence[Runner], rank_by: str = "chip") -> list[Runner]:
    """Set every runner's places; return them in results order (places first, then the
    runners without a place: DNF, DQ, DNS, each by bib)."""

    def time_of(r: Runner) -> int | None:
        return r.chip_ms if rank_by == "chip" else r.gun_ms

    finishers = sorted(
        (r for r in runners if r.status == FINISHED and time_of(r) is not None),
        key=lambda r: (time_of(r), r.bib),
    )
    others = sorted(
        (r for r in runners if not (r.status == FINISHED and time_of(r) is not None)),
        key=lambda r: (_NOT_FINISHED_ORDER.get(r.status, 3), r.bib),
    )
    for r in others:
        r.place = r.gender_place = r.age_group_place = None
    _competition_places(finishers, time_of, lambda r: None, "place")
    _competition_places(finishers, time_of, lambda r: r.category, "gender_place", skip_none=True)
    _competition_places(finishers, time_of, lambda r: (r.category, r.age_group), "age_group_place", need_age=True)
    return finishers + others


def _competition_places(
    ordered: Sequence[Runner],
    time_of: Callable[[Runner], int | None],
    group_of: Callable[[Runner], Hashable],
    attr: str,
    *,
    skip_none: bool = False,
    need_age: bool = False,
) -> None:
    # Per group: how many were ahead, and the last time and place given (for ties).
    seen: dict[Hashable, tuple[int, int | None, int]] = {}
    for r in ordered:
        group = group_of(r)
        if (skip_none and r.category is None) or (need_age and r.age_group is None):
            setattr(r, attr, None)
            continue
        count, last_time, last_place = seen.get(group, (0, None, 0))
        t = time_of(r)
        place = last_place if t == last_time else count + 1
        seen[group] = (count + 1, t, place)
        setattr(r, attr, place)


@dataclass
class TeamStanding:
    team: str
    total_ms: int | None  # the best ``scored`` finishing times added up; None: too few finished
    scored: list[int]  # the bibs whose times count, fastest first
    members: list[int]  # every bib of the team in the results
    place: int | None = None


def team_standings(runners: Sequence[Runner], scored: int, rank_by: str = "chip") -> list[TeamStanding]:
    """Teams by the sum of their ``scored`` best times (the director's k): the lowest sum
    first, equal sums sharing a place (1, 2, 2, 4). A team with fewer than k finishers is
    listed after the placed ones, without a place, as results usually show them."""

    def time_of(r: Runner) -> int | None:
        return r.chip_ms if rank_by == "chip" else r.gun_ms

    teams: dict[str, list[Runner]] = {}
    for r in runners:
        if r.team:
            teams.setdefault(r.team, []).append(r)
    out = []
    for name, members in teams.items():
        finished = sorted(
            (r for r in members if r.status == FINISHED and time_of(r) is not None), key=lambda r: (time_of(r), r.bib)
        )
        best = finished[:scored]
        total = sum(time_of(r) or 0 for r in best) if len(best) == scored else None
        out.append(TeamStanding(name, total, [r.bib for r in best], sorted(r.bib for r in members)))
    placed = sorted((t for t in out if t.total_ms is not None), key=lambda t: (t.total_ms, t.team))
    last: tuple[int | None, int] = (None, 0)
    for i, t in enumerate(placed):
        t.place = last[1] if t.total_ms == last[0] else i + 1
        last = (t.total_ms, t.place)
    return placed + sorted((t for t in out if t.total_ms is None), key=lambda t: t.team)
