"""The writer: turns paid registrations on the queue into confirmed places with bibs.

SQS delivers at least once, so everything here is idempotent per registration: a
registration already written is skipped (its confirmation email is enqueued again;
the email sender sends each ``dedupKey`` once). Records are grouped per event and each
group is confirmed in one transaction with the bib counter (see ``dal/registrations``);
that is both what keeps bibs gap-free and what lets one event confirm hundreds of
registrations per second through a single counter item.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from racecap.dal.queues import SqsQueue
from racecap.dal.registrations import (
    MAX_PER_TRANSACTION,
    CounterMoved,
    DuplicateRegistration,
    DynamoRegistrations,
)
from racecap.observability import logger, metrics

MAX_TRIES = 12


class PaidRegistration(BaseModel):
    registrationId: str
    holdId: str
    raceId: str
    eventId: str
    email: str
    firstName: str
    lastName: str
    dateOfBirth: str
    amountCents: int
    currency: str
    chargeId: str
    raceName: str
    raceDate: str
    eventName: str
    paidAt: str


def confirmation_email(reg: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "confirmation",
        "dedupKey": f"confirmation:{reg['registrationId']}",
        "to": reg["email"],
        "data": {
            k: reg[k]
            for k in (
                "firstName",
                "lastName",
                "raceName",
                "eventName",
                "bib",
                "registrationId",
                "amountCents",
                "currency",
                "raceDate",
            )
        },
    }


class RegistrationWriter:
    def __init__(self, registrations: DynamoRegistrations, emails: SqsQueue) -> None:
        self._regs = registrations
        self._emails = emails

    def process(self, records: list[dict[str, Any]]) -> list[str]:
        """Confirm every record it can; return the message ids that must be retried."""
        failed: list[str] = []
        groups: dict[tuple[str, str], list[tuple[str, PaidRegistration]]] = defaultdict(list)
        for record in records:
            try:
                paid = PaidRegistration.model_validate(json.loads(record["body"]))
            except (ValidationError, json.JSONDecodeError):
                # Never drop: failing it sends it to the DLQ after maxReceiveCount, for a human.
                logger.error("malformed registration message", extra={"messageId": record["messageId"]})
                failed.append(record["messageId"])
                continue
            groups[(paid.raceId, paid.eventId)].append((record["messageId"], paid))
        for (race_id, event_id), items in groups.items():
            try:
                self._confirm_event(race_id, event_id, [p for _, p in items])
            except Exception:
                logger.exception("could not confirm batch", extra={"raceId": race_id, "eventId": event_id})
                failed += [mid for mid, _ in items]
        return failed

    def _confirm_event(self, race_id: str, event_id: str, paid: list[PaidRegistration]) -> None:
        unique = {p.registrationId: p for p in paid}
        done = self._regs.existing(list(unique))
        todo = [p for rid, p in unique.items() if rid not in done]
        confirmed: list[dict[str, Any]] = []
        for start in range(0, len(todo), MAX_PER_TRANSACTION):
            confirmed += self._confirm_chunk(race_id, event_id, todo[start : start + MAX_PER_TRANSACTION])
        if done:
            metrics.add_metric(name="DuplicateDelivery", unit="Count", value=len(done))
        # Re-enqueue emails for duplicates too: the earlier delivery may have crashed
        # between its commit and its email; the sender deduplicates.
        self._emails.send_many([confirmation_email(r) for r in [*confirmed, *done.values()]])

    def _confirm_chunk(self, race_id: str, event_id: str, chunk: list[PaidRegistration]) -> list[dict[str, Any]]:
        pending = list(chunk)
        for _ in range(MAX_TRIES):
            if not pending:
                return []
            first = self._regs.next_bib(race_id, event_id)
            now = datetime.now(UTC).isoformat()
            docs = [{**p.model_dump(), "confirmedAt": now} for p in pending]
            try:
                self._regs.confirm_batch(race_id, event_id, first, docs)
            except CounterMoved:
                continue
            except DuplicateRegistration:
                done = self._regs.existing([p.registrationId for p in pending])
                pending = [p for p in pending if p.registrationId not in done]
                continue
            metrics.add_metric(name="RegistrationConfirmed", unit="Count", value=len(docs))
            return [{**d, "bib": first + i} for i, d in enumerate(docs)]
        raise RuntimeError(f"bib counter for {race_id}/{event_id} kept moving; will retry the batch")
