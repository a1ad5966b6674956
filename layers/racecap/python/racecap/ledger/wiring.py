"""The ledger capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

if TYPE_CHECKING:
    from racecap.ledger.cancel_store import DynamoCancelStore
    from racecap.ledger.cancellations import Cancellations
    from racecap.ledger.events import PaymentEvents
    from racecap.ledger.own_entry import OwnEntry


if TYPE_CHECKING:
    from racecap.codes.models import CodeTerms
    from racecap.ledger.deferral import Deferrals
    from racecap.ledger.service import Ledger
    from racecap.ledger.store import DynamoLedger
    from racecap.ledger.switch import Switches
    from racecap.payments.port import PaymentIntent
    from racecap.registration.transfer import Transfers


@lru_cache(maxsize=1)
def cancel_store() -> DynamoCancelStore:
    """The registrations with the ledger's writes on them (a cancellation, a dispute)."""
    from racecap.ledger.cancel_store import DynamoCancelStore

    s = get_settings()
    return DynamoCancelStore(clients.dynamodb(), s.registrations_table, s.inventory_table)


@lru_cache(maxsize=1)
def ledger_store() -> DynamoLedger:
    from racecap.ledger.store import DynamoLedger

    return DynamoLedger(clients.dynamodb(), get_settings().registrations_table)


@lru_cache(maxsize=1)
def ledger() -> Ledger:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.ledger.service import Ledger
    from racecap.payments.wiring import payments

    after = timedelta(seconds=get_settings().refund_settle_after_s)
    return Ledger(ledger_store(), cancel_store(), payments(), transact, audit_trail(), settle_after=after)


@lru_cache(maxsize=1)
def payment_events() -> PaymentEvents:
    from racecap.emails.wiring import emails_queue
    from racecap.holds.wiring import holds
    from racecap.ledger.events import PaymentEvents
    from racecap.payments.webhook_log import DynamoWebhookLog
    from racecap.payments.wiring import payments
    from racecap.registration.wiring import registration_service

    log = DynamoWebhookLog(clients.dynamodb(), get_settings().inventory_table)
    return PaymentEvents(
        payments(),
        registration_service(),
        holds(),
        cancel_store(),
        cancellations(),
        emails_queue(),
        log,
        _race_name,
        ledger_store(),
        refund_updates=ledger().provider_refund,
        extra_payments=_extra_payment,
    )


def _extra_payment(intent: PaymentIntent) -> str:
    """A payment beyond the entry's, by its purpose: a transfer's fee moves the place too (or
    goes back when the transfer lost); any other is recorded in the registration's ledger."""
    from racecap.ledger.switch import PURPOSE as UPGRADE
    from racecap.registration.transfer import PURPOSE

    if intent.metadata.get("purpose") == PURPOSE:
        return transfers().fee_paid(intent)
    if intent.metadata.get("purpose") == UPGRADE and intent.metadata.get("switchHold"):
        return switches().upgrade_paid(intent)
    return ledger().record_payment(intent)


def _race_name(race_id: str) -> str | None:
    from racecap.races.wiring import catalog

    try:
        return catalog().definition(race_id)[0].name
    except Exception:  # a refund email must not wait on a race that no longer exists
        return None


@lru_cache(maxsize=1)
def cancellations() -> Cancellations:
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.emails.wiring import emails_queue
    from racecap.holds.wiring import holds
    from racecap.ledger.cancellations import Cancellations
    from racecap.payments.wiring import payments
    from racecap.places.wiring import place_returns
    from racecap.races.wiring import catalog
    from racecap.registration.wiring import status_snapshots

    return Cancellations(
        cancel_store(),
        holds(),
        payments(),
        emails_queue(),
        transact,
        audit_trail(),
        catalog(),
        ledger_store(),
        statuses=status_snapshots(),
        returns=place_returns(),
    )


@lru_cache(maxsize=1)
def own_entry() -> OwnEntry:
    """A runner's own entry, through the link in their email."""
    from racecap.ledger.own_entry import OwnEntry
    from racecap.questions.wiring import questions
    from racecap.races.wiring import catalog
    from racecap.registration.wiring import links

    return OwnEntry(links(), cancel_store(), ledger(), cancellations(), catalog(), questions())


@lru_cache(maxsize=1)
def transfers() -> Transfers:
    """A runner's place handed to another (the registration capability's ``transfer``, built here
    because a fee joins the ledger): offered by link, accepted (and any fee paid) by the
    new runner, moved in one write; a fee for a transfer that lost goes back from the ledger."""
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.emails.wiring import emails_queue
    from racecap.fairness.buckets import AddressBuckets
    from racecap.fairness.wiring import signer
    from racecap.holds.wiring import holds
    from racecap.payments.wiring import payments
    from racecap.questions.wiring import questions
    from racecap.races.wiring import catalog
    from racecap.registration.links import LINK_REQUEST_EVERY_S
    from racecap.registration.transfer import OFFER_BURST, Transfers
    from racecap.registration.wiring import links, registrations, status_snapshots

    buckets = AddressBuckets(
        clients.cache, rate_per_second=1 / LINK_REQUEST_EVERY_S, burst=OFFER_BURST, prefix="rc:trf:"
    )
    return Transfers(
        links(), signer, registrations(), holds(), catalog(), questions(), payments(), emails_queue(), buckets,
        audit_trail(), transact, get_settings().inventory_table, status_snapshots(), fees=ledger(),
        record=ledger().record_payment,
    )  # fmt: skip


@lru_cache(maxsize=1)
def switches() -> Switches:
    """A runner's switch to another event of the race (in the ledger: a price difference is paid
    or refunded, and a lost switch's upgrade goes back): held, paid, moved in one write."""
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.cache import shared as cache
    from racecap.codes.wiring import code_store
    from racecap.emails.wiring import emails_queue
    from racecap.holds.wiring import holds
    from racecap.ledger.switch import Switches
    from racecap.payments.wiring import payments
    from racecap.places.wiring import place_returns
    from racecap.questions.wiring import questions
    from racecap.races.wiring import catalog
    from racecap.registration.wiring import links, registrations, status_snapshots

    def terms(race_id: str, code: str) -> CodeTerms | None:
        stored = code_store().get(race_id, code)
        return stored.terms if stored is not None else None

    return Switches(
        links(), registrations(), holds(), catalog(), questions(), terms, payments(), emails_queue(), audit_trail(),
        transact, get_settings().inventory_table, place_returns(), ledger(), cache(), status_snapshots(),
    )  # fmt: skip


@lru_cache(maxsize=1)
def deferrals() -> Deferrals:
    """A runner's place deferred to the race's next edition: a cancellation with no refund that
    makes a personal code there, in its first write."""
    from racecap.codes.wiring import code_store
    from racecap.holds.wiring import code_tally
    from racecap.ledger.deferral import Deferrals
    from racecap.races.wiring import catalog
    from racecap.registration.wiring import links, registrations

    return Deferrals(
        links(), registrations(), catalog(), cancellations(), code_store().create_items, code_tally().forget
    )
