"""The admin API's race set-up shapes: drafts, patches, copies and the directors' views."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal
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
    model_validator,
)

from racecap.errors import FieldErrors
from racecap.models import WHOLE_NUMBER, YEARS, JsonInt, Model, within_years
from racecap.money import minimum_charge
from racecap.races.models import (
    MAX_OFFER_WINDOW_HOURS,
    MAX_WAITLIST_LENGTH,
    Listing,
    PriceTier,
    PublicRaceStatus,
    RefundPolicy,
    RegistrationState,
    WaitlistSettings,
)
from racecap.races.rules import (
    DEFAULT_MIN_AGE,
    DEFAULT_RETENTION_DAYS,
    MAX_AGE,
    MAX_RETENTION_DAYS,
    MAX_TEAM_SIZE,
    MIN_RETENTION_DAYS,
    MIN_TEAM_SIZE,
)


class AdminEventView(Model):
    eventId: str
    name: str
    cap: int
    priceCents: int = Field(description="The price until the first tier starts.")
    priceTiers: list[PriceTier]
    priceNow: int = Field(description="The price in force now.")
    currency: str
    shards: int
    minAge: int
    maxAge: int | None
    teamMinSize: int | None = None
    teamMaxSize: int | None = None
    taken: int = Field(description="Places held, paid or confirmed right now.")
    placesLeft: int
    waitlist: WaitlistSettings = Field(description="The event's waitlist (off by default).")


class AdminRaceSummary(Model):
    raceId: str
    name: str
    raceDate: str
    timeZone: str
    status: PublicRaceStatus
    registrationState: RegistrationState
    registrationOpensAt: datetime
    registrationClosesAt: datetime
    listing: Listing = Field(
        description="DRAFT: closed to runners; UNLISTED: open by its link only; LISTED: also on the race list."
    )
    published: bool = Field(description="Not a draft (listing is UNLISTED or LISTED).")
    currency: str = Field(description="What its prices and money are counted in (the list shows money in it).")
    version: int


class AdminRaceList(Model):
    races: list[AdminRaceSummary]


class AdminRaceView(AdminRaceSummary):
    location: str
    description: str
    holdMinutes: int
    retentionDays: int = Field(description="Days after the race that runners' personal data is kept.")
    personalDataDeletedOn: str = Field(
        description="YYYY-MM-DD: the day the retention job deletes runners' emails, dates of birth and "
        "payment references (raceDate + retentionDays); names, bibs, results and stats stay."
    )
    purgedAt: datetime | None = Field(description="When that deletion happened; null until then.")
    refundPolicy: RefundPolicy = Field(description="What runners may do with their own entry (off by default).")
    events: list[AdminEventView]


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
        description=f"When this price starts: ISO 8601; without an offset, the race's local time ({YEARS})."
    )
    priceCents: JsonInt = Field(ge=0, le=10_000_000, description=PRICE_DESCRIPTION)

    @field_validator("startsAt", mode="before")
    @classmethod
    def _text_time(cls, v: object) -> object:
        return _iso_text(v)

    @field_validator("startsAt")
    @classmethod
    def _within_years(cls, v: datetime) -> datetime:
        return within_years(v)


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


class WaitlistFields(Model):
    """An event's waitlist as a director sends it (strict: `true` is not a number of hours)."""

    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(default=False, description="Runners may join once the event is sold out.")
    offerWindowHours: JsonInt = Field(
        default=48,
        ge=1,
        le=MAX_OFFER_WINDOW_HOURS,
        description="Hours a runner offered a freed place has to take it (never past registration's close).",
    )
    maxLength: Annotated[int, Strict(), Ge(1), Le(MAX_WAITLIST_LENGTH), WHOLE_NUMBER] | None = Field(
        default=None, description="The most confirmed runners the list holds at once; leave out for no cap."
    )


WAITLIST_DESCRIPTION = (
    "The event's waitlist: runners join it once the event is sold out, confirm their address by email, and are "
    "offered freed places in the order they joined."
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
    waitlist: WaitlistFields = Field(default_factory=WaitlistFields, description=WAITLIST_DESCRIPTION)

    @field_validator("maxAge")
    @classmethod
    def _rule_in_order(cls, v: int | None, info: ValidationInfo) -> int | None:
        low = info.data.get("minAge")
        if v is not None and low is not None and v < low:
            raise ValueError(_AGE_RULE_MESSAGE)
        return v


def _day(v: str) -> str:
    """A real day (``YYYY-MM-DD``) in the years a director may name."""
    try:
        day = date.fromisoformat(v)
    except ValueError as exc:
        raise ValueError("Not a date; use YYYY-MM-DD.") from exc
    within_years(day)
    return v


def _iso_text(v: object) -> object:
    """A time arrives as ISO 8601 text (pydantic would also take a number of seconds)."""
    if not isinstance(v, str | datetime):
        raise ValueError("Use an ISO 8601 time with a zone, e.g. 2026-05-01T09:00:00Z.")
    return v


class TierFields(Model):
    model_config = ConfigDict(extra="forbid")

    until: str = Field(
        pattern=DATE_PATTERN, description=f"YYYY-MM-DD, the tier's last day in the race's zone ({YEARS})."
    )
    percent: JsonInt = Field(ge=0, le=100, description="Of what the runner paid, before the fee.")

    @field_validator("until")
    @classmethod
    def _real_date(cls, v: str) -> str:
        return _day(v)


class PolicyFields(Model):
    """What runners may do with their own entry (validated: tiers by increasing day)."""

    model_config = ConfigDict(extra="forbid")

    runnersMayCancel: StrictBool = False
    tiers: list[TierFields] = Field(default_factory=list, max_length=10)
    feeCents: JsonInt = Field(default=0, ge=0, le=10_000_000)
    editUntil: str | None = Field(default=None, pattern=DATE_PATTERN, description=f"YYYY-MM-DD ({YEARS}).")
    transfersUntil: str | None = Field(
        default=None,
        pattern=DATE_PATTERN,
        description=f"YYYY-MM-DD ({YEARS}): the last day runners may hand their place to someone else; none: no "
        "transfers.",
    )
    transferFeeCents: JsonInt = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="What the new runner pays to take a place over (0, or at least the provider's minimum charge "
        "in the race's currency).",
    )
    transferredRefundable: StrictBool = True
    switchesUntil: str | None = Field(
        default=None,
        pattern=DATE_PATTERN,
        description=f"YYYY-MM-DD ({YEARS}): the last day runners may switch to another event; none: no switches.",
    )

    deferralsUntil: str | None = Field(
        default=None,
        pattern=DATE_PATTERN,
        description=f"YYYY-MM-DD ({YEARS}): the last day runners may defer to the next edition; none: no deferrals.",
    )
    deferralFeeCents: JsonInt = Field(default=0, ge=0, le=10_000_000)

    @field_validator("editUntil", "transfersUntil", "switchesUntil", "deferralsUntil")
    @classmethod
    def _edit_day(cls, v: str | None) -> str | None:
        return _day(v) if v is not None else None

    @field_validator("tiers")
    @classmethod
    def _by_day(cls, v: list[TierFields]) -> list[TierFields]:
        days = [t.until for t in v]
        if days != sorted(set(days)):
            raise ValueError("Tiers go by increasing day, one tier per day.")
        return v


class RaceFields(Model):
    """A race's own settings, validated together: the times must make sense as a whole."""

    model_config = _STRICT

    name: str = Field(min_length=1, max_length=150, pattern=SOME_TEXT)
    location: str = Field(default="", max_length=150)
    raceDate: str = Field(
        pattern=DATE_PATTERN,
        description=f"YYYY-MM-DD, local to the race ({YEARS}, as every date and time of the admin API)",
        json_schema_extra={"format": "date"},
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
    registrationOpensAt: datetime = Field(description=f"ISO 8601 ({YEARS}).")
    registrationClosesAt: datetime = Field(description=f"ISO 8601 ({YEARS}); by the race date.")
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
    refundPolicy: PolicyFields = Field(
        default_factory=PolicyFields,
        description="What runners may do with their own entry: cancel under refund tiers less a fee, edit "
        "their details until a day (dates in the race's zone). Off by default.",
    )

    @field_validator("raceDate")
    @classmethod
    def _real_date(cls, v: str) -> str:
        return _day(v)

    @model_validator(mode="after")
    def _policy_by_the_race(self) -> RaceFields:
        policy, after = self.refundPolicy, f"After the race date ({self.raceDate})."
        late = {f"refundPolicy.tiers.{i}.until": after for i, t in enumerate(policy.tiers) if t.until > self.raceDate}
        if policy.editUntil and policy.editUntil > self.raceDate:
            late["refundPolicy.editUntil"] = after
        if policy.transfersUntil and policy.transfersUntil > self.raceDate:
            late["refundPolicy.transfersUntil"] = after
        if policy.switchesUntil and policy.switchesUntil > self.raceDate:
            late["refundPolicy.switchesUntil"] = after
        if policy.deferralsUntil and policy.deferralsUntil > self.raceDate:
            late["refundPolicy.deferralsUntil"] = after
        if late:
            raise FieldErrors("The refund policy's days must be on or before the race date.", late)
        least = minimum_charge(self.currency) or 0
        if 0 < policy.transferFeeCents < least:
            raise FieldErrors(
                "The payment provider charges no less than its minimum: make the transfer fee 0 or at least that.",
                {"refundPolicy.transferFeeCents": f"At least {least} ({self.currency}'s smallest unit), or 0."},
            )
        return self

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
        within_years(v)  # before the zone moves it: year 1 in Tokyo is no UTC time
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
    raceDate: str | None = Field(
        default=None, pattern=DATE_PATTERN, description=f"YYYY-MM-DD ({YEARS})", json_schema_extra={"format": "date"}
    )
    description: str | None = Field(default=None, max_length=5000)
    currency: Currency | None = Field(
        default=None,
        description="Only while no place is taken (409). Every price of the race, each event's and each of its "
        "price tiers', must be one the provider charges in it: else 400 naming `currency` and each such price's "
        "field (`events.1.priceTiers.0.priceCents`).",
    )
    timeZone: str | None = Field(
        default=None, min_length=1, max_length=64, description="IANA name; the window's instants stay as they are."
    )
    registrationOpensAt: datetime | None = Field(default=None, description=f"ISO 8601 ({YEARS}).")
    registrationClosesAt: datetime | None = Field(default=None, description=f"ISO 8601 ({YEARS}).")
    holdMinutes: Annotated[int, Strict(), Ge(1), Le(60), WHOLE_NUMBER] | None = None
    retentionDays: Annotated[int, Strict(), Ge(MIN_RETENTION_DAYS), Le(MAX_RETENTION_DAYS), WHOLE_NUMBER] | None = None
    refundPolicy: PolicyFields | None = Field(
        default=None, description="The whole policy (it replaces the one before): see the race's `refundPolicy`."
    )

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
    waitlist: WaitlistFields | None = Field(
        default=None, description=WAITLIST_DESCRIPTION + " The whole setting (it replaces the one before)."
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
        description=f"The new edition's date, YYYY-MM-DD ({YEARS}); default: the same day a year later. The "
        "registration window and the price tiers move by as many days, and must stay in those years.",
        json_schema_extra={"format": "date"},
    )

    model_config = ConfigDict(**_STRICT, json_schema_extra=_null_is_not_a_value)

    @field_validator("raceDate")
    @classmethod
    def _real_date(cls, v: str | None) -> str | None:
        return v if v is None else _day(v)


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
        faulted = (err.get("ctx") or {}).get("error")
        if isinstance(faulted, FieldErrors):  # a check across fields, naming each it faults
            for name, message in faulted.fields.items():
                out.setdefault(name, message)
            continue
        name = ".".join(str(p) for p in err.get("loc", ())) or "body"
        out.setdefault(name, str(err.get("msg", "Invalid value.")).removeprefix("Value error, "))
    return out
