"""The ledger's records and the API's shapes."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field

from racecap.models import JsonInt, Model, RegistrationRow


class RefundPhase(StrEnum):
    PENDING = "PENDING"  # the amount is reserved; the provider's answer is not recorded yet
    SUCCEEDED = "SUCCEEDED"
    REFUSED = "REFUSED"  # the provider refused: the reservation was released


class LedgerEntry(Model):
    kind: Literal["payment", "refund"]
    key: str = Field(description="The action's idempotency key at the provider (one per payment or refund).")
    providerId: str = Field(description="The provider's PaymentIntent or Refund id ('' while a refund is pending).")
    amountCents: int
    currency: str
    reason: str = ""
    actor: str = Field(description="Who moved the money: 'runner' for the entry payment, else a director's id.")
    at: str
    status: RefundPhase | Literal["SUCCEEDED"] = "SUCCEEDED"


class Statement(Model):
    registrationId: str
    currency: str
    chargedCents: int
    refundedCents: int = Field(description="Refunds reserved or made (a pending refund counts: it may succeed).")
    leftCents: int = Field(description="What can still be refunded.")
    entries: list[LedgerEntry] = Field(description="Oldest first: the entry payment, then every refund.")


class RefundRequest(Model):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    amountCents: JsonInt = Field(gt=0, le=99_999_999, description="In the currency's smallest unit.")
    reason: str = Field(default="", max_length=500)


class RefundView(Model):
    registrationId: str
    refund: LedgerEntry
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
