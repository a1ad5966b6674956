"""The registration writer's pace and backlog, and what the waiting screen reads: the writer tallies what it
confirmed and how long each took from the queue (Redis, one round trip a batch); the waiting
screen's status answer reads the backlog, rebuilt at most every ``BACKLOG_TTL_S`` for every
environment together from that tally and the queue's own depth (one SQS call)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from racecap.cache import TieredCache
from racecap.errors import RegistrationNotFound
from racecap.holds.models import PAID_PHASES
from racecap.holds.service import hold_id_for
from racecap.money import in_units
from racecap.observability import logger
from racecap.registration.attempts import Attempts
from racecap.registration.models import Registration, RegistrationPhase, RegistrationStatus, refunded_by_cancel
from racecap.registration.store import RegistrationStore


@dataclass(frozen=True)
class Backlog:
    """The registration writer's backlog, as the waiting screen's wait is worked out from it
    (``registration.status``)."""

    waiting: int  # registrations on the writer's queue, waiting or being written
    per_second: float  # what the writer confirmed per second lately (0 when idle)
    latency_s: float  # queue to bib for the registrations it confirmed last (0 when unknown)


class WriterPace(Protocol):
    """What the writer measured of itself (it records), and its backlog (the waiting screen reads)."""

    def record(self, confirmed: int, latency_s: float) -> None: ...

    def backlog(self) -> Backlog | None:
        """The writer's backlog now, or None when it cannot be told (the paper's schedule then)."""
        ...


PACE_KEY = "writer:pace"


PACE_WINDOW_S = 10


BACKLOG_TTL_S = 2.0


DEPTH = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")


class SqsWriterPace:
    """``ports.WriterPace`` on SQS (the queue's depth) and Redis (the writer's tally)."""

    def __init__(self, sqs: Any, queue_url: str, cache: TieredCache) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._cache = cache

    # -- the writer ----------------------------------------------------------------
    def record(self, confirmed: int, latency_s: float) -> None:
        self._cache.tally(PACE_KEY, confirmed, round(latency_s, 3), PACE_WINDOW_S)

    # -- the waiting screen ------------------------------------------------------------
    def backlog(self) -> Backlog | None:
        raw = self._cache.get_or_load("writer:backlog", self._measure, ttl=BACKLOG_TTL_S, local_ttl=1.0)
        return Backlog(**raw) if raw else None

    def _measure(self) -> dict[str, Any] | None:
        try:
            attrs = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=list(DEPTH))["Attributes"]
        except (BotoCoreError, ClientError):
            # The paper's schedule for a couple of seconds: a wait, never an error, for the runner.
            logger.warning("registrations queue depth unavailable", exc_info=True)
            return None
        per_second, latency_s = self._cache.tallied(PACE_KEY, PACE_WINDOW_S)
        return {
            "waiting": sum(int(attrs.get(name, 0)) for name in DEPTH),
            "per_second": round(per_second, 2),
            "latency_s": latency_s or 0.0,
        }


# The paper's waiting screen: poll after 10, 20, 40, then every 60 seconds.
BACKOFF_SCHEDULE = ((10, 10), (30, 20), (70, 40))


BACKOFF_LAST = 60


# How many registrations a second the writer confirms at the least while it works through a
# backlog, for the first seconds of a burst before it has measured itself. Conservative: two
# environments (its trigger's maximum concurrency) confirming one 25-item transaction a second
# each would be 50.
SLOWEST_CONFIRMATIONS_PER_S = 20.0


# A registration's time from the queue to its bib when nothing waits before it, until the
# writer has measured it: its trigger gathers a batch for up to a second (blueprint: the
# RegistrationWriter QueueTrigger's max_batching_window_s, kept in step by a unit test).
IDLE_LATENCY_S = 1.0


# Later than its estimate by this much, a registration is not behind the queue the estimate
# knows of (its message was lost, the writer is failing): the paper's back-off, rather than
# asking every second for the minutes until the sweeper re-sends it.
OVERDUE_AFTER_S = 5.0


def paper_wait_s(queued_for_s: float) -> int:
    for until, wait in BACKOFF_SCHEDULE:
        if queued_for_s < until:
            return wait
    return BACKOFF_LAST


def wait_s(queued_for_s: float, backlog: Backlog | None) -> int:
    """Seconds until a registration queued ``queued_for_s`` ago is likely confirmed."""
    ceiling = paper_wait_s(queued_for_s)
    if backlog is None:
        return ceiling
    rate = max(backlog.per_second, SLOWEST_CONFIRMATIONS_PER_S)
    # The writer's last measured latency already includes the queue as it was; the queue as
    # it is now, at the writer's pace, can say it is longer (a burst just arrived). Rounded to
    # the nearest second: asking a little early costs one more read, a little late nothing.
    expected = max(backlog.latency_s or IDLE_LATENCY_S, backlog.waiting / rate)
    if queued_for_s > expected + OVERDUE_AFTER_S:
        return ceiling
    return max(1, min(ceiling, round(expected - queued_for_s)))


# How long the writer's snapshot of a registration it just confirmed answers the waiting
# screen. The screen asks within seconds of the confirmation, so a short life costs nothing;
# every path that changes a registration's status or names forgets it (``StatusSnapshots.forget``),
# and an unavailable Redis means the table is read, as before.
STATUS_SNAPSHOT_TTL_S = 300.0


def status_of(reg: Registration) -> RegistrationStatus:
    """A registration's status as the waiting screen reads it."""
    return RegistrationStatus(
        registrationId=reg.registrationId,
        status=reg.status.value,
        raceId=reg.raceId,
        eventId=reg.eventId,
        bib=reg.bib,
        firstName=reg.firstName,
        lastName=reg.lastName,
        eventName=reg.eventName,
        raceName=reg.raceName,
        confirmedAt=datetime.fromisoformat(reg.confirmedAt),
        cancelledAt=datetime.fromisoformat(reg.cancelledAt) if reg.cancelledAt else None,
        message=cancelled_message(reg),
    )


class StatusSnapshots:
    """The waiting screen's answer for a registration the writer just confirmed, kept in the
    shared cache by the writer (one pipelined write a batch), so the screen's poll is no
    DynamoDB read (issue 38): the status only ever moves on from CONFIRMED by a cancellation,
    and the cancellations and the runner's edits forget the snapshot when they write."""

    def __init__(self, cache: TieredCache) -> None:
        self._cache = cache

    def keep(self, regs: list[Registration]) -> None:
        self._cache.put_many(
            {_snapshot_key(r.registrationId): status_of(r).model_dump(mode="json") for r in regs},
            STATUS_SNAPSHOT_TTL_S,
        )

    def get(self, registration_id: str) -> RegistrationStatus | None:
        raw = self._cache.peek(_snapshot_key(registration_id))
        return RegistrationStatus.model_validate(raw) if raw else None

    def forget(self, registration_id: str) -> None:
        self._cache.delete(_snapshot_key(registration_id))


def _snapshot_key(registration_id: str) -> str:
    return f"status:{registration_id}"


class StatusReads:
    """What the waiting screen reads: a registration's status and when to look again. Part of RegistrationService."""

    _holds: Attempts
    _registrations: RegistrationStore
    _pace: WriterPace | None
    _snapshots: StatusSnapshots | None

    # -- the waiting screen -----------------------------------------------------------------
    def first_wait(self) -> int:
        """Seconds until a registration queued now is likely confirmed: the waiting screen's
        first check (the queued answer's ``Retry-After``)."""
        return wait_s(0.0, self._backlog())

    def _backlog(self) -> Backlog | None:
        if self._pace is None:
            return None
        try:
            return self._pace.backlog()
        except Exception:
            # Only the wait's estimate is lost: the paper's schedule answers instead.
            logger.warning("writer backlog unavailable", exc_info=True)
            return None

    def status(self, registration_id: str, now: datetime | None = None) -> tuple[RegistrationStatus, int | None]:
        now = now or datetime.now(UTC)
        if self._snapshots is not None and (kept := self._snapshots.get(registration_id)) is not None:
            return kept, None
        reg = self._registrations.get(registration_id)
        if reg is not None:
            return status_of(reg), None
        hold = self._holds.get(hold_id_for(registration_id)) if registration_id.startswith("reg_") else None
        if hold is None or registration_id not in (hold.registrationId, *hold.memberIds) or hold.attempt is None:
            raise RegistrationNotFound(f"No registration with id {registration_id}.")
        base = RegistrationStatus(
            registrationId=registration_id, status="QUEUED", raceId=hold.raceId, eventId=hold.eventId
        )
        if hold.status in PAID_PHASES:
            since = hold.queuedAt or datetime.fromisoformat(hold.attempt.startedAt)
            return base, wait_s((now - since).total_seconds(), self._backlog())
        base.status = "FAILED"
        base.message = "The registration could not be completed and no payment was kept."
        return base, None


def cancelled_message(reg: Registration) -> str | None:
    """What a cancelled (or cancelling) registration's status says, in the runner's words."""
    if reg.status == RegistrationPhase.CANCELLING:
        return "This registration is being cancelled; its refund is on its way. The place is no longer yours."
    if reg.status != RegistrationPhase.CANCELLED:
        return None
    refunded = refunded_by_cancel(reg)
    code = reg.currency.upper()
    money = f"{in_units(refunded, code)} {code}" if refunded else "nothing"
    return f"This registration was cancelled; the place is no longer yours. Refunded: {money}."
