"""The registration capability's composition root: each factory imports its own parts, so a function
loads only what it uses (issue 14). Only handlers import it; it imports lower ranks' wirings."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING

from racecap import clients
from racecap.config import get_settings

# Expired holds settled side by side per sweeper run: each PAYING one is one or two provider
# calls, and 8 stay well inside the provider's request budget (``payments.budget``) shared with
# the runners paying meanwhile.
SWEEP_WORKERS = 8

if TYPE_CHECKING:
    from racecap.emails.sender import Notifier
    from racecap.registration.attempts import DynamoAttempts
    from racecap.registration.edits import DetailsEdits
    from racecap.registration.email_change import EmailChange
    from racecap.registration.links import LinkRequests, RegistrationLinks
    from racecap.registration.service import RegistrationService
    from racecap.registration.status import SqsWriterPace, StatusSnapshots
    from racecap.registration.store import DynamoRegistrations
    from racecap.registration.sweeper import HoldSweeper
    from racecap.registration.writer import RegistrationWriter


@lru_cache(maxsize=1)
def attempts() -> DynamoAttempts:
    """The holds' payment attempts (the payment step's writes on a hold, beside its own)."""
    from racecap.registration.attempts import DynamoAttempts

    return DynamoAttempts(clients.dynamodb(), get_settings().inventory_table)


@lru_cache(maxsize=1)
def registrations() -> DynamoRegistrations:
    from racecap.registration.store import DynamoRegistrations

    s = get_settings()
    return DynamoRegistrations(clients.dynamodb(), s.registrations_table, s.inventory_table)


@lru_cache(maxsize=1)
def registration_service() -> RegistrationService:
    from racecap.aws.queues import SqsQueue
    from racecap.cache import shared as cache
    from racecap.holds.wiring import hold_snapshots
    from racecap.payments.wiring import payments
    from racecap.questions.wiring import questions
    from racecap.races.wiring import catalog
    from racecap.registration.service import RegistrationService

    queue = SqsQueue(clients.sqs(), get_settings().registrations_queue_url)
    requeue_after = timedelta(seconds=get_settings().requeue_after_s)
    return RegistrationService(
        catalog(),
        attempts(),
        registrations(),
        payments(),
        queue,
        requeue_after,
        writer_pace(),
        questions(),
        marks=cache(),
        snapshots=status_snapshots(),
        hold_hints=hold_snapshots(),
    )


@lru_cache(maxsize=1)
def status_snapshots() -> StatusSnapshots:
    """The writer's snapshots of what it confirmed, for the waiting screen (``registration.status``)."""
    from racecap.cache import shared as cache
    from racecap.registration.status import StatusSnapshots

    return StatusSnapshots(cache())


@lru_cache(maxsize=1)
def writer_pace() -> SqsWriterPace:
    """The writer's pace and backlog: it records, the waiting screen reads (``registration.status``)."""
    from racecap.cache import shared as cache
    from racecap.registration.status import SqsWriterPace

    return SqsWriterPace(clients.sqs(), get_settings().registrations_queue_url, cache())


@lru_cache(maxsize=1)
def writer() -> RegistrationWriter:
    from racecap.cache import shared as cache
    from racecap.emails.wiring import emails_queue
    from racecap.questions.wiring import questions
    from racecap.registration.writer import RegistrationWriter

    return RegistrationWriter(
        registrations(),
        emails_queue(),
        turns=cache(),
        pace=writer_pace(),
        answers=questions(),
        snapshots=status_snapshots(),
    )


@lru_cache(maxsize=1)
def sweeper() -> HoldSweeper:
    from racecap.cache import shared as cache
    from racecap.payments.wiring import payments
    from racecap.races.wiring import catalog
    from racecap.registration.sweeper import HoldSweeper

    return HoldSweeper(attempts(), payments(), registration_service(), catalog(), cache(), workers=SWEEP_WORKERS)


@lru_cache(maxsize=1)
def links() -> RegistrationLinks:
    """The runner's links to their own registration (signed with the fairness tokens' key)."""
    from racecap.fairness.wiring import signer
    from racecap.registration.links import RegistrationLinks

    return RegistrationLinks(signer, get_settings().site_url)


@lru_cache(maxsize=1)
def link_requests() -> LinkRequests:
    """ "Find my registration": a bucket per address, network and device of its own."""
    from racecap.emails.wiring import emails_queue
    from racecap.fairness.buckets import AddressBuckets
    from racecap.races.wiring import catalog
    from racecap.registration.links import LINK_REQUEST_BURST, LINK_REQUEST_EVERY_S, LinkRequests

    buckets = AddressBuckets(
        clients.cache, rate_per_second=1 / LINK_REQUEST_EVERY_S, burst=LINK_REQUEST_BURST, prefix="rc:link:"
    )
    return LinkRequests(catalog(), emails_queue(), buckets)


@lru_cache(maxsize=1)
def notifier() -> Notifier:
    """The email sender, with the runner's links signed in (and "find my registration" resolved)."""
    from racecap.emails.wiring import build_notifier
    from racecap.registration.links import LinkMail

    return build_notifier(prepare=LinkMail(links(), registrations()).prepare)


@lru_cache(maxsize=1)
def email_change() -> EmailChange:
    """A runner's change of address: confirmed from the new address, then moved in one write."""
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.emails.wiring import emails_queue
    from racecap.fairness.buckets import AddressBuckets
    from racecap.fairness.wiring import signer
    from racecap.registration.email_change import CHANGE_BURST, EmailChange
    from racecap.registration.links import LINK_REQUEST_EVERY_S

    buckets = AddressBuckets(
        clients.cache, rate_per_second=1 / LINK_REQUEST_EVERY_S, burst=CHANGE_BURST, prefix="rc:chg:"
    )
    return EmailChange(links(), signer, registrations(), emails_queue(), buckets, audit_trail(), transact)


@lru_cache(maxsize=1)
def details_edits() -> DetailsEdits:
    """A runner's corrections until the edit cut-off (stocked options swapped in one write)."""
    from racecap.audit.wiring import audit_trail
    from racecap.aws.wiring import transact
    from racecap.holds.wiring import holds
    from racecap.questions.wiring import questions
    from racecap.races.wiring import catalog
    from racecap.registration.edits import DetailsEdits

    s = get_settings()
    tables = (s.registrations_table, s.inventory_table)
    return DetailsEdits(
        links(), registrations(), holds(), catalog(), questions(), audit_trail(), transact, tables, status_snapshots()
    )
