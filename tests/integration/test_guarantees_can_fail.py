"""The checks every "audit clean" and every "sold out" rests on, shown to fail when their
guarantee is broken: the audit planted with each violation it looks for, a message that
really fails five times in the dead-letter queue, and the sold-out answer's write count."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from racecap.aws.items import to_item
from racecap.aws.keys import cap_pk, option_counter, shard_sk
from racecap.emails.store import DynamoDeliveryLog
from racecap.errors import SoldOut
from racecap.holds.service import HoldService
from racecap.questions.store import questions_pk, version_sk

import blueprint
from tests.integration.flows import standin
from tools.audit import AuditReport, audit, local_provider
from tools.stage import DeliveredConfirmations

pytestmark = pytest.mark.integration

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


def _audit(stack: Any, backend: Any, race_id: str) -> AuditReport:
    return audit(
        backend.dynamodb,
        backend.sqs,
        race_id,
        provider=local_provider(stack),
        mailbox_url=stack.mailbox_url,
        queue_urls=stack.queue_urls,
    )


def _plant_registration(backend: Any, race_id: str, event_id: str, bib: int, email: str, **more: Any) -> str:
    rid = more.pop("registrationId", None) or f"reg_planted{uuid.uuid4().hex[:12]}"
    item = {
        "pk": f"REG#{rid}",
        "sk": "REG",
        "registrationId": rid,
        "raceId": race_id,
        "eventId": event_id,
        "gsi1pk": f"EVENT#{race_id}#{event_id}",
        "gsi1sk": f"BIB#{bib:08d}",
        "bib": bib,
        "email": email,
        "status": "CONFIRMED",
        **more,
    }
    backend.dynamodb.put_item(TableName=backend.table("Registrations"), Item=to_item(item))
    return rid


def _email() -> str:
    return f"planted-{uuid.uuid4().hex[:8]}@example.com"


def _plant_oversold(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    for bib in (1, 2):  # cap 1
        _plant_registration(backend, race_id, event_id, bib, _email())


def _plant_duplicate_email(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    same = _email()
    for bib in (1, 2):
        _plant_registration(backend, race_id, event_id, bib, same)


def _plant_bib_gap(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    for bib in (1, 3):
        _plant_registration(backend, race_id, event_id, bib, _email())


def _plant_charge_without_registration(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # No holdId: not a payment Racecap's webhook acts on, so nothing refunds it behind the audit's back.
    body = {
        "amount": "2500",
        "currency": "usd",
        "payment_method": "pm_card_visa",
        "confirm": "true",
        "description": "planted",
        "metadata[raceId]": race_id,
        "metadata[registrationId]": f"reg_nobody{uuid.uuid4().hex[:8]}",
    }
    resp = standin(stack).post(
        f"{stack.stripe_url}/v1/payment_intents", data=body, headers={"Idempotency-Key": uuid.uuid4().hex}
    )
    assert resp.status_code == 200, resp.text


def _plant_missing_email(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    _plant_registration(backend, race_id, event_id, 1, _email())


def _plant_price_not_held(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A hold taken at 25.00 whose registration says 20.00 with no code: a price edited meanwhile.
    hold_id = f"hold_planted{uuid.uuid4().hex[:8]}"
    backend.dynamodb.put_item(
        TableName=backend.table("Inventory"),
        Item=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD", "holdId": hold_id, "amountCents": 2500}),
    )
    _plant_registration(backend, race_id, event_id, 1, _email(), holdId=hold_id, amountCents=2000, currency="USD")


def _plant_incomplete_team(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A team of three of which two registrations exist: a team is complete or absent.
    ids = [f"reg_team{uuid.uuid4().hex[:10]}" for _ in range(3)]
    for bib, rid in enumerate(ids[:2], start=1):
        _plant_registration(
            backend, race_id, event_id, bib, _email(), registrationId=rid, holdId="hold_team", teamMembers=ids
        )


def _plant_confirmation_sent_twice(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # Two confirmation emails about one registration in the mailbox (SES's v2 API, as the sender sends).
    rid = _plant_registration(backend, race_id, event_id, 1, _email())
    tags = [{"Name": "kind", "Value": "confirmation"}, {"Name": "registrationId", "Value": rid}]
    for _ in range(2):
        for _attempt in range(50):  # the stand-in's send rate is SES's: wait for a turn
            resp = requests.post(
                f"{stack.mailbox_url}/v2/email/outbound-emails",
                json={"Destination": {"ToAddresses": ["planted@example.com"]}, "EmailTags": tags},
                timeout=10,
            )
            if resp.status_code != 429:
                break
            time.sleep(0.2)
        assert resp.status_code == 200, resp.text


def _plant_stock_kept_by_a_cancellation(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A T-shirt size with stock, one unit taken, and the only registration that chose it
    # cancelled: its unit never went back.
    races, inventory = backend.table("Races"), backend.table("Inventory")
    doc = {"stock": {"shirt#m": [shard_sk(0)]}, "questions": []}
    put = backend.dynamodb.put_item
    put(
        TableName=races,
        Item=to_item(
            {"pk": questions_pk(race_id, event_id), "sk": version_sk(1), "version": 1, "doc": json.dumps(doc)}
        ),
    )
    put(TableName=races, Item=to_item({"pk": questions_pk(race_id, event_id), "sk": "CURRENT", "version": 1}))
    counter = cap_pk(race_id, option_counter(event_id, "shirt", "m"))
    put(TableName=inventory, Item=to_item({"pk": counter, "sk": shard_sk(0), "cap": 10, "taken": 1}))
    _plant_registration(
        backend, race_id, event_id, 1, _email(), status="CANCELLED", answers='{"shirt":"m"}', questionsVersion=1
    )


def _plant_refunds_past_the_payments(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A free entry whose ledger's sum says 5.00 was refunded: more than the 0 it paid.
    _plant_registration(backend, race_id, event_id, 1, _email(), amountCents=0, currency="USD", ledgerRefundedCents=500)


def _plant_offer_without_its_place(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A waitlist offer out (and the line counting it) whose place no shard counts: offered twice over.
    pk = f"WAITLIST#{race_id}#{event_id}"
    offer = {"pk": pk, "sk": "OFFER#planted", "entryId": "planted", "state": "OFFERED", "shard": "SHARD#000"}
    backend.dynamodb.put_item(TableName=backend.table("Inventory"), Item=to_item(offer))
    line = {"pk": pk, "sk": "LINE", "seq": 1, "head": 1, "waiting": 0, "pool": 0, "offered": 1}
    backend.dynamodb.put_item(TableName=backend.table("Inventory"), Item=to_item(line))


def _plant_transfer_without_its_claim(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A place handed over whose registration names the new address, the claim left on the old.
    rid = _plant_registration(backend, race_id, event_id, 1, _email(), transfers=1)
    old = {"pk": f"EMAIL#{race_id}#{_email()}", "sk": "EMAIL", "registrationId": rid, "status": "CLAIMED"}
    backend.dynamodb.put_item(TableName=backend.table("Inventory"), Item=to_item(old))


def _plant_switch_without_its_move(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # The record of an entry that left for another event, its registration still in this one.
    rid = _plant_registration(backend, race_id, event_id, 1, _email(), amountCents=0, currency="USD")
    _plant_registration(backend, race_id, event_id, 2, _email(), registrationId=f"{rid}-s1", status="SWITCHED",
                        switchedTo=rid, amountCents=0, currency="USD")  # fmt: skip


def _plant_deferral_without_its_code(stack: Any, backend: Any, race_id: str, event_id: str) -> None:
    # A place deferred (cancelled with no refund) whose credit never reached the next edition.
    _plant_registration(backend, race_id, event_id, 1, _email(), status="CANCELLED", amountCents=0, currency="USD",
                        deferredTo=race_id, deferralCode="DEFER-000000000000", deferralCreditCents=4000)  # fmt: skip


@pytest.mark.parametrize(
    ("plant", "caps", "violation"),
    [
        (_plant_oversold, [1], "2 confirmed > cap 1"),
        (_plant_duplicate_email, [5], "registered 2 times"),
        (_plant_bib_gap, [5], "bibs are not 1..2"),
        (_plant_charge_without_registration, [5], "was charged but is not confirmed"),
        (_plant_missing_email, [5], "1 confirmed registrations have no confirmation email"),
        (_plant_price_not_held, [5], "its hold's price is 2500"),
        (_plant_incomplete_team, [5], "2 of its 3 registrations"),
        (_plant_confirmation_sent_twice, [5], "1 registrations got more than one confirmation email"),
        (_plant_stock_kept_by_a_cancellation, [5], "option shirt/m: 1 units taken, its live entries hold 0"),
        (_plant_refunds_past_the_payments, [5], "its ledger refunded 500 of the 0 cents it paid"),
        (_plant_offer_without_its_place, [5], "shards count 0 places taken, but 0 registered + 0 held + 1 offered"),
        (_plant_transfer_without_its_claim, [5], "its address's claim does not name it"),
        (_plant_switch_without_its_move, [5], "is not in another event"),
        (_plant_deferral_without_its_code, [5], "without its code there"),
    ],
    ids=[
        "oversold event",
        "duplicate email",
        "gap in bibs",
        "charge without registration",
        "missing email",
        "price not the held one",
        "team not whole",
        "confirmation sent twice",
        "stock unit kept by a cancellation",
        "refunds past the payments",
        "waitlist offer without its place",
        "place handed over without its claim",
        "switch recorded without its move",
        "deferral without its code",
    ],
)
def test_the_audit_fails_on_each_violation_it_checks(stack, backend, plant, caps, violation) -> None:
    race_id = backend.create_race(caps)
    _, events = backend.store().get_race(race_id)
    assert _audit(stack, backend, race_id).ok

    plant(stack, backend, race_id, events[0].eventId)

    report = _audit(stack, backend, race_id)
    assert not report.ok
    assert any(violation in v for v in report.violations), report.summary()


def test_the_audit_of_a_stage_fails_on_two_confirmations_in_the_delivery_log(stack, backend) -> None:
    # A deployed stage has no mailbox: the audit counts the email sender's delivery log instead.
    race_id = backend.create_race([5])
    _, events = backend.store().get_race(race_id)
    regs_table = backend.table("Registrations")
    stage = SimpleNamespace(tables={"Registrations": regs_table})
    delivered = DeliveredConfirmations(backend.dynamodb, stage)  # type: ignore[arg-type]

    def stage_audit() -> AuditReport:
        return audit(
            backend.dynamodb,
            backend.sqs,
            race_id,
            provider=local_provider(stack),
            confirmations=delivered,
            queue_urls=stack.queue_urls,
        )

    rid = _plant_registration(backend, race_id, events[0].eventId, 1, _email())
    log = DynamoDeliveryLog(backend.dynamodb, regs_table)
    log.record(rid, "confirmation", f"confirmation-{rid}", "ses-1", datetime.now(UTC))
    twice = "1 registrations got more than one confirmation email"
    # One delivery, as it should be (a planted registration took no place: only that is flagged).
    once = stage_audit()
    assert once.emails_sent == 1 and twice not in once.violations, once.summary()
    log.record(rid, "confirmation", f"confirmation-{rid}", "ses-2", datetime.now(UTC))
    report = stage_audit()
    assert twice in report.violations, report.summary()


def test_the_audit_fails_on_a_message_in_a_dead_letter_queue(stack, backend) -> None:
    race_id = backend.create_race([5])
    assert _audit(stack, backend, race_id).ok
    dlq = stack.queue_urls[blueprint.queue("Emails").dlq_id]
    backend.sqs.send_message(QueueUrl=dlq, MessageBody='{"planted": true}')
    try:
        report = _audit(stack, backend, race_id)
        assert not report.ok
        assert "1 messages in dead-letter queues" in report.violations, report.summary()
    finally:
        _drain(backend, dlq)
    assert _audit(stack, backend, race_id).ok


def _drain(backend: Any, url: str) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    while msgs := backend.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"]
    ).get("Messages", []):
        got += msgs
        for m in msgs:
            backend.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return got


def test_a_message_the_writer_really_fails_five_times_lands_in_the_dlq(stack, backend) -> None:
    # The real writer behind the real poller fails a malformed registration message; SQS
    # (ElasticMQ) moves it to the DLQ after maxReceiveCount receives. Only the clock is
    # shortened: the queue's visibility timeout, for the length of this test.
    queue = blueprint.queue("Registrations")
    url, dlq = stack.queue_urls[queue.id], stack.queue_urls[queue.dlq_id]
    marker = uuid.uuid4().hex
    backend.sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "1"})
    try:
        sent = backend.sqs.send_message(QueueUrl=url, MessageBody=f'{{"poison": "{marker}"}}')
        deadline = time.monotonic() + 90
        landed: list[dict[str, Any]] = []
        while not landed and time.monotonic() < deadline:
            landed = [m for m in _drain(backend, dlq) if marker in m["Body"]]
    finally:
        backend.sqs.set_queue_attributes(
            QueueUrl=url, Attributes={"VisibilityTimeout": str(queue.visibility_timeout_s)}
        )
    assert landed, "the poison message never reached the DLQ"
    # It got there by failing in the writer exactly maxReceiveCount times (each failure
    # logged), not by being dropped, skipped or given up on early. The last failure is
    # logged before SQS moves the message, but the poller's log may reach the file a moment
    # later: wait for it briefly, then count.
    attempts = _writer_failures(stack, sent["MessageId"])
    deadline = time.monotonic() + 10
    while attempts < queue.max_receive_count and time.monotonic() < deadline:
        time.sleep(0.5)
        attempts = _writer_failures(stack, sent["MessageId"])
    assert attempts == queue.max_receive_count == 5


def _writer_failures(stack: Any, message_id: str) -> int:
    logs = "".join(p.read_text(errors="replace") for p in stack.log_dir.glob("*.log"))
    return sum(1 for line in logs.splitlines() if message_id in line and "malformed" in line)


def test_after_a_sell_out_the_sold_out_answer_costs_no_dynamodb_write(backend) -> None:
    race_id = backend.create_race([2])
    _, events = backend.store().get_race(race_id)
    event_id = events[0].eventId
    calls: list[str] = []

    def count(model: Any, **_: Any) -> None:
        calls.append(model.name)

    backend.dynamodb.meta.events.register("before-call.dynamodb.*", count)
    try:
        first = HoldService(backend.catalog(), backend.holds(), backend.cache())
        first.hold(race_id, event_id)
        first.hold(race_id, event_id)
        with pytest.raises(SoldOut):
            first.hold(race_id, event_id)  # finds every shard full (failed conditional writes), sets the flag
        assert WRITES & set(calls)
        calls.clear()
        # This environment's memory, and a cold one that only has the shared flag (Redis).
        cold = HoldService(backend.catalog(), backend.holds(), backend.cache())
        for service in (first, cold) * 10:
            with pytest.raises(SoldOut):
                service.hold(race_id, event_id)
    finally:
        backend.dynamodb.meta.events.unregister("before-call.dynamodb.*", count)
    assert [c for c in calls if c in WRITES] == []
