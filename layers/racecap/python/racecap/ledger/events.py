"""What the payment provider tells us: webhooks (and reconciliation's replay of its events).

Each event is applied by the state it describes, never by its order or count:

* ``payment_intent.succeeded`` of a purpose other than the entry (``metadata.purpose``: an
  upgrade, a transfer fee) → recorded in the ledger of the registration it names, once
  (``Ledger.record_payment``), or refunded when it names none;
* ``payment_intent.succeeded`` → the hold's registration is queued (``RegistrationService.
  payment_succeeded``: once, whoever comes first — the runner's confirm, this, the sweeper);
  a succeeded payment no hold is entitled to any more is refunded automatically, keyed on
  the intent (once), with an email saying why;
* ``payment_intent.payment_failed`` → nothing to change: the runner is still on the form with
  the place held and may try another card on the same intent; counted;
* ``charge.refunded`` → a refund of the whole charge made outside Racecap goes in the ledger
  and cancels the registration (nothing more to refund) and returns the place, audited as
  such (``Cancellations.refunded_elsewhere``); Racecap's own refunds (the ledger's sum covers
  what the charge says was refunded) change nothing; a partial refund made outside goes in
  the ledger and leaves the registration confirmed, flagged to the director in the stats
  (``outsideRefunds``), the export and the audit trail (``Cancellations.record_outside``);
* ``charge.dispute.created`` → the registration is flagged; the director sees it;
* ``charge.refund.updated``, ``refund.updated``, ``refund.failed`` → one of the ledger's refunds
  (found by the ``registrationId`` and ``refundKey`` it carries) takes the provider's word: a
  pending one succeeded, or one failed later and its amount is refundable again
  (``Ledger.provider_refund``); the entry's state is the log, so a repeat changes nothing.

An event is answered 2xx only once its effect is durable; when it cannot be applied yet (the
writer has not written the registration) ``NotYet`` asks the provider to deliver it again.

A duplicate costs one read and no write. For the payment events the hold is the log: a
succeeded payment is applied by moving its hold (PAYING → QUEUED), so a repeat finds it
queued or confirmed and answers "already" — remembering the event id as well would be one
more write for every registration (issue 14). Refunds and disputes are rare and their
effects are not all visible from one item, so their applied event ids are remembered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from racecap.aws.queues import MessageQueue
from racecap.emails.models import EmailMessage
from racecap.errors import Busy, InvalidSignature
from racecap.holds.models import DONE_PHASES, Hold, HoldPhase
from racecap.holds.store import HoldStore
from racecap.ledger.cancel_store import CancelStore
from racecap.ledger.cancellations import Cancellations
from racecap.ledger.store import LedgerStore
from racecap.observability import logger, metrics
from racecap.payments.port import (
    AlreadyRefunded,
    IntentStatus,
    InvalidWebhookSignature,
    PaymentIntent,
    PaymentProvider,
    PaymentUnavailable,
    ProviderEvent,
    Refund,
    refund_from,
)
from racecap.payments.webhook_log import EventLog
from racecap.pulse import DECLINED, pulse
from racecap.registration.models import Registration
from racecap.registration.payment import already_applied
from racecap.registration.service import RegistrationService

HANDLED = (
    "payment_intent.succeeded",
    "payment_intent.payment_failed",
    "charge.refunded",
    "charge.dispute.created",
    *(REFUND_UPDATES := ("charge.refund.updated", "refund.updated", "refund.failed")),
)


# Events whose effect is read back from state (the hold) rather than from the event log.
STATE_IS_THE_LOG = frozenset({"payment_intent.succeeded", "payment_intent.payment_failed", *REFUND_UPDATES})


# Reconciliation re-reads the provider's succeeded payments from a little before its last
# run: events are listed by creation time, and one created during the last run's listing
# must not be skipped. Applying one twice changes nothing (state-based).
RECONCILE_OVERLAP = timedelta(minutes=5)


RECONCILE_FIRST_LOOKBACK = timedelta(days=3)  # as far back as Stripe retries a webhook


class NotYet(Busy):
    """The event is about something not written yet: the provider retries the delivery."""

    code, status = "NOT_YET", 503


def unmatched_refund_key(intent_id: str) -> str:
    return f"unmatched-refund-{intent_id}"


def _latest_refund(charge: Mapping[str, Any]) -> str:
    """The charge's newest refund id, when the event carries its refunds (API versions before
    2022-11-15 did; later ones leave the list out: '')."""
    data = (charge.get("refunds") or {}).get("data") or []
    return str(data[0].get("id", "")) if data else ""


def intent_from(obj: Mapping[str, Any]) -> PaymentIntent:
    """An intent as the event carries it (``data.object``), in the port's terms."""
    error = obj.get("last_payment_error") or {}
    return PaymentIntent(
        id=str(obj["id"]),
        status=IntentStatus(str(obj["status"])),
        amount_cents=int(obj["amount"]),
        currency=str(obj["currency"]),
        metadata={str(k): str(v) for k, v in (obj.get("metadata") or {}).items()},
        latest_charge=obj.get("latest_charge"),
        decline_code=error.get("decline_code") or error.get("code"),
    )


class PaymentEvents:
    def __init__(
        self,
        payments: PaymentProvider,
        registration: RegistrationService,
        holds: HoldStore,
        registrations: CancelStore,
        cancellations: Cancellations,
        emails: MessageQueue,
        log: EventLog,
        race_name: Any,
        ledger: LedgerStore,
        refund_updates: Callable[[Refund], str] | None = None,
        extra_payments: Callable[[PaymentIntent], str] | None = None,
    ) -> None:
        self._payments = payments
        self._registration = registration
        self._holds = holds
        self._regs = registrations
        self._cancellations = cancellations
        self._emails = emails
        self._log = log
        self._race_name = race_name  # race id -> its name, for the refund email (None: unknown)
        self._ledger = ledger
        self._refund_updates = refund_updates  # Ledger.provider_refund
        self._extra_payments = extra_payments  # Ledger.record_payment

    def receive(self, payload: bytes, signature: str | None) -> str:
        """A webhook delivery: verified, then applied once. Answers what was done."""
        try:
            event = self._payments.parse_webhook(payload, signature)
        except InvalidWebhookSignature as exc:
            metrics.add_metric(name="WebhookSignatureRefused", unit="Count", value=1)
            raise InvalidSignature("The Stripe-Signature header is missing, wrong or too old.") from exc
        if event.type not in HANDLED:
            return "ignored"
        if event.type in STATE_IS_THE_LOG:
            return self.apply(event)
        if self._log.seen(event.id):
            metrics.add_metric(name="WebhookDuplicate", unit="Count", value=1)
            return "duplicate"
        outcome = self.apply(event)
        self._log.remember(event.id, event.type)
        return outcome

    def apply(self, event: ProviderEvent) -> str:
        data = event.data
        if event.type == "payment_intent.succeeded":
            return self.succeeded(intent_from(data))
        if event.type == "payment_intent.payment_failed":
            metrics.add_metric(name="PaymentDeclined", unit="Count", value=1)
            # Counted here, once per failed charge (the event log drops a redelivery), not where the
            # runner's own call hears of it: the two would count one decline twice.
            meta = intent_from(data).metadata
            pulse.count(meta.get("raceId", ""), DECLINED, meta.get("eventId", ""))
            return "declined"
        if event.type == "charge.refunded":
            return self._refunded(data)
        if event.type == "charge.dispute.created":
            return self._disputed(data)
        if event.type in REFUND_UPDATES and self._refund_updates is not None:
            return self._refund_updates(refund_from(data))
        return "ignored"

    def reconcile(self, now: datetime | None = None) -> dict[str, int]:
        """The scheduled backstop for lost webhooks and crashes between a payment and its
        queueing: every payment that succeeded since the last run (with an overlap) is applied
        as its webhook would be — queued if no one did, refunded with an email if no hold is
        entitled to it. Never paid without a place."""
        now = now or datetime.now(UTC)
        mark = self._log.mark()
        overlap = int(RECONCILE_OVERLAP.total_seconds())
        since = mark - overlap if mark else int((now - RECONCILE_FIRST_LOOKBACK).timestamp())
        counts: Counter[str] = Counter()
        newest = since
        try:
            events = list(self._payments.list_events(types=["payment_intent.succeeded"], created_after=since))
            intents = [intent_from(event.data) for event in events]
            # Each run reaches back over the overlap, so most payments were queued long ago:
            # their holds in a few batch reads instead of one read each (issue 14).
            holds = self._holds_of(intents)
            for event, intent in zip(events, intents, strict=True):
                hold = holds.get(intent.metadata.get("holdId", ""))
                counts["already" if hold and already_applied(hold, intent) else self.succeeded(intent)] += 1
                newest = max(newest, event.created)
        except PaymentUnavailable as exc:  # busy or down: the next tick starts from the same mark
            logger.warning("reconciliation postponed", extra={"error": str(exc)})
            return {"postponed": 1}
        self._log.set_mark(max(newest, mark or 0))
        for outcome in ("queued", "orphan"):
            if counts[outcome]:
                logger.warning(f"reconciliation: {outcome} payments", extra={"count": counts[outcome]})
                metrics.add_metric(name=f"Reconciled{outcome.title()}", unit="Count", value=counts[outcome])
        return dict(counts)

    def _holds_of(self, intents: list[PaymentIntent]) -> dict[str, Hold]:
        hold_ids = [i.metadata["holdId"] for i in intents if i.metadata.get("holdId")]
        return {h.holdId: h for h in self._holds.get_many(hold_ids)}

    def succeeded(self, intent: PaymentIntent) -> str:
        purpose = intent.metadata.get("purpose", "entry")
        if purpose != "entry" and self._extra_payments is not None:
            # Another payment for a registration (an upgrade, a fee): routed by its purpose, not
            # by a hold, into the registration's ledger; money naming no registration goes back.
            outcome = self._extra_payments(intent)
            if outcome == "orphan":
                self.refund_unmatched(intent)
            return outcome
        if not intent.metadata.get("holdId"):
            return "ignored"  # not a Racecap payment (another integration on the same account)
        outcome = self._registration.payment_succeeded(intent)
        if outcome == "orphan":
            self.refund_unmatched(intent)
        return outcome

    def refund_unmatched(self, intent: PaymentIntent) -> None:
        """Money with no place to give for it: refund it (once: the key is the intent) and say why."""
        hold_id = intent.metadata.get("holdId", "")
        hold = self._holds.get(hold_id) if hold_id else None
        if hold is not None and hold.status in DONE_PHASES and intent.id in (hold.chargeId, hold.intentId):
            return  # the place is this payment's after all
        try:
            self._payments.refund(
                intent_id=intent.id, idempotency_key=unmatched_refund_key(intent.id), reason="requested_by_customer"
            )
        except AlreadyRefunded:
            pass  # refunded before (by us, under this key, or by hand): the email is deduplicated
        logger.warning("refunded a payment no hold was entitled to", extra={"intentId": intent.id})
        metrics.add_metric(name="UnmatchedPaymentRefunded", unit="Count", value=1)
        email = intent.metadata.get("email")
        if email:
            race_id = intent.metadata.get("raceId", "")
            race_name = self._race_name(race_id) if race_id else None
            self._emails.send(
                EmailMessage(
                    kind="unmatched_refund",
                    dedupKey=f"unmatched-refund:{intent.id}",
                    to=email,
                    data={
                        "raceName": race_name or "the race",
                        "registrationId": intent.metadata.get("registrationId") or intent.id,
                        "amountCents": intent.amount_cents,
                        "currency": intent.currency,
                    },
                )
            )

    def _registration_id(self, intent_id: str, metadata: Mapping[str, Any] | None) -> str | None:
        rid = (metadata or {}).get("registrationId")
        if rid:
            return str(rid)
        return self._payments.retrieve_intent(intent_id).metadata.get("registrationId")

    def _refunded(self, charge: Mapping[str, Any]) -> str:
        intent_id = str(charge.get("payment_intent") or "")
        rid = self._registration_id(intent_id, charge.get("metadata")) if intent_id else None
        if not rid:
            return "ignored"
        reg = self._regs.get(rid)
        if reg is None:
            hold = self._holds.get(str((charge.get("metadata") or {}).get("holdId", "")))
            if hold is not None and hold.status == HoldPhase.QUEUED and hold.chargeId == intent_id:
                raise NotYet("The registration is still being written; deliver again later.", retry_after=5)
            return "ignored"  # an unmatched payment's own refund, or a payment never registered
        if reg.chargeId != intent_id:
            return "ignored"
        # Racecap's own refunds are in the ledger, reserved before the provider was asked, so
        # a refund of ours is on record before its webhook can arrive (its refund id may not
        # be yet: matching the amounts does not depend on that race). Only what the charge
        # says was refunded beyond them was refunded outside Racecap.
        refunded = int(charge.get("amount_refunded", 0))
        if reg.teamMembers:
            return self._team_refunded(reg, charge, refunded)
        if refunded and refunded <= self._ledger.refunded_cents(rid):
            return "recorded"
        if refunded and not charge.get("refunded") and refunded < int(charge.get("amount", 0)):
            # Part of it refunded in the dashboard: in the ledger, flagged to the director (the
            # stats, the export, the audit trail); the runner keeps the place.
            self._cancellations.record_outside(reg, refunded, _latest_refund(charge))
            return "flagged"
        self._cancellations.refunded_elsewhere(rid, refunded)
        return "cancelled"

    def _team_refunded(self, captain: Registration, charge: Mapping[str, Any], refunded: int) -> str:
        """A team's one charge, refunded: Racecap's refunds are its members' ledgers' (one
        member cancelled: that member's share), so only what the charge says beyond their sum
        was refunded outside — spread over the members in order, each up to its share, and
        flagged; all of it refunded outside cancels every member."""
        members = [m for m in (self._regs.get(r) for r in captain.teamMembers or []) if m is not None]
        ours = {m.registrationId: self._ledger.refunded_cents(m.registrationId) for m in members}
        if refunded <= sum(ours.values()):
            return "recorded"
        if charge.get("refunded") or refunded >= int(charge.get("amount", 0)):
            for m in members:
                self._cancellations.refunded_elsewhere(m.registrationId, m.amountCents)
            return "cancelled"
        outside = refunded - sum(ours.values())
        for m in members:
            give = min(outside, m.amountCents - ours[m.registrationId])
            if give > 0:
                self._cancellations.record_outside(m, ours[m.registrationId] + give, _latest_refund(charge))
                outside -= give
        return "flagged"

    def _disputed(self, dispute: Mapping[str, Any]) -> str:
        intent_id = str(dispute.get("payment_intent") or "")
        rid = self._registration_id(intent_id, dispute.get("metadata")) if intent_id else None
        if not rid:
            return "ignored"
        if not self._regs.flag_dispute(rid, str(dispute["id"]), datetime.now(UTC).isoformat()):
            hold = self._holds.get(self._payments.retrieve_intent(intent_id).metadata.get("holdId", ""))
            if hold is not None and hold.status == HoldPhase.QUEUED:
                raise NotYet("The registration is still being written; deliver again later.", retry_after=5)
            return "ignored"
        logger.warning("payment disputed", extra={"registrationId": rid, "disputeId": dispute["id"]})
        metrics.add_metric(name="PaymentDisputed", unit="Count", value=1)
        return "flagged"
