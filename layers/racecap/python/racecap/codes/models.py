"""What the codes API takes and says (pydantic, so the OpenAPI document describes it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from annotated_types import Ge, Le
from pydantic import ConfigDict, Field, Strict, StrictBool, field_validator, model_validator

from racecap.models import WHOLE_NUMBER, YEARS, JsonInt, Model, within_years

# Codes are compared in capitals ("spring10" is SPRING10), so a runner typing the code they
# heard on the radio gets it; letters, digits, '-' and '_' only, so a code survives a CSV, a
# URL and a poster.
CODE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{2,39}$"
# The most uses one code may carry: a use is one conditional write on one of its shards.
MAX_USES = 100_000
# Shards of a code's use counter: each a DynamoDB item taking ~1,000 writes/s, like a cap's.
# A code is raced by the runners who have it; a few shards keep those writes from colliding
# on one item without making the last uses hard to find (each claim tries the shards in turn).
MAX_SHARDS = 8
USES_PER_SHARD = 25
# Single-use codes made in one call (a sponsor's batch); the CSV comes back in the answer.
MAX_BULK = 1_000
DiscountKind = Literal["PERCENT", "AMOUNT"]


class CodeTerms(Model):
    """What a code gives, where and when: shared by one code and a batch."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    kind: DiscountKind = Field(description="PERCENT: `percent` off the held price; AMOUNT: `amountCents` off it.")
    # Optional bounded ints spell their bounds inside (see racecap.models.JsonInt).
    percent: Annotated[int, Strict(), Ge(1), Le(100), WHOLE_NUMBER] | None = Field(
        default=None, description="With PERCENT: 1-100 (100 makes the entry free)."
    )
    amountCents: Annotated[int, Strict(), Ge(1), Le(99_999_999), WHOLE_NUMBER] | None = Field(
        default=None, description="With AMOUNT: off the price, in the event's currency's unit."
    )
    eventIds: list[str] = Field(
        default=[], max_length=50, description="The events it is valid for; empty: every event of the race."
    )
    validFrom: datetime | None = Field(
        default=None, description=f"From when it can be used (without an offset: in the race's time zone; {YEARS})."
    )
    validTo: datetime | None = Field(
        default=None, description=f"Until when (without an offset: in the race's time zone; {YEARS})."
    )
    note: str | None = Field(default=None, max_length=200, description="For the director: who the code is for.")
    guaranteed: StrictBool = Field(
        default=False,
        description="A guaranteed entry (charity, qualifier, deferral): on an event drawn by ballot, its holder "
        "holds one of the places the ballot keeps, once the ballot is drawn "
        "(POST /api/races/{raceId}/events/{eventId}/holds/guaranteed). Its discount applies as any code's.",
    )

    @model_validator(mode="after")
    def _amount_matches_kind(self) -> CodeTerms:
        if self.kind == "PERCENT" and (self.percent is None or self.amountCents is not None):
            raise ValueError("A PERCENT code takes `percent` (1-100) and no `amountCents`.")
        if self.kind == "AMOUNT" and (self.amountCents is None or self.percent is not None):
            raise ValueError("An AMOUNT code takes `amountCents` and no `percent`.")
        # One with an offset and one without are compared once both are in UTC (in_zone).
        both = self.validFrom and self.validTo and _comparable(self.validFrom, self.validTo)
        if both and self.validTo <= self.validFrom:  # type: ignore[operator]
            raise ValueError("validTo must be after validFrom.")
        return self

    def in_zone(self, zone: str) -> CodeTerms:
        """Times given without an offset are the race's local times: stored in UTC."""
        return self.model_copy(update={"validFrom": _utc(self.validFrom, zone), "validTo": _utc(self.validTo, zone)})


def _comparable(a: datetime, b: datetime) -> bool:
    return (a.tzinfo is None) == (b.tzinfo is None)


def _utc(value: datetime | None, zone: str) -> datetime | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=ZoneInfo(zone))).astimezone(UTC)


class _CodeInput(CodeTerms):
    """What a director sends: its times in the years a director may name (a stored code's terms
    are read as they were written)."""

    @field_validator("validFrom", "validTo")
    @classmethod
    def _within_years(cls, v: datetime | None) -> datetime | None:
        return v if v is None else within_years(v)


class CodeDraft(_CodeInput):
    code: str = Field(pattern=CODE_PATTERN, description="3-40 letters, digits, '-' or '_'; compared in capitals.")
    maxUses: Annotated[int, Strict(), Ge(1), Le(MAX_USES), WHOLE_NUMBER] | None = Field(
        default=None, description="Uses it allows; none: no limit."
    )

    @field_validator("code")
    @classmethod
    def _capitals(cls, v: str) -> str:
        return v.upper()


class BulkCodesRequest(_CodeInput):
    """N single-use codes with the same terms (a sponsor's batch), each ``<prefix>-<random>``."""

    count: JsonInt = Field(ge=1, le=MAX_BULK)
    prefix: str = Field(pattern=r"^[A-Za-z0-9]{2,16}$", description="The codes' first part, e.g. SPONSOR.")

    @field_validator("prefix")
    @classmethod
    def _prefix_capitals(cls, v: str) -> str:
        return v.upper()


class CodeView(Model):
    code: str
    kind: DiscountKind
    percent: int | None
    amountCents: int | None
    eventIds: list[str]
    validFrom: datetime | None
    validTo: datetime | None
    maxUses: int | None
    uses: int = Field(description="Uses taken now: holds carrying it, paid or not yet.")
    note: str | None
    guaranteed: bool = Field(description="A guaranteed entry: holds a place a ballot keeps (see CodeDraft).")
    createdAt: datetime


class CodeList(Model):
    codes: list[CodeView]


class ApplyCode(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    # The pattern says in the document what stripping leaves: at least one character that is not a space.
    code: str = Field(
        min_length=1, max_length=40, pattern=r"\S", description="As the runner typed it; compared in capitals."
    )


class GuaranteedHoldRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    code: str = Field(
        min_length=1, max_length=40, pattern=r"\S", description="The guaranteed-entry code, as the runner typed it."
    )


class CodeUses(Model):
    """One discount code's uses in the director's stats (racecap.codes)."""

    code: str
    used: int = Field(description="Uses taken now: registrations and holds not paid yet carrying it.")
    limit: int | None = Field(description="The uses it allows; none: no limit.")
