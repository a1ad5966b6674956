"""What the waiting screen's poll and the provider's webhook cost after a registration is
queued and confirmed (issue 38): answered from what the writer and the confirm call already
know (Redis), not by reading DynamoDB again, and read from the table once that knowledge is
gone or no longer true (a cancellation forgets the snapshot; Redis down reads through)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import requests
from racecap import clients
from racecap.cache import shared
from racecap.payments.wiring import payments
from racecap.registration.models import RegistrationRequest
from racecap.registration.payment import paid_mark
from racecap.registration.wiring import registration_service

from local.stack import LocalStack

from .admin import race_body, wait_until
from .flows import hold_and_register, runner, wait_confirmed, webhooks

pytestmark = pytest.mark.integration


@contextmanager
def dynamodb_calls() -> Iterator[Counter[str]]:
    """The DynamoDB operations this process makes inside the block: by name, and by name and
    table (``GetItem:racecap-inventory``)."""
    calls: Counter[str] = Counter()

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls[model.name] += 1
        if "TableName" in params:
            calls[f"{model.name}:{params['TableName']}"] += 1

    client = clients.dynamodb()
    client.meta.events.register("before-parameter-build.dynamodb", count)
    try:
        yield calls
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb", count)


def test_the_poll_and_the_webhook_after_a_confirmation_read_no_table_and_a_cancellation_is_seen_at_once(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any, in_process_env: None
) -> None:
    kim = director("kim-round-trips")
    race = kim.post("/api/admin/races", json=race_body((5,))).json()
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(race_id)
    wait_until(lambda: api.get(f"/api/races/{race_id}").json()["status"] == "OPEN", timeout=5)
    _, reg_id = hold_and_register(api, race_id, event_id, runner())
    wait_confirmed(api, [reg_id])
    service = registration_service()
    intent = payments().retrieve_intent(str(backend.registrations().get(reg_id).chargeId))

    with dynamodb_calls() as calls:
        status, _ = service.status(reg_id)
        webhook = service.payment_succeeded(intent)
    assert (status.status, status.bib is not None, webhook) == ("CONFIRMED", True, "already")
    assert sum(calls.values()) == 0, calls  # the writer's snapshot, and the confirm call's mark
    assert api.get(f"/api/registrations/{reg_id}").json() == status.model_dump(mode="json")

    # Without the mark (Redis lost it): the hold is read once, the answer is the same, and
    # the mark is back for the next redelivery. The provider's own webhook for this payment
    # may land between the delete and the call (late on a loaded machine, it marks again, as it
    # should): then the call reads nothing, and the next delete is tried.
    reads = []
    for _ in range(5):
        shared().delete(paid_mark(intent.id))
        shared().local.clear()
        with dynamodb_calls() as calls:
            assert service.payment_succeeded(intent) == "already"
        reads.append(calls["GetItem"])
        if calls["GetItem"]:
            break
    assert reads[-1] == 1 and sum(reads) == 1, reads
    with dynamodb_calls() as calls:
        assert service.payment_succeeded(intent) == "already"
    assert sum(calls.values()) == 0, calls

    # The director cancels (in AdminApi's process): the next poll says so, from the table.
    cancelled = kim.post(f"/api/admin/races/{race_id}/registrations/{reg_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    wait_until(lambda: backend.registrations().get(reg_id).status == "CANCELLED", timeout=30)
    answer = api.get(f"/api/registrations/{reg_id}").json()
    assert answer["status"] == "CANCELLED" and "Refunded" in answer["message"], answer


def test_the_registration_and_confirm_calls_read_no_hold_and_a_lost_snapshot_reads_it_once(
    director: Any, api: requests.Session, stack: LocalStack, backend: Any, in_process_env: None
) -> None:
    """The hold the previous step wrote comes from Redis (``holds.snapshots``), on the real
    stack's Redis and DynamoDB; without it, each step reads the table once, as before; and a
    confirm after the provider's webhook queued the hold answers from the snapshot it left (QUEUED)."""
    from racecap.holds.wiring import hold_service

    kim = director("kim-hold-snapshots")
    race = kim.post("/api/admin/races", json=race_body((5,))).json()
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(race_id)
    wait_until(lambda: api.get(f"/api/races/{race_id}").json()["status"] == "OPEN", timeout=5)
    service = registration_service()
    details = RegistrationRequest.model_validate(runner(token=None))
    inventory = backend.table("Inventory")

    for case in ("snapshots", "lost", "webhook first"):
        lost = case == "lost"
        webhooks(stack, paused=case != "webhook first")  # else the provider's webhook races the confirm call
        try:
            hold_id = hold_service().hold(race_id, event_id).holdId
            if lost:
                shared().delete(f"hold:{hold_id}")
            with dynamodb_calls() as calls:
                answer = service.register(hold_id, details.model_copy(update={"email": f"{case[0]}-{details.email}"}))
            # Holds live in Inventory (the other reads are the race's questions, cached after the first)
            assert answer.status == "PAYMENT_REQUIRED" and calls[f"GetItem:{inventory}"] == int(lost), calls
            intent_id = str(backend.holds().get(hold_id).intentId)
            payments().confirm_intent(intent_id, payment_method="pm_card_visa", idempotency_key=f"b-{intent_id}")
            if lost:
                shared().delete(f"hold:{hold_id}")
            if case == "webhook first":
                queued = lambda: (shared().peek(f"hold:{hold_id}") or {}).get("status") == "QUEUED"  # noqa: B023, E731
                wait_until(queued, timeout=10)  # the webhook's process kept the hold QUEUED
            with dynamodb_calls() as calls:
                assert service.confirm(hold_id).status == "QUEUED"
            writes = 0 if case == "webhook first" else 1
            assert calls["GetItem"] == int(lost) and calls["UpdateItem"] + calls["TransactWriteItems"] == writes, calls
        finally:
            webhooks(stack, paused=False)
        wait_confirmed(api, [answer.registrationId])
