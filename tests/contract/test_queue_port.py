"""The queue port's contract (``MessageQueue``): the same cases against ``FakeQueue`` and
``SqsQueue`` on ElasticMQ, so what the unit tests read off the fake is what SQS carries."""

from __future__ import annotations

from datetime import UTC, datetime

from racecap.emails.models import EmailMessage
from racecap.registration.models import PaidRegistration

from tests.contract.queues_under_test import QueueUnderTest


def _paid(n: int = 1) -> PaidRegistration:
    return PaidRegistration(
        registrationId=f"reg_{n}",
        holdId=f"hold_{n}",
        raceId="race_1",
        eventId="evt_1",
        email=f"zoe{n}@example.com",
        firstName="Zoë",  # not ASCII: the body must carry it unchanged
        lastName="Ørsted-Łukasz 走",
        dateOfBirth="1990-01-01",
        amountCents=2500,
        currency="EUR",
        chargeId="pi_1",
        raceName="Course de la Côte",
        raceDate="2027-05-01",
        eventName="10K",
        paidAt=datetime(2027, 1, 1, tzinfo=UTC).isoformat(),
    )


def _email(n: int) -> EmailMessage:
    return EmailMessage(kind="confirmation", dedupKey=f"confirmation:reg_{n}", to=f"r{n}@example.com", data={"n": n})


def test_a_message_arrives_once_as_its_json(queue: QueueUnderTest):
    message = _paid()
    message_id = queue.queue.send(message)
    assert isinstance(message_id, str) and message_id
    (body,) = queue.drain()
    assert body == message.model_dump_json()
    assert PaidRegistration.model_validate_json(body) == message
    assert queue.drain() == []


def test_each_message_gets_its_own_id(queue: QueueUnderTest):
    ids = [queue.queue.send(_paid(n)) for n in range(3)]
    assert len(set(ids)) == 3
    assert sorted(queue.drain()) == sorted(_paid(n).model_dump_json() for n in range(3))


def test_a_batch_of_any_size_arrives_whole(queue: QueueUnderTest):
    messages = [_email(n) for n in range(23)]  # SQS takes 10 a call: three calls
    queue.queue.send_many(messages)
    bodies = queue.drain()
    assert sorted(bodies) == sorted(m.model_dump_json() for m in messages)
    assert {EmailMessage.model_validate_json(b).data["n"] for b in bodies} == set(range(23))


def test_an_empty_batch_sends_nothing(queue: QueueUnderTest):
    queue.queue.send_many([])
    assert queue.drain() == []
