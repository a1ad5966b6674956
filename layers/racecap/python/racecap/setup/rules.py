"""The set-up's pure rules: completeness, price tiers, versions, a year later."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Sequence
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from racecap.errors import (
    Conflict,
    RaceIncomplete,
    ValidationFailed,
)
from racecap.money import charge_problem
from racecap.races.catalog import race_status
from racecap.races.models import Event, PriceTier, Race
from racecap.races.rules import team_range_problem
from racecap.setup.models import (
    AdminRaceSummary,
    EventDraft,
    PriceTierDraft,
    RaceFields,
)


def new_id(prefix: str) -> str:
    """Unguessable ids (~128 bits), readable prefix for support staff."""
    return f"{prefix}_{secrets.token_urlsafe(16)}"


def _check_teams(drafts: dict[str, EventDraft]) -> None:
    """Each event's team size range (``racecap.teams.rules``): 400 naming the field."""
    for prefix, e in drafts.items():
        problem = team_range_problem(e.teamMinSize, e.teamMaxSize, e.cap)
        if problem:
            raise ValidationFailed(next(iter(problem.values())), fields={prefix + k: v for k, v in problem.items()})


def missing_for_runners(
    race: Race | RaceFields, events: Sequence[Event | EventDraft], now: datetime | None = None
) -> dict[str, str]:
    """What a race still lacks before runners can register for it, by field."""
    now = now or datetime.now(race.registrationClosesAt.tzinfo)
    missing: dict[str, str] = {}
    if not race.location.strip():
        missing["location"] = "Say where the race is."
    if date.fromisoformat(race.raceDate) < now.date():
        missing["raceDate"] = "The race date has passed."
    if race.registrationClosesAt <= now:
        missing["registrationClosesAt"] = "The registration window has ended: set when it opens and closes."
    if not events:
        missing["events"] = "Add at least one event."
    for i, e in enumerate(events):
        if e.cap <= 0:
            missing[f"events.{i}.cap"] = f"{e.name} needs a number of places."
        if e.priceCents < 0:
            missing[f"events.{i}.priceCents"] = f"{e.name} needs a price."
    return missing


def _check_complete(race: Race | RaceFields, events: Sequence[Event | EventDraft]) -> None:
    missing = missing_for_runners(race, events)
    if missing:
        raise RaceIncomplete("The race is not ready for runners yet: " + " ".join(missing.values()), fields=missing)


def _a_year_later(day: date) -> date:
    try:
        return day.replace(year=day.year + 1)
    except ValueError:  # 29 February
        return day.replace(year=day.year + 1, day=28)


def _prices(e: EventDraft | Event) -> list[tuple[str, int]]:
    tiers: Sequence[PriceTierDraft | PriceTier] = e.priceTiers
    return [
        ("priceCents", e.priceCents),
        *((f"priceTiers.{i}.priceCents", t.priceCents) for i, t in enumerate(tiers)),
    ]


def _tiers(drafts: Sequence[PriceTierDraft], zone: str, field: str) -> list[PriceTier]:
    """Tiers in UTC (a time without an offset is the race's local time), strictly in order."""
    tiers = [
        PriceTier(
            startsAt=(t.startsAt if t.startsAt.tzinfo else t.startsAt.replace(tzinfo=ZoneInfo(zone))).astimezone(UTC),
            priceCents=t.priceCents,
        )
        for t in drafts
    ]
    for i, (a, b) in enumerate(itertools.pairwise(tiers), start=1):
        if b.startsAt <= a.startsAt:
            raise ValidationFailed(
                "Price tiers must start in order, each after the one before.",
                fields={f"{field}.{i}.startsAt": "Must be after the tier before it."},
            )
    return tiers


def _price_problems(currency: str, prices: dict[str, int]) -> dict[str, str]:
    # 0 is a free entry: nothing is charged, so no minimum applies.
    return {name: p for name, price in prices.items() if price and (p := charge_problem(price, currency)) is not None}


def _check_prices(currency: str, prices: dict[str, int]) -> None:
    """Refuses, naming the field, a price the provider would refuse to charge in ``currency``:
    checked when the director sets it, because a runner would otherwise meet the refusal
    only after holding a place. (A schema cannot say it: the minimum depends on the race's
    currency.)"""
    problems = _price_problems(currency, prices)
    if problems:
        raise ValidationFailed(f"A price cannot be charged in {currency}.", fields=problems)


def _check_new_currency(currency: str, events: Sequence[Event]) -> None:
    """A race's new currency must charge every price the race has, as when each was set: each
    event's price and each of its price tiers' (a tier below the new minimum would otherwise
    refuse runners from its start date on). The refusal names ``currency`` and each price's
    field, events counted in the race's order (``events.1.priceTiers.0.priceCents``). The race
    has no other price: options carry stock, not prices; a team pays its members' prices; a
    discount code's price is checked when a runner applies it."""
    problems = _price_problems(currency, {f"events.{i}.{k}": p for i, e in enumerate(events) for k, p in _prices(e)})
    if problems:
        names = ", ".join(problems)
        raise ValidationFailed(
            f"The race's prices cannot all be charged in {currency} ({names}): change them first.",
            fields={"currency": next(iter(problems.values())), **problems},
        )


def _check_version(race: Race, expected: int | None) -> None:
    if expected is not None and expected != race.version:
        raise Conflict(
            f"The race is at version {race.version}, not {expected}: it was changed meanwhile; reload it and retry."
        )


def _summary(race: Race) -> AdminRaceSummary:
    return AdminRaceSummary(
        raceId=race.raceId,
        name=race.name,
        raceDate=race.raceDate,
        timeZone=race.timeZone,
        status=race_status(race),
        registrationState=race.registrationState,
        registrationOpensAt=race.registrationOpensAt,
        registrationClosesAt=race.registrationClosesAt,
        listing=race.listing,
        published=not race.is_draft,
        currency=race.currency,
        version=race.version,
    )
