"""Throttling, transaction conflicts and crashes — injected, since DynamoDB Local has none —
are retried and lose nothing."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from racecap.cache import TieredCache
from racecap.errors import SoldOut
from racecap.holds.models import Attempt
from racecap.holds.service import HoldService
from racecap.holds.store import DynamoHolds
from racecap.registration.attempts import DynamoAttempts
from racecap.registration.store import CounterMoved, DynamoRegistrations
from racecap.registration.writer import RegistrationWriter

from blueprint import queue
from tests.integration.faults import Crash, CrashAfter, FaultInjector, throttling, transaction_conflict
from tests.integration.flows import concurrently

pytestmark = pytest.mark.integration


def fresh_client(stack) -> Any:
    """A client of our own, so hooks don't leak into other tests."""
    return boto3.session.Session(
        aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
    ).client("dynamodb", endpoint_url=stack.aws_env()["AWS_ENDPOINT_URL_DYNAMODB"])


class ListQueue:
    """The email port, as a list: this test is about the writer's tables."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send_many(self, bodies: list[dict]) -> None:
        self.sent += bodies


def test_given_conflicts_and_throttling_when_holds_burst_then_exactly_cap_are_held(stack, backend):
    race_id = backend.create_race([25])
    (event,) = backend.store().get_race(race_id)[1]
    client = fresh_client(stack)
    conflicts = FaultInjector(client, "TransactWriteItems", transaction_conflict, every=4)
    throttled = FaultInjector(client, "TransactWriteItems", throttling, every=7)
    service = HoldService(backend.catalog(), DynamoHolds(client, backend.table("Inventory")), backend.cache())

    def attempt(_: int) -> str:
        try:
            service.hold(race_id, event.eventId)
            return "held"
        except SoldOut:
            return "sold out"

    outcomes = Counter(concurrently(attempt, list(range(200)), workers=24))

    assert outcomes == {"held": 25, "sold out": 175}
    assert conflicts.injected >= 8 and throttled.injected >= 4
    usage = backend.inventory().usage(race_id, event.eventId, consistent=True)
    assert (usage.cap, usage.taken) == (25, 25)


def _paid_registrations(backend, race_id: str, event_id: str, n: int) -> list[dict]:
    """Holds in PAYING with their email claimed, and the messages the API would enqueue."""
    holds = DynamoAttempts(backend.dynamodb, backend.table("Inventory"))
    service = HoldService(backend.catalog(), holds, backend.cache())
    messages = []
    for i in range(n):
        h = service.hold(race_id, event_id)
        item = holds.get(h.holdId)
        email = f"writer-{i}-{race_id[-6:]}@example.com".lower()
        attempt = Attempt(f"key{i}", email, "W", f"R{i}", "1990-01-01", 2500, "USD", datetime.now(UTC).isoformat())
        assert holds.begin_payment(item, attempt, datetime.now(UTC)) == "STARTED"
        messages.append(
            {
                "messageId": f"m-{i}",
                "body": json.dumps(
                    {
                        "registrationId": item["registrationId"],
                        "holdId": h.holdId,
                        "raceId": race_id,
                        "eventId": event_id,
                        "email": email,
                        "firstName": "W",
                        "lastName": f"R{i}",
                        "dateOfBirth": "1990-01-01",
                        "amountCents": 2500,
                        "currency": "USD",
                        "chargeId": f"ch_{i}",
                        "raceName": "Test Race",
                        "raceDate": "2027-01-01",
                        "eventName": "Event 0",
                        "paidAt": datetime.now(UTC).isoformat(),
                    }
                ),
            }
        )
    return messages


def test_given_a_writer_that_crashes_and_redeliveries_then_each_registration_is_confirmed_once(stack, backend):
    race_id = backend.create_race([40])
    (event,) = backend.store().get_race(race_id)[1]
    messages = _paid_registrations(backend, race_id, event.eventId, 35)
    client = fresh_client(stack)
    crashes = CrashAfter(client, "TransactWriteItems", every=2)
    conflicts = FaultInjector(client, "TransactWriteItems", transaction_conflict, every=4)
    emails = ListQueue()
    writer = RegistrationWriter(
        DynamoRegistrations(client, backend.table("Registrations"), backend.table("Inventory")), emails
    )

    # SQS at least once: batches of 10, failed records redelivered, plus stray duplicates.
    pending = messages + messages[:5]
    rounds = 0
    while pending and rounds < 20:
        rounds += 1
        failed: list[str] = []
        for start in range(0, len(pending), 10):
            batch = pending[start : start + 10]
            try:
                failed += writer.process(batch)
            except Crash:
                failed += [m["messageId"] for m in batch]
        pending = [m for m in messages if m["messageId"] in set(failed)]

    assert not pending, f"still failing after {rounds} rounds"
    assert crashes.crashes > 0 and conflicts.injected > 0
    regs = backend.registrations().existing([json.loads(m["body"])["registrationId"] for m in messages])
    assert len(regs) == 35
    assert sorted(int(r["bib"]) for r in regs.values()) == list(range(1, 36))  # no gaps, no duplicates
    # Every confirmed registration got its email request (the sender deduplicates repeats).
    assert {e["dedupKey"] for e in emails.sent} == {f"confirmation:{rid}" for rid in regs}
    holds = backend.holds()
    assert {holds.get(r["holdId"])["status"] for r in regs.values()} == {"CONFIRMED"}


class CountingRegistrations(DynamoRegistrations):
    """The writer's store, counting the transactions another writer's bibs cancelled."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.lost = 0

    def confirm_batch(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().confirm_batch(*args, **kwargs)
        except CounterMoved:
            self.lost += 1
            raise


@pytest.mark.parametrize("turns", [True, False], ids=["taking-turns", "without-turns"])
def test_given_writers_racing_for_one_events_bibs_then_turns_leave_no_transaction_lost(stack, backend, turns):
    """Issue 14: four writers confirm one event's registrations at once. The bibs are 1..N
    either way (the counter's condition); with turns (the deployed wiring) no writer builds
    a transaction another one has already made stale. Without them the same race loses
    some, which is what shows the test can tell the difference."""
    race_id = backend.create_race([90])
    (event,) = backend.store().get_race(race_id)[1]
    messages = _paid_registrations(backend, race_id, event.eventId, 80)
    stores = [
        CountingRegistrations(fresh_client(stack), backend.table("Registrations"), backend.table("Inventory"))
        for _ in range(4)
    ]
    writers = [
        RegistrationWriter(store, ListQueue(), turns=TieredCache(lambda: backend.redis) if turns else None)
        for store in stores
    ]
    batches = [messages[i : i + 2] for i in range(0, len(messages), 2)]  # small batches: many transactions

    def write(i: int) -> list[str]:
        failed: list[str] = []
        for sent in batches[i::4]:
            batch = sent
            # What the queue does with a batch item the writer gave back: it comes again. Without
            # turns a writer can lose the counter MAX_TRIES times in a row on a busy machine; the
            # redelivery is the deployed retry, so it is part of the race, within the queue's
            # receive count (a message past it would be in the DLQ: a failure here).
            for _ in range(queue("Registrations").max_receive_count):
                by_id = {m["messageId"]: m for m in batch}
                batch = [by_id[f] for f in writers[i].process(batch)]
                if not batch:
                    break
            failed += [m["messageId"] for m in batch]
        return failed

    assert concurrently(write, list(range(4)), workers=4) == [[], [], [], []]
    regs = backend.registrations().existing([json.loads(m["body"])["registrationId"] for m in messages])
    assert sorted(int(r["bib"]) for r in regs.values()) == list(range(1, 81))
    lost = sum(s.lost for s in stores)
    if turns:
        assert lost == 0
    else:
        assert lost > 0  # four writers on one counter do collide
