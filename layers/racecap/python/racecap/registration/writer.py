"""The writer: turns paid registrations on the queue into confirmed places with bibs.

SQS delivers at least once, so everything here is idempotent per registration: a
registration already written is skipped (its confirmation email is enqueued again;
the email sender sends each ``dedupKey`` once). Records are grouped per event and each
group is confirmed in one transaction with the bib counter (see ``registration/store.py``);
that is both what keeps bibs gap-free and what lets one event confirm hundreds of
registrations per second through a single counter item.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from racecap.aws.queues import MessageQueue
from racecap.emails.models import EmailMessage
from racecap.observability import logger, metrics
from racecap.pulse import CONFIRMED, pulse
from racecap.registration.models import PaidRegistration, PaidTeam, Registration
from racecap.registration.status import StatusSnapshots, WriterPace
from racecap.registration.store import MAX_PER_TRANSACTION, CounterMoved, DuplicateRegistration, RegistrationStore

if TYPE_CHECKING:
    from racecap.cache import TieredCache
    from racecap.questions.service import Questions  # the answers' one implementation

MAX_TRIES = 12


# A turn on an event's bib counter: longer than a batch's transactions normally take, far
# shorter than the function's timeout, so a crashed holder delays the next by this at most.
TURN_HOLD_MS = 2000


TURN_WAIT_S = 1.0


def confirmation_email(reg: Registration, answers: Sequence[tuple[str, str]] = ()) -> EmailMessage:
    """The confirmation; ``answers``: (question, answer as words) pairs, shown to the runner."""
    return EmailMessage(
        kind="confirmation",
        dedupKey=f"confirmation:{reg.registrationId}",
        to=reg.email,
        data={
            "firstName": reg.firstName,
            "lastName": reg.lastName,
            "raceName": reg.raceName,
            "eventName": reg.eventName,
            "bib": reg.bib,
            "registrationId": reg.registrationId,
            "amountCents": reg.amountCents,
            "currency": reg.currency,
            "raceDate": reg.raceDate,
            **({"answers": [{"label": q, "text": a} for q, a in answers]} if answers else {}),
        },
    )


class RegistrationWriter:
    def __init__(
        self,
        registrations: RegistrationStore,
        emails: MessageQueue,
        turns: TieredCache | None = None,
        pace: WriterPace | None = None,
        answers: Questions | None = None,
        snapshots: StatusSnapshots | None = None,
    ) -> None:
        self._answers = answers
        self._snapshots = snapshots
        self._regs = registrations
        self._emails = emails
        self._turns = turns
        self._pace = pace

    def process(self, records: list[dict[str, Any]]) -> list[str]:
        """Confirm every record it can; return the message ids that must be retried."""
        failed: list[str] = []
        groups: dict[tuple[str, str], list[tuple[str, list[PaidRegistration]]]] = defaultdict(list)
        for record in records:
            try:
                unit = _unit(json.loads(record["body"]))
            except ValueError:  # not JSON, or not a registration (pydantic's ValidationError is one)
                # Never drop: failing it sends it to the DLQ after maxReceiveCount, for a human.
                logger.error("malformed registration message", extra={"messageId": record["messageId"]})
                failed.append(record["messageId"])
                continue
            groups[(unit[0].raceId, unit[0].eventId)].append((record["messageId"], unit))
        confirmed = 0
        for (race_id, event_id), items in groups.items():
            try:
                # One writer at a time per event (issue 14): two that read the same bib counter
                # both build a transaction and one of them is cancelled — redelivered, wasted.
                # The counter's condition still guards the bibs if the turn is not had.
                with self._turn(race_id, event_id):
                    confirmed += self._confirm_event(race_id, event_id, [u for _, u in items])
            except Exception:
                logger.exception("could not confirm batch", extra={"raceId": race_id, "eventId": event_id})
                failed += [mid for mid, _ in items]
        self._record_pace(records, set(failed), confirmed)
        return failed

    def _record_pace(self, records: list[dict[str, Any]], failed: set[str], confirmed: int) -> None:
        """Tell the waiting screen how fast registrations go from the queue to their bibs."""
        sent = [
            int(r["attributes"]["SentTimestamp"])
            for r in records
            if r["messageId"] not in failed and str((r.get("attributes") or {}).get("SentTimestamp", "")).isdigit()
        ]
        if self._pace is None or not sent:
            return
        latency_s = max(0.0, time.time() - sum(sent) / len(sent) / 1000)
        try:
            self._pace.record(confirmed, latency_s)
        except Exception:
            # A figure for the waiting screen's estimate: never worth failing a written batch.
            logger.warning("writer pace not recorded", exc_info=True)

    def _turn(self, race_id: str, event_id: str) -> AbstractContextManager[bool]:
        if self._turns is None:
            return nullcontext(True)
        return self._turns.turn(f"bibs:{race_id}:{event_id}", hold_ms=TURN_HOLD_MS, wait_s=TURN_WAIT_S)

    def _confirm_event(self, race_id: str, event_id: str, units: list[list[PaidRegistration]]) -> int:
        """Confirm the event's units — a runner's registration, or a team's, whole — in as few
        transactions as fit (``MAX_PER_TRANSACTION`` registrations; a team never split)."""
        unique = {u[0].registrationId: u for u in units}
        done = self._regs.existing([p.registrationId for u in unique.values() for p in u])
        # A team is written in one transaction, so its members are all there or none is.
        todo = [u for u in unique.values() if u[0].registrationId not in done]
        confirmed: list[Registration] = []
        chunk: list[list[PaidRegistration]] = []
        for unit in todo:
            if chunk and sum(map(len, chunk)) + len(unit) > MAX_PER_TRANSACTION:
                confirmed += self._confirm_chunk(race_id, event_id, chunk)
                chunk = []
            chunk.append(unit)
        if chunk:
            confirmed += self._confirm_chunk(race_id, event_id, chunk)
        self._keep_statuses(confirmed)
        if done:
            metrics.add_metric(name="DuplicateDelivery", unit="Count", value=len(done))
        # Re-enqueue emails for duplicates too: the earlier delivery may have crashed
        # between its commit and its email; the sender deduplicates.
        self._emails.send_many([confirmation_email(r, self._answered(r)) for r in [*confirmed, *done.values()]])
        return len(confirmed)

    def _keep_statuses(self, confirmed: list[Registration]) -> None:
        """The waiting screens' answers for what this batch confirmed (one round trip): their
        next poll reads no table. Only the ones confirmed now: a duplicate's may have moved on."""
        if self._snapshots is None or not confirmed:
            return
        try:
            self._snapshots.keep(confirmed)
        except Exception:
            # A read saved for each poll: never worth failing a written batch.
            logger.warning("status snapshots not kept", exc_info=True)

    def _answered(self, reg: Registration) -> list[tuple[str, str]]:
        if self._answers is None or reg.answers is None:
            return []
        try:
            views = self._answers.described(reg.raceId, reg.eventId, reg.answers, reg.questionsVersion)
        except Exception:
            # The place is confirmed already: its email goes without the answers rather than never.
            logger.warning("answers unavailable for the confirmation", extra={"registrationId": reg.registrationId})
            return []
        return [(v.label, v.text) for v in views]

    def _confirm_chunk(self, race_id: str, event_id: str, chunk: list[list[PaidRegistration]]) -> list[Registration]:
        pending = list(chunk)
        for _ in range(MAX_TRIES):
            if not pending:
                return []
            first = self._regs.next_bib(race_id, event_id)
            try:
                confirmed = self._regs.confirm_batch(
                    race_id, event_id, first, [p for u in pending for p in u], datetime.now(UTC).isoformat()
                )
            except CounterMoved:
                continue
            except DuplicateRegistration:
                done = self._regs.existing([u[0].registrationId for u in pending])
                pending = [u for u in pending if u[0].registrationId not in done]
                continue
            metrics.add_metric(name="RegistrationConfirmed", unit="Count", value=len(confirmed))
            pulse.count(race_id, CONFIRMED, event_id, n=len(confirmed))
            return confirmed
        raise RuntimeError(f"bib counter for {race_id}/{event_id} kept moving; will retry the batch")


def _unit(body: Any) -> list[PaidRegistration]:
    """A message's registrations: one runner's (``PaidRegistration``), or a team's
    (``PaidTeam``: every member, written together)."""
    if isinstance(body, dict) and "members" in body:
        members = PaidTeam.model_validate(body).members
        if not members:
            raise ValueError("a team with no member")
        return members
    return [PaidRegistration.model_validate(body)]
