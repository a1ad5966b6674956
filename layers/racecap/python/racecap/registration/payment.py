"""The payment step's keys and metadata: one PaymentIntent per hold, never two."""

from __future__ import annotations

import hashlib

from racecap.holds.models import (
    SETTLED_PHASES,
    Attempt,
    Hold,
)
from racecap.payments.port import (
    PaymentIntent,
)


def attempt_key(hold_id: str, email: str) -> str:
    """Same hold + same email = same attempt (a retry, a second tab): it may begin again."""
    return hashlib.sha256(f"{hold_id}|{email}".encode()).hexdigest()[:40]


def intent_key(hold_id: str) -> str:
    """The idempotency key of the hold's one PaymentIntent: derived from the hold alone."""
    return f"intent-{hold_id}"


def payment_metadata(hold: Hold, attempt: Attempt) -> dict[str, str]:
    """What the provider keeps with the payment: enough to find the hold again after a crash."""
    return {
        "holdId": hold.holdId,
        "registrationId": hold.registrationId,
        "raceId": hold.raceId,
        "eventId": hold.eventId,
        "email": attempt.email,
        # A team's payment covers every member's registration: the captain's is named above.
        **({"places": str(hold.places), "teamName": attempt.teamName or ""} if hold.is_team else {}),
    }


def already_applied(hold: Hold, intent: PaymentIntent) -> bool:
    """The hold is past paying (queued, confirmed or cancelled) and this succeeded intent is
    its own payment (recorded as its intent, or as paid by whoever queued it): nothing to do.
    Settled is for good, so a hold read earlier still answers this."""
    return hold.status in SETTLED_PHASES and intent.id in (hold.chargeId, hold.intentId)
