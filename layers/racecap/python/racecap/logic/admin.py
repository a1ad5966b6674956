"""What race directors do to their races and events. The admin API and the demo seed go here.

Every change is one DynamoDB transaction with its audit entry, bumps the race's version
stamp (so every cached copy of the race is orphaned at once) and is checked against the
director: a race that is not theirs does not exist for them (404, never 403, so ids of
other directors' races are not confirmed).
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from annotated_types import Ge, Gt, Le
from pydantic import (
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from racecap.dal.ports import Inventory, RaceStore
from racecap.dal.transactions import ConditionFailed, TransactItem
from racecap.domain import EventChanges, RaceChanges
from racecap.errors import (
    CapBelowTaken,
    Conflict,
    EventNotFound,
    RaceIncomplete,
    RaceNotFound,
    TooManyEvents,
    ValidationFailed,
)
from racecap.logic.capacity import CapBelowPlacesTaken, plan_cap_change, split_cap
from racecap.logic.eligibility import DEFAULT_MIN_AGE, MAX_AGE
from racecap.logic.races import race_status
from racecap.logic.retention import DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS, MIN_RETENTION_DAYS, purge_due
from racecap.models import (
    WHOLE_NUMBER,
    AdminEventView,
    AdminRaceList,
    AdminRaceSummary,
    AdminRaceView,
    Director,
    Event,
    JsonInt,
    Listing,
    Model,
    PriceTier,
    Race,
)
from racecap.money import charge_problem
from racecap.teams.rules import MAX_TEAM_SIZE, MIN_TEAM_SIZE, team_range_problem

# One DynamoDB item sustains ~1,000 writes/s. A hold is one write to one shard, so an
# event with S shards takes ~S x 1,000 holds/s; 8 shards clears RunSignUp's peak 1,500
# registrations/s with five-fold headroom. Small caps get fewer shards (>= 1 place each)
# so the last places of a small event aren't scattered across mostly-full shards.
MAX_SHARDS = 8
PLACES_PER_SHARD_MIN = 25
MAX_EVENTS = 50  # one transaction creates a race with all its events (100 items at most)
CAP_CHANGE_TRIES = 5  # holds landing on a shard mid-change make it re-plan
PRICE_DESCRIPTION = (
    "In the currency's smallest unit as the payment provider counts it (cents; yen for JPY, a zero-decimal "
    "currency): 0 for a free entry (no payment, no card step), else at least the provider's minimum charge for "
    "the race's currency (50 for USD and EUR, 30 for GBP, 50 for JPY...): a price between is refused (400 naming "
    "priceCents)."
)
NULL_MESSAGE = "Leave out a field to keep it; null is not a value."

Currency = Literal["USD", "EUR", "GBP", "CAD", "AUD", "NZD", "CHF", "SEK", "NOK", "DKK", "JPY"]
KNOWN_CURRENCIES = frozenset(Currency.__args__)  # type: ignore[attr-defined]
# The document states what the server checks: text with something in it (names are
# trimmed, so "   " is empty), and dates as the strings they are on the wire.
SOME_TEXT = r"\S"
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"


def zone_name(v: str) -> str:
    """An IANA time zone name, as Python's zoneinfo knows it (tzdata)."""
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError("Not a time zone; use an IANA name such as Europe/Paris or America/Denver.") from exc
    return v


def shards_for(cap: int) -> int:
    return max(1, min(MAX_SHARDS, math.ceil(cap / PLACES_PER_SHARD_MIN)))


def new_id(prefix: str) -> str:
    """Unguessable ids (~128 bits), readable prefix for support staff."""
    return f"{prefix}_{secrets.token_urlsafe(16)}"


# -- what a director sends ---------------------------------------------------------------
# Strict per field (JsonInt, StrictBool): `true` is not a price and "5" is not a cap.
# Not model-wide: Powertools validates the parsed JSON as Python objects, and a strict
# model would then refuse the ISO strings that datetimes arrive as.
_STRICT = ConfigDict(extra="forbid", str_strip_whitespace=True)


_AGE_RULE_MESSAGE = "minAge must not be above maxAge."
MAX_PRICE_TIERS = 10


class PriceTierDraft(Model):
    model_config = _STRICT

    startsAt: datetime = Field(
        description="When this price starts: ISO 8601; without an offset, the race's local time."
    )
    priceCents: JsonInt = Field(ge=0, le=10_000_000, description=PRICE_DESCRIPTION)

    @field_validator("startsAt", mode="before")
    @classmethod
    def _text_time(cls, v: object) -> object:
        return _iso_text(v)


PRICE_TIERS_DESCRIPTION = (
    "Later prices by date (standard, late...), each from its startsAt; priceCents is the price until the first "
    "starts (the early bird). A hold takes the price in force when the place is held."
)


# A team size as the API takes it (racecap.teams.rules: the largest DynamoDB's transactions allow).
TeamSize = Annotated[int, Strict(), Ge(MIN_TEAM_SIZE), Le(MAX_TEAM_SIZE), WHOLE_NUMBER]
TEAM_SIZE_DESCRIPTION = (
    f"Team entries: a captain holds and pays for teamMinSize..teamMaxSize places together ({MIN_TEAM_SIZE} to "
    f"{MAX_TEAM_SIZE}: the largest team one DynamoDB transaction can register). Give both, or neither for single "
    "entries only."
)


class EventDraft(Model):
    model_config = _STRICT

    name: str = Field(min_length=1, max_length=100, pattern=SOME_TEXT)
    cap: JsonInt = Field(gt=0, le=1_000_000)
    priceCents: JsonInt = Field(ge=0, le=10_000_000, description=PRICE_DESCRIPTION)
    minAge: JsonInt = Field(
        default=DEFAULT_MIN_AGE, ge=0, le=MAX_AGE, description="The youngest a runner may be on race day."
    )
    maxAge: Annotated[int, Strict(), Ge(0), Le(MAX_AGE), WHOLE_NUMBER] | None = Field(
        default=None, description="The oldest a runner may be on race day; leave out for no limit."
    )
    priceTiers: list[PriceTierDraft] = Field(
        default=[], max_length=MAX_PRICE_TIERS, description=PRICE_TIERS_DESCRIPTION
    )
    teamMinSize: TeamSize | None = Field(default=None, description=TEAM_SIZE_DESCRIPTION)
    teamMaxSize: TeamSize | None = Field(default=None, description=TEAM_SIZE_DESCRIPTION)

    @field_validator("maxAge")
    @classmethod
    def _rule_in_order(cls, v: int | None, info: ValidationInfo) -> int | None:
        low = info.data.get("minAge")
        if v is not None and low is not None and v < low:
            raise ValueError(_AGE_RULE_MESSAGE)
        return v


def _check_teams(drafts: dict[str, EventDraft]) -> None:
    """Each event's team size range (``racecap.teams.rules``): 400 naming the field."""
    for prefix, e in drafts.items():
        problem = team_range_problem(e.teamMinSize, e.teamMaxSize, e.cap)
        if problem:
            raise ValidationFailed(next(iter(problem.values())), fields={prefix + k: v for k, v in problem.items()})


def _iso_text(v: object) -> object:
    """A time arrives as ISO 8601 text (pydantic would also take a number of seconds)."""
    if not isinstance(v, str | datetime):
        raise ValueError("Use an ISO 8601 time with a zone, e.g. 2026-05-01T09:00:00Z.")
    return v


class RaceFields(Model):
    """A race's own settings, validated together: the times must make sense as a whole."""

    model_config = _STRICT

    name: str = Field(min_length=1, max_length=150, pattern=SOME_TEXT)
    location: str = Field(default="", max_length=150)
    raceDate: str = Field(
        pattern=DATE_PATTERN, description="YYYY-MM-DD, local to the race", json_schema_extra={"format": "date"}
    )
    description: str = Field(default="", max_length=5000)
    currency: Currency = "USD"
    timeZone: str = Field(
        default="UTC",
        min_length=1,
        max_length=64,
        description="The race's IANA time zone, e.g. America/Los_Angeles: times sent without an offset are taken "
        "in it, the race date is a day in it, and runners see times in it. Times are stored in UTC.",
    )
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    holdMinutes: JsonInt = Field(default=10, ge=1, le=60)
    listing: Listing = Field(
        default="DRAFT",
        description="DRAFT (the default: closed to runners while you set it up), UNLISTED (open by its link "
        "only) or LISTED. A race created UNLISTED or LISTED must be complete, as publishing checks.",
    )
    retentionDays: JsonInt = Field(
        default=DEFAULT_RETENTION_DAYS,
        ge=MIN_RETENTION_DAYS,
        le=MAX_RETENTION_DAYS,
        description="Days after the race that runners' emails, dates of birth and payment references are kept.",
    )

    @field_validator("raceDate")
    @classmethod
    def _real_date(cls, v: str) -> str:
        try:
            date.fromisoformat(v)
        except ValueError as exc:
            raise ValueError("Not a date; use YYYY-MM-DD.") from exc
        return v

    @field_validator("registrationOpensAt", "registrationClosesAt", mode="before")
    @classmethod
    def _text_time(cls, v: object) -> object:
        return _iso_text(v)

    @field_validator("timeZone")
    @classmethod
    def _known_zone(cls, v: str) -> str:
        return zone_name(v)

    @field_validator("registrationOpensAt", "registrationClosesAt")
    @classmethod
    def _in_the_races_zone(cls, v: datetime, info: ValidationInfo) -> datetime:
        if v.tzinfo is None:
            zone = info.data.get("timeZone")
            if zone is None:  # the zone itself was refused: its own error says why
                raise ValueError("Give a time zone, e.g. 2026-05-01T09:00:00Z, or a valid timeZone for the race.")
            v = v.replace(tzinfo=ZoneInfo(zone))
        return v.astimezone(UTC)

    @field_validator("registrationClosesAt")
    @classmethod
    def _in_order(cls, v: datetime, info: ValidationInfo) -> datetime:
        opens = info.data.get("registrationOpensAt")
        if opens is not None and v <= opens:
            raise ValueError("registrationClosesAt must be after registrationOpensAt.")
        race_date, zone = info.data.get("raceDate"), info.data.get("timeZone")
        # raceDate is a day in the race's time zone; the closing time is an instant.
        if (
            race_date is not None
            and zone is not None
            and v.astimezone(ZoneInfo(zone)).date() > date.fromisoformat(race_date)
        ):
            raise ValueError("Registration must close by the race date (in the race's time zone).")
        return v


class RaceDraft(RaceFields):
    events: list[EventDraft] = Field(min_length=1, max_length=MAX_EVENTS)


def _null_is_not_a_value(schema: dict[str, Any]) -> None:
    """A patch field left out is kept; sent as null it is refused (400), so the document
    shows each field without null (except expectedVersion, where null means "any")."""
    for name, prop in schema.get("properties", {}).items():
        if name == "expectedVersion" or "anyOf" not in prop:
            continue
        kept = [s for s in prop.pop("anyOf") if s.get("type") != "null"]
        prop.pop("default", None)
        if len(kept) == 1:
            prop.update(kept[0])
        else:
            prop["anyOf"] = kept


class RacePatch(Model):
    """Fields to change; those left out stay as they are (publishing has its own calls)."""

    expectedVersion: Annotated[int, Strict(), Ge(1), WHOLE_NUMBER] | None = Field(
        default=None, description="The version you edited; a Conflict if the race changed meanwhile."
    )
    name: str | None = Field(default=None, min_length=1, max_length=150, pattern=SOME_TEXT)
    location: str | None = Field(default=None, max_length=150)
    raceDate: str | None = Field(default=None, pattern=DATE_PATTERN, json_schema_extra={"format": "date"})
    description: str | None = Field(default=None, max_length=5000)
    currency: Currency | None = None
    timeZone: str | None = Field(
        default=None, min_length=1, max_length=64, description="IANA name; the window's instants stay as they are."
    )
    registrationOpensAt: datetime | None = None
    registrationClosesAt: datetime | None = None
    holdMinutes: Annotated[int, Strict(), Ge(1), Le(60), WHOLE_NUMBER] | None = None
    retentionDays: Annotated[int, Strict(), Ge(MIN_RETENTION_DAYS), Le(MAX_RETENTION_DAYS), WHOLE_NUMBER] | None = None

    model_config = ConfigDict(**_STRICT, json_schema_extra=_null_is_not_a_value)

    @field_validator("registrationOpensAt", "registrationClosesAt", mode="before")
    @classmethod
    def _text_time(cls, v: object) -> object:
        return _iso_text(v) if v is not None else v


class EventPatch(Model):
    expectedVersion: Annotated[int, Strict(), Ge(1), WHOLE_NUMBER] | None = None
    name: str | None = Field(default=None, min_length=1, max_length=100, pattern=SOME_TEXT)
    cap: Annotated[int, Strict(), Gt(0), Le(1_000_000), WHOLE_NUMBER] | None = Field(
        default=None, description="May go down only to the places taken."
    )
    priceCents: Annotated[int, Strict(), Ge(0), Le(10_000_000), WHOLE_NUMBER] | None = Field(
        default=None, description=PRICE_DESCRIPTION
    )
    minAge: Annotated[int, Strict(), Ge(0), Le(MAX_AGE), WHOLE_NUMBER] | None = Field(
        default=None, description="The youngest a runner may be on race day."
    )
    maxAge: Annotated[int, Strict(), Ge(0), Le(MAX_AGE), WHOLE_NUMBER] | None = Field(
        default=None, description="The oldest a runner may be on race day (send noMaxAge to remove the limit)."
    )
    noMaxAge: StrictBool | None = Field(default=None, description="true: remove the event's maximum age.")
    teamMinSize: TeamSize | None = Field(default=None, description=TEAM_SIZE_DESCRIPTION)
    teamMaxSize: TeamSize | None = Field(default=None, description=TEAM_SIZE_DESCRIPTION)
    noTeams: StrictBool | None = Field(default=None, description="true: take single entries only from now on.")
    priceTiers: list[PriceTierDraft] | None = Field(
        default=None,
        max_length=MAX_PRICE_TIERS,
        description=PRICE_TIERS_DESCRIPTION + " Replaces them all; [] removes them.",
    )

    model_config = ConfigDict(**_STRICT, json_schema_extra=_null_is_not_a_value)


class CopyRequest(Model):
    model_config = _STRICT

    name: str | None = Field(
        default=None, min_length=1, max_length=150, pattern=SOME_TEXT, description="Default: the same name."
    )
    raceDate: str | None = Field(
        default=None,
        pattern=DATE_PATTERN,
        description="The new edition's date, YYYY-MM-DD; default: the same day a year later. The registration "
        "window moves by as many days.",
        json_schema_extra={"format": "date"},
    )

    model_config = ConfigDict(**_STRICT, json_schema_extra=_null_is_not_a_value)

    @field_validator("raceDate")
    @classmethod
    def _real_date(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                date.fromisoformat(v)
            except ValueError as exc:
                raise ValueError("Not a date; use YYYY-MM-DD.") from exc
        return v


class PublishRequest(Model):
    model_config = _STRICT

    listing: Literal["UNLISTED", "LISTED"] = Field(
        default="LISTED", description="LISTED: on the race list too; UNLISTED: open by its link only."
    )
    expectedVersion: Annotated[int, Strict(), Ge(1), WHOLE_NUMBER] | None = Field(
        default=None, description="The version you saw; a Conflict if the race changed meanwhile."
    )


class UnpublishRequest(Model):
    model_config = _STRICT

    expectedVersion: Annotated[int, Strict(), Ge(1), WHOLE_NUMBER] | None = Field(
        default=None, description="The version you saw; a Conflict if the race changed meanwhile."
    )


def _fields(exc: ValidationError) -> dict[str, str]:
    out: dict[str, str] = {}
    for err in exc.errors():
        name = ".".join(str(p) for p in err.get("loc", ())) or "body"
        out.setdefault(name, str(err.get("msg", "Invalid value.")).removeprefix("Value error, "))
    return out


# -- the service ---------------------------------------------------------------------------
class RaceAdmin:
    def __init__(
        self,
        store: RaceStore,
        inventory: Inventory,
        *,
        transact: Callable[[list[TransactItem]], None] | None = None,
        audit: Any = None,  # racecap.logic.audit.AuditTrail
        catalog: Any = None,  # racecap.logic.races.RaceCatalog
        window: Any = None,  # racecap.logic.window.WindowControl
    ) -> None:
        self._store = store
        self._inventory = inventory
        self._transact = transact
        self._audit = audit
        self._catalog = catalog
        self._window = window

    # -- reading -----------------------------------------------------------------------
    def owned(self, director: Director, race_id: str) -> tuple[Race, list[Event]]:
        """The race and its events, read fresh, if ``director`` owns it; else RaceNotFound."""
        found = self._store.get_race(race_id)
        if found is None or found[0].ownerId != director.sub:
            raise RaceNotFound(f"No race with id {race_id}.")
        return found

    def list_races(self, director: Director) -> AdminRaceList:
        return AdminRaceList(races=[_summary(r) for r in self._store.list_by_owner(director.sub)])

    def view(self, race: Race, events: list[Event]) -> AdminRaceView:
        views = []
        for e in events:
            usage = self._inventory.usage(race.raceId, e.eventId)
            views.append(
                AdminEventView(
                    eventId=e.eventId,
                    name=e.name,
                    cap=e.cap,
                    priceCents=e.priceCents,
                    priceTiers=e.priceTiers,
                    priceNow=e.price_at(datetime.now(UTC)),
                    currency=e.currency,
                    shards=e.shards,
                    minAge=e.minAge,
                    maxAge=e.maxAge,
                    teamMinSize=e.teamMinSize,
                    teamMaxSize=e.teamMaxSize,
                    taken=usage.taken,
                    placesLeft=usage.left,
                )
            )
        return AdminRaceView(
            **_summary(race).model_dump(),
            location=race.location,
            description=race.description,
            currency=race.currency,
            holdMinutes=race.holdMinutes,
            retentionDays=race.retentionDays,
            personalDataDeletedOn=purge_due(race).isoformat(),
            purgedAt=race.purgedAt,
            events=views,
        )

    def get(self, director: Director, race_id: str) -> AdminRaceView:
        return self.view(*self.owned(director, race_id))

    # -- creating --------------------------------------------------------------------------
    def create_race(
        self,
        owner_id: str,
        draft: RaceDraft,
        *,
        open_now: bool = False,
        director: Director | None = None,
        copied_from: str | None = None,
    ) -> Race:
        _check_prices(draft.currency, {f"events.{i}.{k}": p for i, e in enumerate(draft.events) for k, p in _prices(e)})
        _check_teams({f"events.{i}.": e for i, e in enumerate(draft.events)})
        tiers = [_tiers(e.priceTiers, draft.timeZone, f"events.{i}.priceTiers") for i, e in enumerate(draft.events)]
        if draft.listing != "DRAFT":
            _check_complete(draft, list(draft.events))
        race = Race(
            raceId=new_id("race"),
            ownerId=owner_id,
            **draft.model_dump(exclude={"events"}),
            registrationState="OPEN" if open_now else "SCHEDULED",
        )
        events = [
            Event(
                raceId=race.raceId,
                eventId=new_id("evt"),
                name=e.name,
                cap=e.cap,
                priceCents=e.priceCents,
                currency=draft.currency,
                shards=shards_for(e.cap),
                position=i,
                minAge=e.minAge,
                maxAge=e.maxAge,
                priceTiers=tiers[i],
                teamMinSize=e.teamMinSize,
                teamMaxSize=e.teamMaxSize,
            )
            for i, e in enumerate(draft.events)
        ]
        # Shards first: a race is only visible once every place it advertises exists.
        for e in events:
            self._inventory.create_event_shards(race.raceId, e.eventId, split_cap(e.cap, e.shards))
        also = []
        if director is not None and self._audit is not None:
            also.append(
                self._audit.item(
                    director,
                    race.raceId,
                    "race.create",
                    race.raceId,
                    name=race.name,
                    events=len(events),
                    **({"copiedFrom": copied_from} if copied_from else {}),
                )
            )
        self._store.create(race, events, also)
        if self._catalog is not None:
            self._catalog.invalidate_listing()  # the new race shows in the public list at once
        return race

    def add_event(self, director: Director, race_id: str, draft: EventDraft) -> AdminRaceView:
        race, events = self.owned(director, race_id)
        if len(events) >= MAX_EVENTS:
            raise TooManyEvents(f"A race has at most {MAX_EVENTS} events; this one has {len(events)}.")
        _check_prices(race.currency, dict(_prices(draft)))
        _check_teams({"": draft})
        event = Event(
            raceId=race_id,
            eventId=new_id("evt"),
            name=draft.name,
            cap=draft.cap,
            priceCents=draft.priceCents,
            currency=race.currency,
            shards=shards_for(draft.cap),
            position=max((e.position for e in events), default=-1) + 1,
            minAge=draft.minAge,
            maxAge=draft.maxAge,
            priceTiers=_tiers(draft.priceTiers, race.timeZone, "priceTiers"),
            teamMinSize=draft.teamMinSize,
            teamMaxSize=draft.teamMaxSize,
        )
        self._inventory.create_event_shards(race_id, event.eventId, split_cap(event.cap, event.shards))
        try:
            self._run(
                [
                    self._store.put_event_item(event),
                    self._store.version_item(race),
                    self._audit.item(director, race_id, "event.create", event.eventId, **draft.model_dump()),
                ]
            )
        except ConditionFailed as exc:
            # The unused shards stay behind under an id nothing names: harmless.
            raise Conflict("The race was changed meanwhile; reload it and try again.") from exc
        return self._changed(director, race_id)

    # -- editing ---------------------------------------------------------------------------
    def update_race(self, director: Director, race_id: str, patch: RacePatch) -> AdminRaceView:
        race, events = self.owned(director, race_id)
        _check_version(race, patch.expectedVersion)
        asked = patch.model_dump(exclude_unset=True, exclude={"expectedVersion"})
        nulls = [k for k, v in asked.items() if v is None]
        if nulls:
            raise ValidationFailed(
                "Leave out a field to keep it; null is not a value.", fields=dict.fromkeys(nulls, "May not be null.")
            )
        current = RaceFields.model_construct(**{k: getattr(race, k) for k in RaceFields.model_fields})
        try:
            merged = RaceFields.model_validate({**current.model_dump(), **asked})
        except ValidationError as exc:
            raise ValidationFailed("Some fields are missing or invalid.", fields=_fields(exc)) from exc
        changes = cast(RaceChanges, {k: getattr(merged, k) for k in asked if getattr(merged, k) != getattr(race, k)})
        if not changes:
            return self.view(race, events)
        also: list[TransactItem] = []
        if "currency" in changes:
            taken = sum(self._inventory.usage(race_id, e.eventId, consistent=True).taken for e in events)
            if taken:
                raise Conflict(
                    f"{taken} places are taken at {race.currency} prices; the currency can no longer change."
                )
            paid = [e.priceCents for e in events if e.priceCents]  # a free event has no minimum
            if paid:  # the cheapest paid event is the one a dearer minimum would refuse
                _check_prices(changes["currency"], {"currency": min(paid)})
            also += [self._store.update_event_item(e, {"currency": changes["currency"]}) for e in events]
        also.append(
            self._audit.item(
                director,
                race_id,
                "race.update",
                race_id,
                changes={k: {"from": getattr(race, k), "to": v} for k, v in changes.items()},
            )
        )
        updated = self._store.apply_update(race, changes, also)
        self._catalog.invalidate(race_id, updated.version)
        if self._window is not None and {"registrationOpensAt", "registrationClosesAt"} & changes.keys():
            self._window.follow_new_times(director, updated)
        return self.get(director, race_id)

    def update_event(self, director: Director, race_id: str, event_id: str, patch: EventPatch) -> AdminRaceView:
        asked: dict[str, Any] = patch.model_dump(
            exclude_unset=True, exclude={"expectedVersion", "noMaxAge", "priceTiers", "noTeams"}
        )
        nulls = [k for k, v in asked.items() if v is None]
        if nulls:
            raise ValidationFailed(
                "Leave out a field to keep it; null is not a value.", fields=dict.fromkeys(nulls, "May not be null.")
            )
        if patch.noMaxAge:
            if "maxAge" in asked:
                raise ValidationFailed("Send maxAge or noMaxAge, not both.", fields={"noMaxAge": "Not with maxAge."})
            asked["maxAge"] = None
        if patch.noTeams:
            if {"teamMinSize", "teamMaxSize"} & asked.keys():
                raise ValidationFailed("Send team sizes or noTeams, not both.", fields={"noTeams": "Not with sizes."})
            asked |= {"teamMinSize": None, "teamMaxSize": None}
        for _ in range(CAP_CHANGE_TRIES):
            race, events = self.owned(director, race_id)
            _check_version(race, patch.expectedVersion)
            if patch.priceTiers is not None:
                _check_prices(
                    race.currency, {f"priceTiers.{i}.priceCents": t.priceCents for i, t in enumerate(patch.priceTiers)}
                )
                asked["priceTiers"] = [
                    t.model_dump(mode="json") for t in _tiers(patch.priceTiers, race.timeZone, "priceTiers")
                ]
            event = next((e for e in events if e.eventId == event_id), None)
            if event is None:
                raise EventNotFound(f"Race {race_id} has no event {event_id}.")
            current = {
                **event.model_dump(mode="json", include={"priceTiers"}),
                **event.model_dump(exclude={"priceTiers"}),
            }
            changes = cast(EventChanges, {k: v for k, v in asked.items() if current[k] != v})
            if not changes:
                return self.view(race, events)
            if "priceCents" in changes:
                _check_prices(race.currency, {"priceCents": changes["priceCents"]})
            low, high = changes.get("minAge", event.minAge), changes.get("maxAge", event.maxAge)
            if high is not None and low > high:
                raise ValidationFailed(
                    _AGE_RULE_MESSAGE, fields={"maxAge" if "maxAge" in changes else "minAge": _AGE_RULE_MESSAGE}
                )
            problem = team_range_problem(
                changes.get("teamMinSize", event.teamMinSize),
                changes.get("teamMaxSize", event.teamMaxSize),
                changes.get("cap", event.cap),
            )
            if problem:
                raise ValidationFailed(next(iter(problem.values())), fields=problem)
            shard_items: list[TransactItem] = []
            if "cap" in changes:
                usage = self._inventory.usage(race_id, event_id, consistent=True)
                try:
                    plan = plan_cap_change(usage.shards, changes["cap"], shards_for(changes["cap"]))
                except CapBelowPlacesTaken as exc:
                    raise CapBelowTaken(
                        f"{exc.taken} places of {event.name} are already taken (held, paid or confirmed); "
                        f"the cap cannot go below {exc.taken}.",
                        fields={"cap": f"At least {exc.taken}."},
                    ) from exc
                shard_items = self._inventory.cap_change_items(race_id, event_id, plan)
                added = sum(1 for c in plan if c.old_cap is None)
                if added:  # new shards exist only once the event names them (same transaction)
                    changes["shards"] = len(usage.shards) + added
            details = {k: {"from": current.get(k), "to": v} for k, v in changes.items()}
            try:
                self._run(
                    [
                        self._store.update_event_item(event, changes),
                        self._store.version_item(race),
                        self._audit.item(director, race_id, "event.update", event_id, changes=details),
                        *shard_items,
                    ]
                )
            except ConditionFailed:
                continue  # a hold, or another edit, moved something we read: read again
            if changes.get("cap", 0) > event.cap:
                self._catalog.places_came_back(race_id, event_id)
            return self._changed(director, race_id)
        raise Conflict("The event kept changing while we tried to save; please retry.")

    def copy_race(self, director: Director, race_id: str, request: CopyRequest) -> Race:
        """Next year's edition: the race's settings and events (places, prices, age rules), its
        dates moved together to the new race date; a new draft, with no registrations."""
        race, events = self.owned(director, race_id)
        # As in a patch: a field left out takes its default; sent as null it is refused (the
        # document shows no null), not read as "left out".
        nulls = [k for k, v in request.model_dump(exclude_unset=True).items() if v is None]
        if nulls:
            raise ValidationFailed(NULL_MESSAGE, fields=dict.fromkeys(nulls, "May not be null."))
        old_day = date.fromisoformat(race.raceDate)
        new_day = date.fromisoformat(request.raceDate) if request.raceDate else _a_year_later(old_day)
        if new_day < datetime.now(UTC).date():
            raise ValidationFailed(
                "The new edition's date has passed.", fields={"raceDate": "Give a race date from today on."}
            )
        shift = new_day - old_day
        fields = {k: getattr(race, k) for k in RaceFields.model_fields if k != "listing"}
        try:
            draft = RaceDraft.model_validate(
                {
                    **fields,
                    "name": request.name or race.name,
                    "raceDate": new_day.isoformat(),
                    "registrationOpensAt": race.registrationOpensAt + shift,
                    "registrationClosesAt": race.registrationClosesAt + shift,
                    "listing": "DRAFT",
                    "events": [
                        {
                            "name": e.name,
                            "cap": e.cap,
                            "priceCents": e.priceCents,
                            "minAge": e.minAge,
                            "priceTiers": [
                                {"startsAt": t.startsAt + shift, "priceCents": t.priceCents} for t in e.priceTiers
                            ],
                        }
                        | ({"maxAge": e.maxAge} if e.maxAge is not None else {})
                        | (
                            {"teamMinSize": e.teamMinSize, "teamMaxSize": e.teamMaxSize}
                            if e.teamMinSize is not None and e.teamMaxSize is not None
                            else {}
                        )
                        for e in events
                    ],
                }
            )
        except ValidationError as exc:
            raise ValidationFailed("The copy would not be a valid race.", fields=_fields(exc)) from exc
        return self.create_race(director.sub, draft, director=director, copied_from=race_id)

    # -- publishing ------------------------------------------------------------------------
    def publish(
        self, director: Director, race_id: str, listing: Literal["UNLISTED", "LISTED"], expected: int | None = None
    ) -> AdminRaceView:
        """Open the race to runners (by its link, or also on the race list), once it is complete."""
        race, events = self.owned(director, race_id)
        _check_version(race, expected)
        if race.listing == listing:
            return self.view(race, events)
        _check_complete(race, events)
        return self._relist(director, race, listing)

    def unpublish(self, director: Director, race_id: str, expected: int | None = None) -> AdminRaceView:
        """Back to a draft, closed to runners: only while no runner holds or has a place."""
        race, events = self.owned(director, race_id)
        _check_version(race, expected)
        if race.is_draft:
            return self.view(race, events)
        taken = sum(self._inventory.usage(race_id, e.eventId, consistent=True).taken for e in events)
        if taken:
            places = "1 place is" if taken == 1 else f"{taken} places are"
            raise Conflict(
                f"{places} held or taken: the race can no longer be a draft. "
                "Publish it UNLISTED to take it off the race list."
            )
        return self._relist(director, race, "DRAFT")

    def _relist(self, director: Director, race: Race, listing: Listing) -> AdminRaceView:
        audit = self._audit.item(
            director, race.raceId, "race.publish" if listing != "DRAFT" else "race.unpublish", race.raceId,
            changes={"listing": {"from": race.listing, "to": listing}},
        )  # fmt: skip
        updated = self._store.apply_update(race, {"listing": listing}, [audit])
        self._catalog.invalidate(race.raceId, updated.version)
        self._catalog.invalidate_listing()
        return self.get(director, race.raceId)

    # -- helpers ---------------------------------------------------------------------------
    def _run(self, items: list[TransactItem]) -> None:
        if self._transact is None:
            raise RuntimeError("RaceAdmin was built without a transaction runner")
        self._transact(items)

    def _changed(self, director: Director, race_id: str) -> AdminRaceView:
        race, events = self.owned(director, race_id)
        self._catalog.invalidate(race_id, race.version)
        return self.view(race, events)


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


def _prices(e: EventDraft) -> list[tuple[str, int]]:
    return [
        ("priceCents", e.priceCents),
        *((f"priceTiers.{i}.priceCents", t.priceCents) for i, t in enumerate(e.priceTiers)),
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


def _check_prices(currency: str, prices: dict[str, int]) -> None:
    """Refuses, naming the field, a price the provider would refuse to charge in ``currency``:
    checked when the director sets it, because a runner would otherwise meet the refusal
    only after holding a place. (A schema cannot say it: the minimum depends on the race's
    currency.)"""
    # 0 is a free entry: nothing is charged, so no minimum applies.
    problems = {
        name: p for name, price in prices.items() if price and (p := charge_problem(price, currency)) is not None
    }
    if problems:
        raise ValidationFailed(f"A price cannot be charged in {currency}.", fields=problems)


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
        version=race.version,
    )
