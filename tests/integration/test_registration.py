"""Registering and paying: one email per race, one charge per registration, nothing lost."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from racecap.aws.items import to_item, values

from tests.integration.flows import (
    browser_pays,
    concurrently,
    event_ids,
    hold,
    intents_for,
    register,
    runner,
    wait_confirmed,
    wait_for_audit,
    webhooks,
)

pytestmark = pytest.mark.integration


def charges_for(stack, registration_id: str) -> list[dict]:
    """The payments the provider holds for a registration (its intents; succeeded = charged)."""
    return intents_for(stack, hold_id="hold_" + registration_id.removeprefix("reg_"))


def test_given_a_hold_when_the_runner_pays_then_the_registration_is_confirmed_with_a_bib(api, backend, stack):
    race_id = backend.create_race([10])
    (event_id,) = event_ids(api, race_id)

    accepted = register(api, hold(api, race_id, event_id).json()["holdId"], runner())
    assert accepted.status_code == 202, accepted.text
    # The queued answer says when to check first: the writer's pace, a second or two here.
    assert 1 <= int(accepted.headers["Retry-After"]) <= 3, accepted.headers
    rid = accepted.json()["registrationId"]
    first = api.get(f"/api/registrations/{rid}")
    confirmed = wait_confirmed(api, [rid])[rid]

    assert first.status_code == 200
    assert first.json()["status"] in ("QUEUED", "CONFIRMED")
    if first.json()["status"] == "QUEUED":
        # The writer's pace, not the paper's fixed 10 s: it confirms in about a second here.
        assert 1 <= int(first.headers["Retry-After"]) <= 3, first.headers
    assert confirmed["bib"] == 1
    assert confirmed["firstName"] == "Ada"
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.emails_sent) == (1, 1, 1)


def test_given_one_email_when_runners_race_to_register_it_then_one_wins(api, backend, stack):
    race_id = backend.create_race([30])
    (event_id,) = event_ids(api, race_id)
    holds = [hold(api, race_id, event_id).json()["holdId"] for _ in range(20)]
    # The same email, as people type it: other case, stray spaces.
    spellings = ["Same.Runner@Example.com", " same.runner@example.com ", "SAME.RUNNER@EXAMPLE.COM"]

    results = concurrently(
        lambda i: register(api, holds[i], runner(spellings[i % 3])), list(range(len(holds))), workers=20
    )

    codes = Counter(r.status_code for r in results)
    assert codes == {202: 1, 409: 19}
    errors = [r.json() for r in results if r.status_code == 409]
    assert {e["error"] for e in errors} == {"EMAIL_ALREADY_REGISTERED"}, errors
    winner = next(r.json()["registrationId"] for r in results if r.status_code == 202)
    wait_confirmed(api, [winner])
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert report.confirmed == 1
    # The losers keep their places held: they can register with their own email.
    loser = next(h for h, r in zip(holds, results, strict=True) if r.status_code == 409)
    assert register(api, loser, runner()).status_code == 202


def test_given_retries_and_duplicates_then_one_charge_and_one_registration(api, backend, stack):
    race_id = backend.create_race([5])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    body = runner()

    # A double click, a retry storm after a lost response, then a late repeat.
    burst = concurrently(lambda _: register(api, hold_id, body), list(range(12)), workers=12)
    late = register(api, hold_id, body)

    ok = [r for r in [*burst, late] if r.status_code == 202]
    assert ok, [r.text for r in burst]
    assert {r.json()["registrationId"] for r in ok} == {ok[0].json()["registrationId"]}
    assert all(r.status_code in (202, 409) for r in burst)  # 409 = "already being processed"
    rid = ok[0].json()["registrationId"]
    wait_confirmed(api, [rid])
    # The same call, later still: the same registration (the first answer, replayed).
    assert register(api, hold_id, body).json()["registrationId"] == rid
    succeeded = [c for c in charges_for(stack, rid) if c["status"] == "succeeded"]
    assert len(succeeded) == 1
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert report.confirmed == 1


def test_given_a_declined_card_then_the_place_stays_held_and_another_card_works(api, backend):
    race_id = backend.create_race([1])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    body = runner(token="pm_card_chargeDeclined")

    declined = register(api, hold_id, body)
    again = register(api, hold_id, {**body, "paymentMethod": "pm_card_visa"})

    assert declined.status_code == 402
    assert declined.json()["error"] == "PAYMENT_DECLINED"
    assert again.status_code == 202
    wait_confirmed(api, [again.json()["registrationId"]])


def test_given_an_expired_hold_then_registering_is_410_and_nothing_is_charged(api, backend, stack):
    race_id = backend.create_race([2])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
        UpdateExpression="SET expiresAt = :t",
        ExpressionAttributeValues=values({":t": (datetime.now(UTC) - timedelta(seconds=5)).isoformat()}),
    )

    resp = register(api, hold_id, runner())

    assert resp.status_code == 410
    assert resp.json()["error"] == "HOLD_EXPIRED"
    # The hold's snapshot still said HELD (only the table's expiry was moved), so an intent was
    # created before the begin found the hold expired: recorded on no hold, never handed out.
    assert [c["status"] for c in charges_for(stack, "reg_" + hold_id.removeprefix("hold_"))] in (
        [],
        ["requires_payment_method"],
    )


def test_given_a_paid_runner_who_never_came_back_then_the_sweeper_confirms_them(api, backend, stack):
    """Paid in the browser, tab closed, webhooks not arriving: at expiry the sweeper finds the
    intent succeeded and registers the runner instead of freeing the place. The late webhook
    then changes nothing: no second registration, no refund."""
    race_id = backend.create_race([3])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    details = register(api, hold_id, runner("lost@example.com", token=None))
    assert details.status_code == 200, details.text
    rid = details.json()["registrationId"]
    webhooks(stack, paused=True)
    try:
        (intent,) = intents_for(stack, hold_id=hold_id)
        assert browser_pays(stack, intent["id"])["status"] == "succeeded"
        long_ago = (datetime.now(UTC) - timedelta(minutes=15)).isoformat()
        backend.dynamodb.update_item(  # ...and the hold ran out while nobody was looking
            TableName=backend.table("Inventory"),
            Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
            UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
            ExpressionAttributeValues=values({":t": long_ago}),
        )
        confirmed = wait_confirmed(api, [rid], timeout=60)[rid]
    finally:
        webhooks(stack, paused=False)
    assert confirmed["firstName"] == "Ada"
    assert backend.holds().get(hold_id).status in ("QUEUED", "CONFIRMED")
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (1, 1, 0)


def test_given_a_paid_registration_whose_message_was_lost_then_the_sweeper_sends_it_again(api, backend, stack):
    """Paid and marked QUEUED, but the queue lost the message (the hold as ``mark_queued``
    leaves it, with no message behind it): reconciliation sees the payment and a QUEUED hold
    and, rightly, does nothing; only the sweeper's re-send at ``requeueAt`` can confirm it,
    once, with the next bib."""
    race_id = backend.create_race([3])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    details = register(api, hold_id, runner("lost-message@example.com", token=None))
    assert details.status_code == 200, details.text
    rid = details.json()["registrationId"]
    webhooks(stack, paused=True)
    try:
        (intent,) = intents_for(stack, hold_id=hold_id)
        assert browser_pays(stack, intent["id"])["status"] == "succeeded"
        queued_at = datetime.now(UTC) - timedelta(minutes=10)
        due = (queued_at + timedelta(minutes=5)).isoformat()
        backend.dynamodb.update_item(
            TableName=backend.table("Inventory"),
            Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
            UpdateExpression="SET #s = :queued, chargeId = :pi, queuedAt = :q, requeueAt = :due, gsi1sk = :due",
            ConditionExpression="#s = :paying",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=values(
                {
                    ":queued": "QUEUED",
                    ":paying": "PAYING",
                    ":pi": intent["id"],
                    ":q": queued_at.isoformat(),
                    ":due": due,
                }
            ),
        )
        confirmed = wait_confirmed(api, [rid], timeout=60)[rid]
    finally:
        webhooks(stack, paused=False)
    assert confirmed["bib"] == 1
    found = backend.holds().get(hold_id)
    assert found.status == "CONFIRMED" and found.requeues == 1
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (1, 1, 0)


def test_given_an_oversubscribed_opening_then_every_runner_with_a_place_is_confirmed_once(api, backend, stack):
    """120 runners for 30 places, all at once, each holding then paying: the director's audit."""
    race_id = backend.create_race([30])
    (event_id,) = event_ids(api, race_id)

    def runner_flow(i: int) -> str | None:
        h = hold(api, race_id, event_id)
        if h.status_code == 409:
            assert h.json()["error"] == "SOLD_OUT"
            return None
        assert h.status_code == 201, h.text
        r = register(api, h.json()["holdId"], runner(f"burst-{i}@example.com"))
        assert r.status_code == 202, r.text
        return r.json()["registrationId"]

    registered = [rid for rid in concurrently(runner_flow, list(range(120)), workers=40) if rid]

    assert len(registered) == 30
    confirmed = wait_confirmed(api, registered, timeout=90)
    assert sorted(c["bib"] for c in confirmed.values()) == list(range(1, 31))
    report = wait_for_audit(stack, backend, race_id, timeout=120)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.emails_sent) == (30, 30, 30)


def test_the_waiting_screen_asks_again_in_a_second_then_past_its_estimate_backs_off_20_40_60(api, backend):
    # A paid registration still on the queue, at each age the paper's waiting screen
    # distinguishes: the hold is put in the state the writer has not yet moved on from.
    # The writer is idle and has measured nothing lately (its tally is cleared, and the
    # environments' one-second copies of the backlog are let expire).
    for key in backend.redis.scan_iter("rc:writer:*"):
        backend.redis.delete(key)
    time.sleep(1.2)
    race_id = backend.create_race([3])
    (event_id,) = event_ids(api, race_id)
    hold_id = hold(api, race_id, event_id).json()["holdId"]
    registration_id = "reg_" + hold_id.removeprefix("hold_")
    table = backend.table("Inventory")
    seen = {}
    # Ages just past each step's start: while the request travels they only grow, and each
    # has many seconds before the next step (a loaded machine must not change the answer).
    for queued_for_s in (0, 11, 31, 71, 3600):
        now = datetime.now(UTC)
        backend.dynamodb.update_item(
            TableName=table,
            Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
            UpdateExpression="SET #s = :q, registrationId = :rid, attempt = :a, queuedAt = :t REMOVE gsi1pk, gsi1sk",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=values(
                {
                    ":q": "QUEUED",
                    ":rid": registration_id,
                    ":a": {
                        "key": "k",
                        "email": "queued@example.com",
                        "firstName": "Q",
                        "lastName": "Q",
                        "dateOfBirth": "1990-01-01",
                        "amountCents": 2500,
                        "currency": "USD",
                        "startedAt": (now - timedelta(seconds=queued_for_s)).isoformat(),
                    },
                    ":t": (now - timedelta(seconds=queued_for_s)).isoformat(),
                }
            ),
        )
        resp = api.get(f"/api/registrations/{registration_id}")
        assert resp.status_code == 200, resp.text
        assert resp.json()["status"] == "QUEUED"
        seen[queued_for_s] = int(resp.headers["Retry-After"])
    assert seen == {0: 1, 11: 20, 31: 40, 71: 60, 3600: 60}
