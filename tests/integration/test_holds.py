"""Holding places under a burst: never more holds than the cap."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from racecap.aws.items import to_item, values

from tests.integration.flows import concurrently, event_ids, hold

pytestmark = pytest.mark.integration

ATTEMPTS = 1500
CAP = 40


def test_given_a_small_cap_when_a_burst_of_holds_arrives_then_exactly_cap_are_held(api, backend):
    race_id = backend.create_race([CAP])
    (event_id,) = event_ids(api, race_id)

    statuses = concurrently(lambda _: hold(api, race_id, event_id).status_code, list(range(ATTEMPTS)), workers=48)

    counts = Counter(statuses)
    assert counts == {201: CAP, 409: ATTEMPTS - CAP}
    # What a director would check: the shards agree, and no shard went over its share.
    usage = backend.inventory().usage(race_id, event_id, consistent=True)
    assert (usage.cap, usage.taken) == (CAP, CAP)
    assert all(int(s["taken"]) <= int(s["cap"]) for s in usage.shards)
    # The race page may lag by its ~2 s cache, never longer: then it says sold out.
    deadline = time.monotonic() + 6
    while (event := api.get(f"/api/races/{race_id}").json()["events"][0])["status"] != "SOLD_OUT":
        assert time.monotonic() < deadline, event
        time.sleep(0.25)
    assert event["spotsLeft"] == 0


def test_sold_out_is_a_clear_409(api, backend):
    race_id = backend.create_race([1])
    (event_id,) = event_ids(api, race_id)
    assert hold(api, race_id, event_id).status_code == 201

    resp = hold(api, race_id, event_id)

    assert resp.status_code == 409
    assert resp.json()["error"] == "SOLD_OUT"


def test_given_a_released_hold_then_its_place_can_be_held_again(api, backend):
    race_id = backend.create_race([1])
    (event_id,) = event_ids(api, race_id)
    first = hold(api, race_id, event_id).json()["holdId"]
    assert hold(api, race_id, event_id).status_code == 409

    assert api.delete(f"/api/holds/{first}").status_code == 204
    assert api.delete(f"/api/holds/{first}").status_code == 204  # idempotent

    assert hold(api, race_id, event_id).status_code == 201
    assert backend.inventory().usage(race_id, event_id, consistent=True).taken == 1


def test_releasing_an_unknown_hold_is_404(api):
    resp = api.delete("/api/holds/hold_nope")

    assert resp.status_code == 404
    assert resp.json()["error"] == "HOLD_NOT_FOUND"


def test_a_race_not_yet_open_refuses_holds(api, backend):
    race_id = backend.create_race([10], open_now=False)
    (event_id,) = event_ids(api, race_id)

    resp = hold(api, race_id, event_id)

    assert resp.status_code == 409
    assert resp.json()["error"] == "REGISTRATION_CLOSED"
    assert backend.inventory().usage(race_id, event_id, consistent=True).taken == 0


def test_unknown_event_is_404(api, backend):
    race_id = backend.create_race([10])

    resp = hold(api, race_id, "evt_nope")

    assert resp.status_code == 404
    assert resp.json()["error"] == "EVENT_NOT_FOUND"


def test_given_expired_holds_when_the_sweeper_runs_then_places_return(api, backend):
    race_id = backend.create_race([3])
    (event_id,) = event_ids(api, race_id)
    held = [hold(api, race_id, event_id).json()["holdId"] for _ in range(3)]
    assert hold(api, race_id, event_id).status_code == 409
    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    for hold_id in held:  # time travel: these holds ran out a moment ago
        backend.dynamodb.update_item(
            TableName=backend.table("Inventory"),
            Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
            UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
            ExpressionAttributeValues=values({":t": past}),
        )

    # The stack runs the sweeper's schedule every few seconds in tests (schedule_scale).
    import time

    deadline = time.monotonic() + 30
    while backend.inventory().usage(race_id, event_id, consistent=True).taken and time.monotonic() < deadline:
        time.sleep(0.5)

    assert backend.inventory().usage(race_id, event_id, consistent=True).taken == 0
    assert all(
        backend.dynamodb.get_item(TableName=backend.table("Inventory"), Key=to_item({"pk": f"HOLD#{h}", "sk": "HOLD"}))[
            "Item"
        ]["status"]["S"]
        == "EXPIRED"
        for h in held
    )
