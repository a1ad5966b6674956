"""The live stats' API shapes."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from racecap.codes.models import CodeUses
from racecap.models import Model
from racecap.races.models import PublicRaceStatus


class MinuteCount(Model):
    minute: str = Field(description="UTC minute, YYYY-MM-DDTHH:MM")
    confirmed: int


class EventStats(Model):
    eventId: str
    name: str
    cap: int
    held: int = Field(
        description="Places taken and not confirmed yet: runners filling in the form, paying, or paid and being "
        "written (taken less confirmed, the waitlist's pooled and offered places)."
    )
    queued: int = Field(
        description="Of the held, paid and waiting on the queue to be written (from the last ten minutes' "
        "per-second counts: queued less confirmed)."
    )
    confirmed: int
    cancelled: int = Field(description="Every cancellation; the four counts below, by who cancelled, add up to it.")
    cancelledByRunners: int = Field(description="Cancelled by the runners themselves (their own entry's link).")
    cancelledByOrganiser: int = Field(description="Cancelled by the race's directors.")
    cancelledByProvider: int = Field(
        description="Cancelled because the payment was refunded in the payment provider's dashboard."
    )
    cancelledBySystem: int = Field(description="Cancelled by Racecap itself (a system job).")
    placesLeft: int
    currency: str = Field(description="The amounts' currency; each amount is in its smallest unit (JPY: yen).")
    revenueCents: int = Field(description="What the confirmed registrations paid.")
    grossCents: int = Field(description="Everything taken: what the confirmed and the cancelled paid.")
    refundedCents: int = Field(description="Every refund: cancellations', partial ones, and outside ones.")
    netCents: int = Field(description="Gross less refunded: what the race keeps.")
    outsideRefunds: int = Field(
        description="Refunds made outside Racecap (the provider's dashboard), recorded in the ledger: check them."
    )
    transfers: int = Field(default=0, description="Places handed over from one runner to another.")
    switchedIn: int = Field(default=0, description="Runners who switched into this event from another of the race.")
    switchedOut: int = Field(default=0, description="Runners who switched from this event to another (a place freed).")
    deferred: int = Field(
        default=0, description="Of the cancelled: places deferred to the next edition (a code there)."
    )
    otherPaymentsCents: int = Field(
        default=0, description="Payments beyond the entry (transfer fees), in the gross; a lost one's refund too."
    )
    perMinute: list[MinuteCount] = Field(description="Confirmations per UTC minute, oldest first, zeros included.")
    waitlistLength: int = Field(default=0, description="Runners waiting on the event's waitlist (confirmed entries).")
    waitlistPooled: int = Field(default=0, description="Freed places kept for the waitlist, not offered yet.")
    offersOut: int = Field(default=0, description="Waitlist offers waiting for their runner.")
    offersAccepted: int = Field(default=0, description="Waitlist offers claimed.")
    offersExpired: int = Field(default=0, description="Waitlist offers whose window ran out.")
    soldOutAt: datetime | None = Field(
        default=None,
        description="When the event first sold out (its first refusal with every place taken); it stays, whatever "
        "is freed since. Absent: it has not sold out.",
    )


class RaceStatsView(Model):
    raceId: str
    status: PublicRaceStatus
    asOf: datetime
    minutes: int
    totals: dict[str, int]
    events: list[EventStats]
    codes: list[CodeUses] = Field(default=[], description="The race's discount codes: uses against each limit.")
