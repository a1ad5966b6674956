"""The composition root: builds the logic objects from settings and clients, once.

Handlers ask for what they need (``catalog()``); tests build the same objects around
fakes or local servers instead.

Each factory imports its own parts, so a function loads only the modules it uses: every
function imports this module, and importing all of Racecap here cost each of them ~170 ms
of cold start for the admin, fairness, results and payment code most never touch
(issue 14). Types are imported for the checker alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from racecap import clients
from racecap.config import ConfigurationError, get_settings

if TYPE_CHECKING:
    from racecap.cache import TieredCache
    from racecap.dal.backlog import SqsWriterPace
    from racecap.dal.holds import DynamoHolds
    from racecap.dal.inventory import DynamoInventory
    from racecap.dal.payments import PaymentProvider
    from racecap.dal.queues import SqsQueue
    from racecap.dal.races import DynamoRaceStore
    from racecap.dal.registrations import DynamoRegistrations
    from racecap.dal.transactions import TransactItem
    from racecap.dal.windows import DynamoWindows
    from racecap.fairness.buckets import AddressBuckets
    from racecap.fairness.identity import AddressPrefixes, Client
    from racecap.fairness.queue import OpeningQueue
    from racecap.fairness.tokens import Signer
    from racecap.logic.admin import RaceAdmin
    from racecap.logic.audit import AuditTrail
    from racecap.logic.holds import HoldService
    from racecap.logic.notify import Notifier
    from racecap.logic.participants import Participants
    from racecap.logic.payment_events import PaymentEvents
    from racecap.logic.prewarm import WarmStarts
    from racecap.logic.races import RaceCatalog
    from racecap.logic.refunds import Cancellations
    from racecap.logic.registration import RegistrationService
    from racecap.logic.retention import RetentionPurge
    from racecap.logic.stats import RaceStats
    from racecap.logic.sweeper import HoldSweeper
    from racecap.logic.window import WindowControl, WindowTasks
    from racecap.logic.writer import RegistrationWriter


@lru_cache(maxsize=1)
def cache() -> TieredCache:
    from racecap.cache import TieredCache

    return TieredCache(clients.cache)


@lru_cache(maxsize=1)
def race_store() -> DynamoRaceStore:
    from racecap.dal.races import DynamoRaceStore

    return DynamoRaceStore(clients.dynamodb(), get_settings().races_table)


@lru_cache(maxsize=1)
def inventory() -> DynamoInventory:
    from racecap.dal.inventory import DynamoInventory

    return DynamoInventory(clients.dynamodb(), get_settings().inventory_table)


@lru_cache(maxsize=1)
def catalog() -> RaceCatalog:
    from racecap.logic.races import RaceCatalog

    return RaceCatalog(race_store(), inventory(), cache())


@lru_cache(maxsize=1)
def holds() -> DynamoHolds:
    from racecap.dal.holds import DynamoHolds

    return DynamoHolds(clients.dynamodb(), get_settings().inventory_table)


@lru_cache(maxsize=1)
def registrations() -> DynamoRegistrations:
    from racecap.dal.registrations import DynamoRegistrations

    s = get_settings()
    return DynamoRegistrations(clients.dynamodb(), s.registrations_table, s.inventory_table)


@lru_cache(maxsize=1)
def payments() -> PaymentProvider:
    """Stripe through the official SDK (timeouts sized for API Gateway's 29 s), behind the
    request budget every function shares through Redis: past it, ``PaymentRateLimited``."""
    from racecap.dal.payment_limit import LimitedPaymentProvider
    from racecap.dal.stripe_provider import StripePaymentProvider, keys_from_secret
    from racecap.ratelimit import SendRateLimiter

    s = get_settings()
    stripe = StripePaymentProvider(keys_from_secret(s.payments_secret_id), api_base=s.payments_api_base)
    budget = SendRateLimiter(clients.cache, s.payments_rate_per_second, key=PAYMENTS_BUDGET_KEY)
    return LimitedPaymentProvider(stripe, budget.reserve)


PAYMENTS_BUDGET_KEY = "rc:ratelimit:payments"


@lru_cache(maxsize=1)
def hold_service() -> HoldService:
    from racecap.logic.holds import HoldService

    return HoldService(catalog(), holds(), cache())


@lru_cache(maxsize=1)
def registration_service() -> RegistrationService:
    from racecap.dal.queues import SqsQueue
    from racecap.logic.registration import RegistrationService
    from racecap.questions.wiring import questions  # the capability's root imports this one

    queue = SqsQueue(clients.sqs(), get_settings().registrations_queue_url)
    requeue_after = timedelta(seconds=get_settings().requeue_after_s)
    return RegistrationService(
        catalog(), holds(), registrations(), payments(), queue, requeue_after, writer_pace(), questions()
    )


@lru_cache(maxsize=1)
def writer_pace() -> SqsWriterPace:
    """The writer's pace and backlog: it records, the waiting screen reads (``logic.backlog``)."""
    from racecap.dal.backlog import SqsWriterPace

    return SqsWriterPace(clients.sqs(), get_settings().registrations_queue_url, cache())


@lru_cache(maxsize=1)
def emails_queue() -> SqsQueue:
    """The confirmation and refund emails' queue (the email sender's)."""
    from racecap.dal.queues import SqsQueue

    return SqsQueue(clients.sqs(), get_settings().emails_queue_url)


@lru_cache(maxsize=1)
def writer() -> RegistrationWriter:
    from racecap.logic.writer import RegistrationWriter
    from racecap.questions.wiring import questions  # the capability's root imports this one

    return RegistrationWriter(registrations(), emails_queue(), turns=cache(), pace=writer_pace(), answers=questions())


@lru_cache(maxsize=1)
def sweeper() -> HoldSweeper:
    from racecap.logic.sweeper import HoldSweeper

    return HoldSweeper(holds(), payments(), registration_service(), catalog(), cache())


@lru_cache(maxsize=1)
def windows() -> DynamoWindows:
    from racecap.dal.windows import DynamoWindows

    return DynamoWindows(clients.dynamodb(), get_settings().races_table)


@lru_cache(maxsize=1)
def window_tasks() -> WindowTasks:
    from racecap.logic.window import WindowTasks

    return WindowTasks(race_store(), inventory(), catalog(), cache(), windows(), opened=opening_queue().opened)


@lru_cache(maxsize=1)
def warm_starts() -> WarmStarts:
    from racecap.dal.warm_starts import AutoScalingWarmStarts
    from racecap.logic.prewarm import WarmStarts

    settings = get_settings()
    target = settings.warm_start_target
    scaler = AutoScalingWarmStarts(clients.aws("application-autoscaling"), target) if target else None
    return WarmStarts(race_store(), windows(), scaler, settings.warm_start_max)


# -- fairness: who a client is, rate limits, the opening queue ------------------------------
def signer() -> Signer:
    from racecap.fairness.keys import signing_key

    return _signer(signing_key())


@lru_cache(maxsize=2)
def _signer(key: bytes) -> Signer:
    from racecap.fairness.tokens import Signer

    return Signer(key)


def client(headers: Mapping[str, str]) -> Client:
    from racecap.fairness.identity import client_from

    return client_from(headers, signer(), address_prefixes())


@lru_cache(maxsize=1)
def address_prefixes() -> AddressPrefixes:
    from racecap.fairness.identity import AddressPrefixes

    s = get_settings()
    return AddressPrefixes(ipv4=s.address_ipv4_prefix, ipv6=s.address_ipv6_prefix)


@lru_cache(maxsize=1)
def address_buckets() -> AddressBuckets:
    from racecap.fairness.buckets import AddressBuckets

    s = get_settings()
    return AddressBuckets(clients.cache, rate_per_second=s.rate_limit_per_second, burst=s.rate_limit_burst)


def runner_rate_limit(headers: Mapping[str, str]) -> int:
    """The runner API's per-address limit: seconds to wait, 0 to go (``http.make_resolver``)."""
    from racecap.fairness.identity import address_from

    return address_buckets().take(address_from(headers, address_prefixes())).retry_after_s


@lru_cache(maxsize=1)
def opening_queue() -> OpeningQueue:
    from racecap.fairness.queue import OpeningQueue
    from racecap.fairness.store import QueueStore

    store = QueueStore(clients.dynamodb(), get_settings().inventory_table)
    return OpeningQueue(catalog(), store, cache(), signer, audit=audit_trail)


# -- the race directors' admin API ----------------------------------------------------------
def transact(items: list[TransactItem]) -> None:
    from racecap.dal.transactions import transact as run_transaction

    run_transaction(clients.dynamodb(), items)


@lru_cache(maxsize=1)
def retention_purge() -> RetentionPurge:
    from racecap.dal.retention import DynamoRetention
    from racecap.logic.retention import RetentionPurge

    s = get_settings()
    store = DynamoRetention(clients.dynamodb(), s.races_table, s.inventory_table, s.registrations_table)
    from racecap.ledger.store import DynamoLedger

    ledger = DynamoLedger(clients.dynamodb(), s.registrations_table)
    return RetentionPurge(store, race_store(), transact, audit_trail(), ledger)


@lru_cache(maxsize=1)
def audit_trail() -> AuditTrail:
    from racecap.dal.audit import DynamoAudit
    from racecap.logic.audit import AuditTrail

    return AuditTrail(DynamoAudit(clients.dynamodb(), get_settings().audit_table))


@lru_cache(maxsize=1)
def window_control() -> WindowControl:
    from racecap.dal.workflows import StepFunctionsWorkflow
    from racecap.logic.window import WindowControl

    arn = get_settings().window_state_machine_arn
    if arn is None:
        raise ConfigurationError("WINDOW_STATE_MACHINE_ARN is not set for this function")
    workflow = StepFunctionsWorkflow(clients.aws("stepfunctions"), arn)
    return WindowControl(
        race_store(), windows(), workflow, transact, audit_trail(), catalog(), opened=opening_queue().opened
    )


@lru_cache(maxsize=1)
def race_admin() -> RaceAdmin:
    from racecap.logic.admin import RaceAdmin

    return RaceAdmin(
        race_store(),
        inventory(),
        transact=transact,
        audit=audit_trail(),
        catalog=catalog(),
        window=window_control(),
    )


@lru_cache(maxsize=1)
def participants() -> Participants:
    from racecap.logic.participants import Participants
    from racecap.questions.wiring import questions  # the capability's root imports this one

    return Participants(registrations(), questions())


@lru_cache(maxsize=1)
def race_stats() -> RaceStats:
    from racecap.codes.wiring import race_code_uses  # the capability's root imports this one
    from racecap.logic.stats import RaceStats

    return RaceStats(inventory(), registrations(), holds().live_counts, cache(), code_uses=race_code_uses)


@lru_cache(maxsize=1)
def payment_events() -> PaymentEvents:
    from racecap.dal.webhooks import DynamoWebhookLog
    from racecap.logic.payment_events import PaymentEvents

    log = DynamoWebhookLog(clients.dynamodb(), get_settings().inventory_table)
    from racecap.ledger.store import DynamoLedger

    ledger = DynamoLedger(clients.dynamodb(), get_settings().registrations_table)
    return PaymentEvents(
        payments(),
        registration_service(),
        holds(),
        registrations(),
        cancellations(),
        emails_queue(),
        log,
        _race_name,
        ledger,
    )


def _race_name(race_id: str) -> str | None:
    try:
        return catalog().definition(race_id)[0].name
    except Exception:  # a refund email must not wait on a race that no longer exists
        return None


@lru_cache(maxsize=1)
def cancellations() -> Cancellations:
    from racecap.ledger.store import DynamoLedger
    from racecap.logic.refunds import Cancellations

    ledger = DynamoLedger(clients.dynamodb(), get_settings().registrations_table)
    return Cancellations(
        registrations(), holds(), payments(), emails_queue(), transact, audit_trail(), catalog(), ledger
    )


# -- the email sender ---------------------------------------------------------------------------
@lru_cache(maxsize=1)
def notifier() -> Notifier:
    # Powertools' idempotency package imports boto3 (and with it s3transfer), ~50 ms of the
    # cold start of every function that imported it (tests/unit/test_cold_imports.py).
    from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer

    from racecap.dal.deliveries import DynamoDeliveryLog
    from racecap.dal.mailer import SesMailer
    from racecap.logic.notify import Notifier
    from racecap.ratelimit import SendRateLimiter

    settings = get_settings()
    return Notifier(
        SesMailer(clients.ses(), settings.email_from),
        SendRateLimiter(clients.cache, settings.email_send_rate_per_second),
        # The deduplication records live in the cache, the rate limiter's (issue 14): two
        # DynamoDB writes per email fewer. Losing one (a cache failover) could let a duplicate
        # message send a second email; the delivery log would show it.
        CachePersistenceLayer(client=cast(Any, clients.cache())),  # redis-py's own signature is wider
        deliveries=DynamoDeliveryLog(clients.dynamodb(), settings.registrations_table),
    )
