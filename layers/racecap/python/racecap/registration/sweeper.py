"""The hold sweeper (every minute): expired places go back to the pool.

A HELD hold past its expiry is released. A PAYING hold past its expiry is a payment the
runner did not finish in time (or finished without telling us: a closed tab, a crash): the
hold's intent is asked for. Succeeded → the paid registration is queued (it is never lost).
Waiting for 3-D Secure (``requires_action``) → the hold is extended once, by
``THREE_DS_EXTENSION``, so the runner can finish. Otherwise the intent is cancelled *before*
the place is freed: if the cancel fails because the payment succeeded meanwhile, the
registration is queued instead; once cancelled, no browser can charge it any more, and the
email and place are freed. A QUEUED hold the writer has not confirmed by its expiry and its
``requeueAt`` (its message was lost) is sent to the writer again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from racecap.cache import Flags
from racecap.holds.models import Attempt, Hold, HoldPhase
from racecap.holds.service import waitlisted
from racecap.observability import logger, metrics, tracer
from racecap.payments.port import (
    IntentNotCancelable,
    IntentStatus,
    PaymentIntent,
    PaymentProvider,
    PaymentUnavailable,
)
from racecap.places.returns import Freed
from racecap.races.catalog import RaceDefinitions, sold_out_flag
from racecap.registration.attempts import Attempts
from racecap.registration.service import RegistrationService

# How long a hold waiting for 3-D Secure at its expiry is kept, once: enough for a bank's
# challenge page, short enough that an abandoned challenge does not keep a place for long.
THREE_DS_EXTENSION = timedelta(minutes=5)


class HoldSweeper:
    def __init__(
        self,
        holds: Attempts,
        payments: PaymentProvider,
        registration: RegistrationService,
        catalog: RaceDefinitions,
        cache: Flags,
        workers: int = 1,
    ) -> None:
        self._holds = holds
        self._workers = workers
        self._payments = payments
        self._registration = registration
        self._catalog = catalog
        self._cache = cache
        self._freed: dict[str, Freed] = {}  # this run's freed holds: where their places went
        self._switches: Callable[[Hold, datetime], str | None] | None = None

    def sweep(
        self, now: datetime | None = None, switches: Callable[[Hold, datetime], str | None] | None = None
    ) -> dict[str, int]:
        """``switches``: what settles a switch's hold (``ledger.switch``, a higher rank: passed by
        the handler), which asks for its upgrade's payment before giving its place back."""
        now = now or datetime.now(UTC)
        self._freed = {}
        self._switches = switches
        counts = {"released": 0, "recovered": 0, "abandoned": 0, "waiting": 0, "resent": 0}
        # Holds are settled side by side: a PAYING one asks the provider (one or two calls of a
        # few hundred ms), and the expiry wave after a burst (hundreds of abandoned payments) one
        # at a time would hold back the waitlist's offers that run after, and the next run.
        for hold, outcome in tracer.in_threads(
            lambda h: (h, self._settle_safely(h, now)), self._holds.expired(now), self._workers
        ):
            if outcome:
                counts[outcome] += 1
            if outcome in ("released", "abandoned") and self._freed.get(hold.holdId) == "public":
                # A place the waitlist's pool took leaves the event sold out.
                self._cache.clear_flag(sold_out_flag(hold.raceId, hold.eventId))
        for name, value in counts.items():
            if value:
                metrics.add_metric(name=f"Sweep{name.title()}", unit="Count", value=value)
        return counts

    def _settle_safely(self, hold: Hold, now: datetime) -> str | None:
        try:
            return self._settle(hold, now)
        except PaymentUnavailable:
            return "waiting"  # ask again next minute; never guess
        except Exception:
            logger.exception("could not settle hold", extra={"holdId": hold.holdId})
            return None

    def _settle(self, hold: Hold, now: datetime) -> str | None:
        if hold.switchOf and self._switches is not None:
            return self._switches(hold, now)
        if hold.status == HoldPhase.QUEUED:  # paid, queued, still unconfirmed at its re-send time
            return "resent" if self._registration.resend_unconfirmed(hold, now) else None
        if hold.status == HoldPhase.HELD:
            freed = self._holds.release(hold, HoldPhase.EXPIRED, now=now, waitlist=waitlisted(self._catalog, hold))
            return self._was_freed(hold, freed)
        if hold.status != HoldPhase.PAYING or hold.attempt is None:
            return None
        attempt = hold.attempt
        if attempt.amountCents == 0:
            # A free entry has no intent to ask about: its details call stopped before queueing
            # it and no retry came (a retry would have queued it). No provider call.
            return self._abandon(hold, attempt)
        intents = self._hold_intents(hold)
        paid = next((i for i in intents if i.status == IntentStatus.SUCCEEDED), None)
        three_ds = any(i.status == IntentStatus.REQUIRES_ACTION for i in intents)
        if paid is None and three_ds and not hold.extended:
            if self._holds.extend(hold, now + THREE_DS_EXTENSION):
                logger.info("hold extended for 3-D Secure", extra={"holdId": hold.holdId})
                metrics.add_metric(name="HoldExtendedFor3DS", unit="Count", value=1)
            return "waiting"
        if paid is None:
            paid = self._cancel_all(intents)
        if paid is not None:
            outcome = self._registration.payment_succeeded(paid, now)
            if outcome == "queued":
                logger.info("recovered a paid registration", extra={"registrationId": hold.registrationId})
                return "recovered"
            return None
        return self._abandon(hold, attempt)

    def _abandon(self, hold: Hold, attempt: Attempt) -> str | None:
        freed = self._holds.abandon_payment(hold, attempt, waitlist=waitlisted(self._catalog, hold))
        return self._was_freed(hold, freed, "abandoned")

    def _was_freed(self, hold: Hold, freed: Freed | None, outcome: str = "released") -> str | None:
        if freed is None:
            return None
        self._freed[hold.holdId] = freed
        return outcome

    def _hold_intents(self, hold: Hold) -> list[PaymentIntent]:
        """The hold's intent as recorded; after a crash before it was recorded, whatever the
        provider knows for the hold (its metadata names it)."""
        if hold.intentId is not None:
            return [self._payments.retrieve_intent(hold.intentId)]
        return self._payments.find_intents(hold_id=hold.holdId)

    def _cancel_all(self, intents: list[PaymentIntent]) -> PaymentIntent | None:
        """Cancel every intent that could still be paid; the one that succeeded meanwhile, if any.
        Raises ``PaymentUnavailable`` when the outcome cannot be known yet (processing)."""
        for intent in intents:
            if intent.status in (IntentStatus.CANCELED, IntentStatus.SUCCEEDED):
                continue
            try:
                self._payments.cancel_intent(intent.id, idempotency_key=f"cancel-{intent.id}")
            except IntentNotCancelable as exc:
                if exc.intent.status == IntentStatus.SUCCEEDED:
                    return exc.intent
                raise PaymentUnavailable(f"intent {intent.id} is {exc.intent.status}") from exc
        return None
