"""The hold sweeper (every minute): expired places go back to the pool.

A HELD hold past its expiry is released. A PAYING hold past its expiry plus a grace
period is a payment whose runner never came back (a crash, a closed tab, a lost
response): the provider is asked for the hold's payment intents. One succeeded → the paid
registration is queued (it is never lost); one still able to complete is cancelled first;
none paid → the email and place are freed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from racecap.cache import Flags
from racecap.dal.payments import IntentNotCancelable, IntentStatus, PaymentIntent, PaymentProvider, PaymentUnavailable
from racecap.dal.ports import HoldStore
from racecap.domain import Hold, HoldPhase
from racecap.logic.races import RaceDefinitions, sold_out_flag
from racecap.logic.registration import RegistrationService
from racecap.observability import logger, metrics

# Longer than a charge can take with the provider client's retries, so the sweeper
# never races a payment that is still in flight.
PAYING_GRACE = timedelta(minutes=2)
# Statuses that may still turn into a payment without our server (3-D Secure completed in
# a browser, a bank still processing). A declined intent needs a new confirmation.
STILL_IN_FLIGHT = frozenset({IntentStatus.REQUIRES_CONFIRMATION, IntentStatus.REQUIRES_ACTION, IntentStatus.PROCESSING})


class HoldSweeper:
    def __init__(
        self,
        holds: HoldStore,
        payments: PaymentProvider,
        registration: RegistrationService,
        catalog: RaceDefinitions,
        cache: Flags,
    ) -> None:
        self._holds = holds
        self._payments = payments
        self._registration = registration
        self._catalog = catalog
        self._cache = cache

    def sweep(self, now: datetime | None = None) -> dict[str, int]:
        now = now or datetime.now(UTC)
        counts = {"released": 0, "recovered": 0, "abandoned": 0, "waiting": 0}
        for hold in self._holds.expired(now):
            try:
                outcome = self._settle(hold, now)
            except PaymentUnavailable:
                outcome = "waiting"  # ask again next minute; never guess
            except Exception:
                logger.exception("could not settle hold", extra={"holdId": hold.holdId})
                continue
            if outcome:
                counts[outcome] += 1
            if outcome in ("released", "abandoned"):
                self._cache.clear_flag(sold_out_flag(hold.raceId, hold.eventId))
        for name, value in counts.items():
            if value:
                metrics.add_metric(name=f"Sweep{name.title()}", unit="Count", value=value)
        return counts

    def _settle(self, hold: Hold, now: datetime) -> str | None:
        if hold.status == HoldPhase.HELD:
            return "released" if self._holds.release(hold, HoldPhase.EXPIRED, now=now) else None
        if hold.status != HoldPhase.PAYING or hold.attempt is None:
            return None
        attempt = hold.attempt
        if now - datetime.fromisoformat(attempt.startedAt) < PAYING_GRACE:
            return "waiting"
        paid = self._paid_intent(hold.holdId)
        if paid is not None:
            race, events = self._catalog.definition(hold.raceId)
            event = next(e for e in events if e.eventId == hold.eventId)
            self._registration.enqueue_paid(hold, attempt, paid.id, race, event, now)
            logger.info("recovered a paid registration", extra={"registrationId": hold.registrationId})
            return "recovered"
        return "abandoned" if self._holds.abandon_payment(hold, attempt) else None

    def _paid_intent(self, hold_id: str) -> PaymentIntent | None:
        """The hold's succeeded intent, if any. An intent that could still complete on its
        own is cancelled first, so freeing the place can never race a late payment.
        Raises ``PaymentUnavailable`` when the outcome cannot be known yet."""
        intents = self._payments.find_intents(hold_id=hold_id)
        for intent in intents:
            if intent.status == IntentStatus.SUCCEEDED:
                return intent
        for intent in intents:
            if intent.status in STILL_IN_FLIGHT:
                try:
                    self._payments.cancel_intent(intent.id, idempotency_key=f"cancel-{intent.id}")
                except IntentNotCancelable as exc:
                    if exc.intent.status == IntentStatus.SUCCEEDED:
                        return exc.intent
                    raise PaymentUnavailable(f"intent {intent.id} is {exc.intent.status}") from exc
        return None
