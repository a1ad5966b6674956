"""What a runner's registration must contain. The site's inline checks mirror these.

Whether the runner may enter the event (its age rule, on race day) is the event's to say:
``racecap.logic.eligibility``, checked once the hold's race is known."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Literal

from annotated_types import Gt, Le
from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    Strict,
    StringConstraints,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from racecap.logic.eligibility import age_on
from racecap.models import WHOLE_NUMBER, Model
from racecap.questions.models import Answers, WaiverAcceptance

# Deliberately permissive (RFC 5322 is not what runners type); the confirmation email
# is the real proof. One @, a dot in the domain, no spaces, at most 254 characters.
EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}$")
# A plausibility check only (a mistyped year), measured today; the event's own rule decides.
MAX_AGE_YEARS = 120


def normalize_email(raw: str) -> str:
    """Emails compare case-insensitively after trimming (the contract)."""
    return raw.strip().lower()


# Optional: a PaymentMethod id (``pm_…``) to confirm on the server (load generators, Stripe's
# "finalize on the server" flow). Without it the answer carries the intent's client secret and
# the browser confirms with Stripe.js. Never card numbers.
PaymentMethodId = Annotated[str, StringConstraints(min_length=4, max_length=200, pattern=r"^pm_[A-Za-z0-9_]+$")]


class RunnerDetails(Model):
    """One runner's details: a registration's, or a team member's (``racecap.teams``)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    # The patterns say in the document what the validators check (names are trimmed first).
    email: str = Field(min_length=3, max_length=254, pattern=r"^\s*[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}\s*$")
    firstName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    lastName: str = Field(min_length=1, max_length=100, pattern=r"\S")
    dateOfBirth: date
    # The answers to the event's registration questions (GET /api/races/{raceId}/events/{eventId}/questions),
    # by question id; checked against the questions as they stand (racecap.questions).
    answers: Answers | None = Field(default=None, max_length=60)
    # The event's waiver accepted (and, for a runner under 18 on race day, by a parent or guardian).
    waiver: WaiverAcceptance | None = None

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        v = normalize_email(v)
        if not EMAIL_RE.match(v):
            raise ValueError("Enter an email address like name@example.com.")
        return v

    @field_validator("dateOfBirth", mode="before")
    @classmethod
    def _strict_date(cls, v: object) -> object:
        if not isinstance(v, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            raise ValueError("Use the form YYYY-MM-DD.")
        return v

    @field_validator("dateOfBirth")
    @classmethod
    def _plausible_age(cls, v: date) -> date:
        today = datetime.now(UTC).date()
        if v >= today:
            raise ValueError("The date of birth must be in the past.")
        if age_on(v, today) > MAX_AGE_YEARS:
            raise ValueError("Please check the year of birth.")
        return v


class RegistrationRequest(RunnerDetails):
    paymentMethod: PaymentMethodId | None = None


# A director's cancellation of one registration (no docstring: it would enter the OpenAPI document).
class CancelRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    refund: Literal["FULL", "NONE", "AMOUNT"] = Field(
        default="FULL",
        description="FULL: all that is left of the payment after earlier refunds; NONE: nothing; "
        "AMOUNT: `amountCents`.",
    )
    amountCents: Annotated[int, Strict(), Gt(0), Le(99_999_999), WHOLE_NUMBER] | None = Field(
        default=None,
        validate_default=True,
        description="With `refund: AMOUNT` only (and required there), in the currency's smallest unit.",
    )
    reason: str = Field(default="", max_length=500, description="Kept in the audit trail.")

    @classmethod
    def __get_pydantic_json_schema__(cls, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        """The document says what the validator checks: one of two shapes, so a client (or a
        fuzzer) reads that ``amountCents`` goes with ``refund: AMOUNT`` only, and always there."""
        schema = handler.resolve_ref_schema(handler(core))
        props = schema.pop("properties")
        schema.pop("additionalProperties", None)
        amount = next(s for s in props["amountCents"]["anyOf"] if s.get("type") == "integer")
        amount |= {"description": props["amountCents"]["description"]}
        whole = {**props["refund"], "enum": ["FULL", "NONE"]}
        schema["oneOf"] = [
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {"refund": whole, "reason": props["reason"]},
            },
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "refund": {"type": "string", "const": "AMOUNT", "description": props["refund"]["description"]},
                    "amountCents": amount,
                    "reason": props["reason"],
                },
                "required": ["refund", "amountCents"],
            },
        ]
        return schema

    @field_validator("amountCents")
    @classmethod
    def _amount_with_amount_only(cls, v: int | None, info: ValidationInfo) -> int | None:
        choice = info.data.get("refund")
        if choice == "AMOUNT" and v is None:
            raise ValueError("amountCents is required with refund AMOUNT.")
        if choice != "AMOUNT" and v is not None:
            raise ValueError("amountCents goes with refund AMOUNT only.")
        return v
