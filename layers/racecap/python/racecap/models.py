"""The records the logic and the data layer pass each other: holds, registrations, the
queue messages. Typed, so a misspelt field or status fails at the boundary (or in mypy),
not deep inside a transaction.

The public API's response models stay in ``models.py`` (their names are the OpenAPI
document's); the statuses here are called *phases* so they never collide with them.
Field names are camelCase because they are the stored attribute names.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict


def _whole_number(v: object) -> object:
    # JSON Schema's "integer" is any number without a fraction, 5.0 included; true is not one.
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


# An integer in a request body, strict per field: `true`, "5" or [] are refused (pydantic's
# lax int would take the first two), 5.0 is 5. Not a model-wide strict mode: Powertools
# validates the parsed JSON as Python objects, where that would refuse ISO date strings.
WHOLE_NUMBER = BeforeValidator(_whole_number)


JsonInt = Annotated[int, Strict(), WHOLE_NUMBER]


# An optional one spells its bounds inside, before WHOLE_NUMBER: pydantic applies bounds
# given on an optional field after the validator and then writes them into the document
# as raw "ge"/"le" keys, which no client or fuzzer reads (the bounds would be invisible).
# e.g. ``cap: Annotated[int, Strict(), Gt(0), Le(10), WHOLE_NUMBER] | None = None``


# The years a director's dates and times may name: a race date, registration times, price tiers,
# a code's validity. Far wider than any race needs, and far enough inside Python's years 1-9999
# that every offset the API adds stays a date: a copy's shift to its new race date, the retention
# days after the race, a time zone's hours (a fuzzer's 9999-12-31 plus any of them was a 500).
FIRST_YEAR, LAST_YEAR = 1900, 2999
YEARS = f"years {FIRST_YEAR} to {LAST_YEAR}"
AnyDate = TypeVar("AnyDate", bound=date)  # a datetime is a date


def within_years(v: AnyDate) -> AnyDate:
    """``v`` if its year is one a director may name (in its own zone, before any conversion)."""
    if not FIRST_YEAR <= v.year <= LAST_YEAR:
        raise ValueError(f"Out of range: give a date in {YEARS}.")
    return v


class Model(BaseModel):
    """Every Racecap model: its validator is built by its first use, not by the import.
    Building all of them at import cost each cold start ~40 ms for models a function never
    validates (issue 14); a function pays for the few it uses, once."""

    model_config = ConfigDict(defer_build=True)


# -- the race directors' admin API ---------------------------------------------------
class Director(Model):
    """Who is calling the admin API: from the JWT's claims (Cognito on AWS)."""

    sub: str  # the stable user id; races are owned by it
    username: str
    email: str = ""


ActorKind = Literal["director", "runner", "provider", "system"]


class Actor(Model):
    """Who made a change, as the audit trail names it: a director (by id and name), a runner (by
    registration id, never by email or name), the payment provider, or a system job. No address
    is ever part of it: the trail outlives the retention period that deletes runners' data."""

    kind: ActorKind
    id: str = Field(description="A director's id, a runner's registration id, or the job's or provider's name.")
    name: str = Field(description="How the console says who it was.")

    @classmethod
    def of(cls, who: Director | Actor) -> Actor:
        if isinstance(who, Actor):
            return who
        return cls(kind=director_kind(who.sub), id=who.sub, name=who.username)

    @classmethod
    def runner(cls, registration_id: str) -> Actor:
        return cls(kind="runner", id=registration_id, name=f"Runner of registration {registration_id}")


# The ids the provider and the jobs acted under before the actor was typed (as fake directors).
PROVIDER_ID = "payment-provider"


def director_kind(sub: str) -> ActorKind:
    """The kind of a legacy actor, from the id it was written under."""
    if sub == PROVIDER_ID:
        return "provider"
    if sub == "runner":  # a registration's ``cancelledBy`` when its runner cancelled it
        return "runner"
    if sub.startswith(("racecap:", "system-")):
        return "system"
    return "director"


class _Record(Model):
    model_config = ConfigDict(frozen=True, extra="ignore")

    def __getitem__(self, name: str) -> Any:
        """Read a field by its stored attribute name (for audits and tests that read tables)."""
        return getattr(self, name)


# An address as runners type it, shared by every capability that takes one (registration, the
# waitlist). The rule as the document states it, read alike by Python's ``re`` and a client's
# ECMA-262 regex: ``\s`` differs between them on control characters (Python's includes
# \x1c-\x1f and \x85, ECMA's \ufeff), so those are excluded outright, and only plain
# spaces, tabs and line ends may surround the address (they are trimmed).
_ADDRESS_PART = r"[^@\s\x00-\x1f\x7f-\x9f\ufeff]"
EMAIL_PATTERN = rf"^[ \t\n\r]*{_ADDRESS_PART}{{1,64}}@{_ADDRESS_PART}+\.{_ADDRESS_PART}{{2,}}[ \t\n\r]*$"


def normalize_email(raw: str) -> str:
    """Emails compare case-insensitively after trimming (the contract)."""
    return raw.strip().lower()
