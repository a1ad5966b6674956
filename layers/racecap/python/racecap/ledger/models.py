"""The ledger's records and the API's shapes."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal

from annotated_types import Gt, Le
from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    Strict,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from racecap.models import WHOLE_NUMBER, JsonInt, Model
from racecap.registration.models import RegistrationRow


class RefundPhase(StrEnum):
    PENDING = "PENDING"  # the amount is reserved; the provider's answer is not recorded yet
    PROCESSING = "PROCESSING"  # the provider has it and says pending (the card's bank has not confirmed)
    SUCCEEDED = "SUCCEEDED"
    REFUSED = "REFUSED"  # the provider refused: the reservation was released
    FAILED = "FAILED"  # the provider failed or cancelled it later: its amount is refundable again


# Reserved in the registration's sum, the provider's last word not in yet: the sweeper looks again.
OPEN_PHASES = frozenset({RefundPhase.PENDING, RefundPhase.PROCESSING})
# Counted in the registration's sum of refunds (a pending one may succeed).
COUNTED_PHASES = frozenset({RefundPhase.PENDING, RefundPhase.PROCESSING, RefundPhase.SUCCEEDED})

RefundOrigin = Literal["refund", "cancel", "outside"]


class LedgerEntry(Model):
    kind: Literal["payment", "refund"]
    key: str = Field(description="The action's idempotency key at the provider (one per payment or refund).")
    providerId: str = Field(description="The provider's PaymentIntent or Refund id ('' while a refund is pending).")
    amountCents: int
    currency: str
    reason: str = ""
    actor: str = Field(description="Who moved the money: 'runner' for the entry payment, else a director's id.")
    at: str
    status: RefundPhase | Literal["SUCCEEDED"] = Field(
        default="SUCCEEDED",
        description="PENDING: reserved, waiting for the provider's answer (settled automatically, "
        "never lost); PROCESSING: the provider has it, the card's bank has not confirmed; SUCCEEDED; "
        "REFUSED: the provider refused, nothing was refunded; FAILED: the provider failed it later, "
        "its amount can be refunded again.",
    )
    origin: RefundOrigin = Field(
        default="refund",
        description="A refund's origin: a director's refund of an amount, a cancellation's refund, or one made "
        "outside Racecap (the provider's dashboard).",
    )
    intentId: str = Field(
        default="", description="The payment a refund goes back to ('' on older entries: the entry payment)."
    )
    failureReason: str = Field(default="", description="Why the provider failed a refund (FAILED only).")


class Statement(Model):
    registrationId: str
    currency: str
    chargedCents: int = Field(description="What the registration paid in all, every payment together.")
    refundedCents: int = Field(description="Refunds reserved or made (a pending refund counts: it may succeed).")
    pendingCents: int = Field(
        default=0,
        description="Of `refundedCents`, what waits for the provider's last word (PENDING or PROCESSING).",
    )
    leftCents: int = Field(description="What can still be refunded.")
    entries: list[LedgerEntry] = Field(
        description="The payments oldest first (the entry payment, then any other: an upgrade, a fee), "
        "then every refund."
    )


class RefundRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    amountCents: JsonInt = Field(gt=0, le=99_999_999, description="In the currency's smallest unit.")
    reason: str = Field(default="", max_length=500)


class MyCancelRequest(Model):
    """A runner cancelling their own entry: the refund they were shown, sent back."""

    model_config = ConfigDict(extra="forbid")

    amountCents: JsonInt = Field(
        ge=0,
        le=99_999_999,
        description="The refund the runner was shown (`GET …/cancellation`'s `amountCents`): if it changed since, "
        "409 QUOTE_CHANGED and nothing happens.",
    )


class RefundView(Model):
    registrationId: str
    refund: LedgerEntry = Field(description="The refund (its part on the newest payment when it is split).")
    parts: list[LedgerEntry] = Field(
        default_factory=list,
        description="Every part of this refund, one per payment it goes back to, newest payment first "
        "(one part for a registration with one payment).",
    )
    statement: Statement


LedgerState = Literal["FREE", "PAID", "PARTLY_REFUNDED", "REFUNDED", "REFUND_PENDING"]


def refunded_of(row: Mapping[str, Any]) -> int:
    """What a registration's refunds add up to, from its row (no read of the ledger's entries):
    the ledger's sum, or the whole charge for one cancelled before the ledger and the refund
    choice existed (it was refunded in full, and nothing recorded a sum)."""
    if row.get("status") == "CANCELLED" and not row.get("cancelRefund"):
        return int(row.get("amountCents") or 0)
    return int(row.get("ledgerRefundedCents") or 0)


def ledger_state(row: Mapping[str, Any]) -> LedgerState:
    """The ledger's last state for a registration row: what a director's sheet sorts by."""
    charged = int(row.get("amountCents") or 0)
    if charged == 0:
        return "FREE"
    if row.get("status") == "CANCELLING" and int(row.get("cancelRefundCents") or 0):
        return "REFUND_PENDING"  # the cancellation's refund is reserved, the provider not yet heard
    if int(row.get("ledgerPending") or 0) > 0:
        return "REFUND_PENDING"  # a director's refund of an amount, likewise
    refunded = refunded_of(row)
    if refunded <= 0:
        return "PAID"
    return "REFUNDED" if refunded >= charged else "PARTLY_REFUNDED"


class RegistrationDetail(RegistrationRow):
    """One runner's registration for the director: the list's row and its money."""

    ledger: Statement = Field(
        description="What was charged and refunded: the entry payment, then every refund with its amount, "
        "reason, who asked for it and when (no provider secret)."
    )


class CancellationView(Model):
    registrationId: str
    status: Literal["CANCELLED"] = Field(description="The registration's new state.")
    refund: Literal["FULL", "NONE", "AMOUNT"] = Field(description="The refund chosen when it was cancelled.")
    refundedCents: int = Field(description="What this cancellation refunded, in the currency's smallest unit.")
    refundId: str = Field(description="The provider's refund id ('' when nothing was refunded).")
    amountCents: int = Field(description="What the registration paid.")
    currency: str
    cancelledAt: str
    changed: bool = Field(description="False when the registration was already cancelled (a repeat).")


# A director's cancellation of one registration (no docstring: it would enter the OpenAPI document).
class CancelRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    refund: Literal["FULL", "NONE", "AMOUNT"] = Field(
        default="FULL",
        description="FULL: all that is left of the payment when the cancellation reserves it (after earlier and "
        "concurrent refunds); NONE: nothing; "
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


# -- a place deferred to the next edition (ledger.deferral) ---------------------------------------
class DeferralQuote(Model):
    allowed: bool = Field(description="Whether the place may be deferred now; `note` says why not.")
    until: str | None = Field(default=None, description="YYYY-MM-DD: the last day (race's time zone).")
    nextRaceId: str | None = None
    nextRaceName: str | None = None
    nextRaceDate: str | None = None
    paidCents: int = Field(description="What this entry paid: the entry payment and any beyond it.")
    feeCents: int = Field(description="What the organiser keeps.")
    creditCents: int = Field(description="The credit for the next edition (send it back to defer).")
    currency: str
    note: str = Field(description="What the runner is told before confirming.")


class DeferralRequest(Model):
    model_config = ConfigDict(extra="forbid")

    creditCents: JsonInt = Field(ge=0, le=100_000_000, description="The quote's credit, as the runner saw it.")


class DeferralAnswer(Model):
    registrationId: str
    status: str
    nextRaceId: str
    code: str = Field(description="The personal code for the next edition (also sent by email).")
    creditCents: int
    currency: str
    message: str
