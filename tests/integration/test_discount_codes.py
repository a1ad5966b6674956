"""Discount codes on the real stack: a code's uses are a cap, raced like one; its use goes back
with an unpaid hold; the runner is charged the discounted price; every refusal is a clear error."""

from __future__ import annotations

import csv
import io
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from racecap.aws.items import from_item, to_item, values

from .admin import iso
from .flows import (
    browser_pays,
    concurrently,
    confirm,
    hold,
    intents_for,
    register,
    runner,
    wait_confirmed,
    wait_for_audit,
)

pytestmark = pytest.mark.integration

RUNNERS = 500
USES = 50


def _race(director: Any, caps: tuple[int, ...] = (10,), price: int = 3000) -> tuple[Any, str, list[str]]:
    from .admin import race_body

    body = race_body(caps)
    for e in body["events"]:
        e["priceCents"] = price
    race = director.post("/api/admin/races", json=body).json()
    director.open_now(race["raceId"])
    return race, race["raceId"], [e["eventId"] for e in race["events"]]


def _code(director: Any, race_id: str, **body: Any) -> dict[str, Any]:
    resp = director.post(f"/api/admin/races/{race_id}/codes", json=body)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def _uses_in_dynamodb(backend: Any, race_id: str, code: str) -> tuple[int, int]:
    """(taken, cap) summed over the code's shards, read straight from the table."""
    items = backend.dynamodb.query(
        TableName=backend.table("Inventory"),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues=values({":pk": f"CODE#{race_id}#{code}"}),
        ConsistentRead=True,
    )["Items"]
    rows = [from_item(i) for i in items]
    assert all(int(r["taken"]) <= int(r["cap"]) for r in rows)
    return sum(int(r["taken"]) for r in rows), sum(int(r["cap"]) for r in rows)


def test_a_burst_racing_a_50_use_code_gets_exactly_50_uses_and_a_released_one_goes_back(
    director: Any, api: Any, backend: Any, stack: Any
) -> None:
    dana = director("dana-codes")
    _, rid, (eid,) = _race(dana, (RUNNERS + 10,))
    _code(dana, rid, code="Radio50", kind="PERCENT", percent=20, maxUses=USES)
    holds = concurrently(lambda _: hold(api, rid, eid).json()["holdId"], list(range(RUNNERS)), workers=32)

    # Every runner types the code they heard on the radio, in whatever case.
    answers = concurrently(lambda h: api.put(f"/api/holds/{h}/code", json={"code": "radio50"}), holds, workers=48)

    by_status = Counter(a.status_code for a in answers)
    assert by_status == {200: USES, 409: RUNNERS - USES}, by_status
    assert {a.json()["error"] for a in answers if a.status_code == 409} == {"CODE_USED_UP"}
    winners = [h for h, a in zip(holds, answers, strict=True) if a.status_code == 200]
    assert {
        (a.json()["priceCents"], a.json()["listPriceCents"], a.json()["code"]) for a in answers if a.status_code == 200
    } == {(2400, 3000, "RADIO50")}
    assert _uses_in_dynamodb(backend, rid, "RADIO50") == (USES, USES)
    (listed,) = dana.get(f"/api/admin/races/{rid}/codes").json()["codes"]
    assert (listed["code"], listed["uses"], listed["maxUses"]) == ("RADIO50", USES, USES)

    # A winner gives the place back: the use returns, and one more runner gets the code.
    assert api.delete(f"/api/holds/{winners[0]}").status_code == 204
    assert _uses_in_dynamodb(backend, rid, "RADIO50") == (USES - 1, USES)
    loser = next(h for h, a in zip(holds, answers, strict=True) if a.status_code == 409)
    again = api.put(f"/api/holds/{loser}/code", json={"code": "RADIO50"})
    assert again.status_code == 200, again.text
    # Removing a code gives its use back too, and the price is the held one again.
    removed = api.delete(f"/api/holds/{winners[1]}/code")
    assert (removed.status_code, removed.json()["priceCents"], removed.json()["code"]) == (200, 3000, None)
    assert _uses_in_dynamodb(backend, rid, "RADIO50")[0] == USES - 1

    # A winner pays the discounted price: the PaymentIntent's amount, read at the provider.
    paid = register(api, winners[2], runner())
    assert paid.status_code == 202, paid.text
    (intent,) = intents_for(stack, hold_id=winners[2])
    assert (intent["amount"], intent["status"]) == (2400, "succeeded")
    # Once the details are sent, the code is fixed with the payment.
    late = api.delete(f"/api/holds/{winners[2]}/code")
    assert (late.status_code, late.json()["error"]) == (409, "CODE_TOO_LATE")
    # What a director checks afterwards: the audit counts the code's uses against its limit
    # and the registrations carrying it (the rest are holds not paid yet).
    report = wait_for_audit(stack, backend, rid)
    assert report.code_uses["RADIO50"] == {"taken": USES - 1, "registrations": 1, "limit": USES}
    export = dana.get(f"/api/admin/races/{rid}/registrations/export").text.splitlines()
    header, (row,) = export[0].split(","), export[1:]
    assert row.split(",")[header.index("code")] == "RADIO50"
    assert row.split(",")[header.index("discount")] == "6.00"


def test_an_expired_unpaid_hold_gives_its_code_use_back(director: Any, api: Any, backend: Any) -> None:
    kim = director("kim-codes")
    _, rid, (eid,) = _race(kim)
    _code(kim, rid, code="ONCE", kind="AMOUNT", amountCents=500, maxUses=1)
    first = hold(api, rid, eid).json()["holdId"]
    assert api.put(f"/api/holds/{first}/code", json={"code": "once"}).status_code == 200
    second = hold(api, rid, eid).json()["holdId"]
    assert api.put(f"/api/holds/{second}/code", json={"code": "ONCE"}).json()["error"] == "CODE_USED_UP"

    past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    backend.dynamodb.update_item(  # time travel: the first hold ran out a moment ago
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{first}", "sk": "HOLD"}),
        UpdateExpression="SET expiresAt = :t, gsi1sk = :t",
        ExpressionAttributeValues=values({":t": past}),
    )
    deadline = time.monotonic() + 30  # the sweeper runs every few seconds in tests
    while _uses_in_dynamodb(backend, rid, "ONCE")[0] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _uses_in_dynamodb(backend, rid, "ONCE") == (0, 1)
    answer = api.put(f"/api/holds/{second}/code", json={"code": "ONCE"})
    assert (answer.status_code, answer.json()["priceCents"]) == (200, 2500)


def test_each_refusal_is_a_clear_error_and_changes_nothing(director: Any, api: Any, backend: Any) -> None:
    lee = director("lee-codes")
    _, rid, (e1, e2) = _race(lee, (10, 10))
    now = datetime.now(UTC)
    _code(lee, rid, code="LATER", kind="PERCENT", percent=10, validFrom=iso(now + timedelta(days=1)))
    _code(
        lee,
        rid,
        code="GONE",
        kind="PERCENT",
        percent=10,
        validTo=iso(now - timedelta(minutes=1)),
        validFrom=iso(now - timedelta(days=1)),
    )
    _code(lee, rid, code="FIRSTONLY", kind="PERCENT", percent=10, eventIds=[e1])
    _code(lee, rid, code="TOOMUCH", kind="AMOUNT", amountCents=2990)  # would leave 0.10 EUR
    h = hold(api, rid, e2).json()["holdId"]

    for typed, status, error in [
        ("NOSUCH", 404, "CODE_UNKNOWN"),
        ("later", 409, "CODE_NOT_YET_VALID"),
        ("gone", 409, "CODE_EXPIRED"),
        ("firstonly", 409, "CODE_NOT_FOR_EVENT"),
        ("toomuch", 400, "CODE_INVALID"),
    ]:
        resp = api.put(f"/api/holds/{h}/code", json={"code": typed})
        assert (resp.status_code, resp.json()["error"]) == (status, error), (typed, resp.text)
        assert resp.json()["fields"]["code"]
    view = api.get(f"/api/holds/{h}").json()
    assert (view["priceCents"], view["code"]) == (3000, None)
    assert {c["code"]: c["uses"] for c in lee.get(f"/api/admin/races/{rid}/codes").json()["codes"]} == {
        "FIRSTONLY": 0,
        "GONE": 0,
        "LATER": 0,
        "TOOMUCH": 0,
    }
    assert api.put(f"/api/holds/{h}/code", json={"code": ""}).status_code == 400
    assert api.put("/api/holds/hold_nope/code", json={"code": "LATER"}).json()["error"] == "HOLD_NOT_FOUND"


def test_directors_make_codes_one_or_a_sponsors_batch_and_only_for_their_races(
    director: Any, api: Any, stack: Any
) -> None:
    ann, bob = director("ann-codes"), director("bob-codes")
    _, rid, (eid,) = _race(ann)
    _code(ann, rid, code="club-10", kind="AMOUNT", amountCents=1000, maxUses=10)
    dup = ann.post(f"/api/admin/races/{rid}/codes", json={"code": "CLUB-10", "kind": "PERCENT", "percent": 5})
    assert (dup.status_code, dup.json()["error"]) == (409, "CODE_EXISTS")
    for bad in (
        {"code": "X", "kind": "PERCENT", "percent": 5},  # too short
        {"code": "HALF", "kind": "PERCENT", "percent": 150},
        {"code": "HALF", "kind": "PERCENT", "amountCents": 100},  # the kind's amount missing
        {"code": "HALF", "kind": "PERCENT", "percent": True},
        {"code": "HALF", "kind": "PERCENT", "percent": 5, "eventIds": ["evt_nope"]},
    ):
        resp = ann.post(f"/api/admin/races/{rid}/codes", json=bad)
        assert resp.status_code == 400, (bad, resp.text)
    assert bob.get(f"/api/admin/races/{rid}/codes").status_code == 404
    assert (
        bob.post(f"/api/admin/races/{rid}/codes", json={"code": "BOBS", "kind": "PERCENT", "percent": 5}).status_code
        == 404
    )

    batch = ann.post(
        f"/api/admin/races/{rid}/codes/bulk", json={"count": 5, "prefix": "acme", "kind": "PERCENT", "percent": 100}
    )
    assert batch.status_code == 201, batch.text
    assert batch.headers["Content-Type"].startswith("text/csv")
    codes = [row["code"] for row in csv.DictReader(io.StringIO(batch.text))]
    assert len(set(codes)) == 5 and all(c.startswith("ACME-") for c in codes)
    listed = {c["code"]: c for c in ann.get(f"/api/admin/races/{rid}/codes").json()["codes"]}
    assert {listed[c]["maxUses"] for c in codes} == {1}
    # Single use: a second runner with the same sponsor code is refused.
    first, second = (hold(api, rid, eid).json()["holdId"] for _ in range(2))
    assert api.put(f"/api/holds/{first}/code", json={"code": codes[0].lower()}).json()["priceCents"] == 0
    assert api.put(f"/api/holds/{second}/code", json={"code": codes[0]}).json()["error"] == "CODE_USED_UP"
    # A code that takes the whole price makes a free entry: queued at once, no PaymentIntent.
    free = register(api, first, runner(token=None))
    assert (free.status_code, free.json()["status"]) == (202, "QUEUED"), free.text
    assert intents_for(stack, hold_id=first) == []
    trail = [e["action"] for e in ann.get(f"/api/admin/races/{rid}/audit").json()["entries"]]
    assert {"code.create", "code.bulk"} <= set(trail)


def _card_step(api: Any, rid: str, eid: str) -> tuple[str, str]:
    """A hold at the card step: the details sent without a card, its one intent created."""
    hold_id = hold(api, rid, eid).json()["holdId"]
    started = register(api, hold_id, runner(token=None))
    assert started.status_code == 200 and started.json()["status"] == "PAYMENT_REQUIRED", started.text
    assert started.json()["amountCents"] == 3000
    return hold_id, started.json()["registrationId"]


def test_a_code_applied_after_the_card_step_changes_the_one_intent_and_the_charge(
    director: Any, api: Any, backend: Any, stack: Any
) -> None:
    lee = director("lee-codes-card")
    _, rid, (eid,) = _race(lee)
    _code(lee, rid, code="CARD20", kind="PERCENT", percent=20, maxUses=5)
    hold_id, reg_id = _card_step(api, rid, eid)

    applied = api.put(f"/api/holds/{hold_id}/code", json={"code": "card20"})
    assert applied.status_code == 200, applied.text
    assert (applied.json()["status"], applied.json()["priceCents"], applied.json()["code"]) == (
        "PAYING",
        2400,
        "CARD20",
    )
    # The card step (any tab) shows the new amount, on the same intent.
    step = api.post(f"/api/holds/{hold_id}/payment")
    assert (step.status_code, step.json()["amountCents"]) == (200, 2400), step.text
    (intent,) = intents_for(stack, hold_id=hold_id)  # one PaymentIntent for the hold, at the stand-in
    assert intent["amount"] == 2400
    assert _uses_in_dynamodb(backend, rid, "CARD20") == (1, 5)

    assert browser_pays(stack, intent["id"])["status"] == "succeeded"
    assert confirm(api, hold_id).status_code == 202
    wait_confirmed(api, [reg_id])
    (paid,) = intents_for(stack, hold_id=hold_id)
    assert (paid["id"], paid["amount"], paid["amount_received"]) == (intent["id"], 2400, 2400)
    # Too late now: the payment fixed the code.
    late = api.delete(f"/api/holds/{hold_id}/code")
    assert (late.status_code, late.json()["error"]) == (409, "CODE_TOO_LATE")
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (1, 1, 0)  # no orphan refund
    assert report.code_uses["CARD20"] == {"taken": 1, "registrations": 1, "limit": 5}
    stats = lee.get(f"/api/admin/races/{rid}/stats").json()
    assert stats["codes"] == [{"code": "CARD20", "used": 1, "limit": 5}]
    export = lee.get(f"/api/admin/races/{rid}/registrations/export").text.splitlines()
    header, (row,) = export[0].split(","), export[1:]
    assert (row.split(",")[header.index("code")], row.split(",")[header.index("discount")]) == ("CARD20", "6.00")


def test_a_code_removed_after_the_card_step_puts_the_intent_back_to_the_held_price(
    director: Any, api: Any, backend: Any, stack: Any
) -> None:
    max_ = director("max-codes-card")
    _, rid, (eid,) = _race(max_)
    _code(max_, rid, code="OFF5", kind="AMOUNT", amountCents=500, maxUses=3)
    _code(max_, rid, code="FREEBIE", kind="PERCENT", percent=100)
    hold_id, reg_id = _card_step(api, rid, eid)
    assert api.put(f"/api/holds/{hold_id}/code", json={"code": "OFF5"}).json()["priceCents"] == 2500
    # A code that would make the paying place free is refused, and changes nothing.
    free = api.put(f"/api/holds/{hold_id}/code", json={"code": "FREEBIE"})
    assert (free.status_code, free.json()["error"]) == (409, "CODE_TOO_LATE")
    removed = api.delete(f"/api/holds/{hold_id}/code")
    assert removed.status_code == 200, removed.text
    assert (removed.json()["priceCents"], removed.json()["code"]) == (3000, None)
    (intent,) = intents_for(stack, hold_id=hold_id)
    assert intent["amount"] == 3000
    assert _uses_in_dynamodb(backend, rid, "OFF5")[0] == 0
    assert _uses_in_dynamodb(backend, rid, "FREEBIE")[0] == 0

    assert browser_pays(stack, intent["id"])["status"] == "succeeded"
    assert confirm(api, hold_id).status_code == 202
    wait_confirmed(api, [reg_id])
    (paid,) = intents_for(stack, hold_id=hold_id)
    assert (paid["amount"], paid["amount_received"]) == (3000, 3000)
    # Paid: a code now is refused, its use not taken.
    late = api.put(f"/api/holds/{hold_id}/code", json={"code": "OFF5"})
    assert (late.status_code, late.json()["error"]) == (409, "CODE_TOO_LATE")
    assert _uses_in_dynamodb(backend, rid, "OFF5")[0] == 0
    report = wait_for_audit(stack, backend, rid)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (1, 1, 0)


def _stats_codes(director: Any, race_id: str, want: dict[str, int] | None = None) -> dict[str, tuple[int, Any]]:
    """The stats' code uses, {code: (used, limit)}; with ``want``, read until they are that
    (the stats are cached for two seconds)."""
    deadline = time.monotonic() + 10
    while True:
        codes = director.get(f"/api/admin/races/{race_id}/stats").json()["codes"]
        got = {c["code"]: (c["used"], c["limit"]) for c in codes}
        if want is None or all(got.get(c, (None,))[0] == n for c, n in want.items()) or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_the_stats_read_code_uses_from_a_copy_kept_as_uses_move_not_from_every_codes_shards(
    director: Any, api: Any, backend: Any
) -> None:
    ivy = director("ivy-codes")
    _, rid, (eid,) = _race(ivy, (20,))
    _code(ivy, rid, code="CLUB", kind="PERCENT", percent=10, maxUses=5)
    _code(ivy, rid, code="OPEN", kind="PERCENT", percent=5)
    sponsor = ivy.post(
        f"/api/admin/races/{rid}/codes/bulk", json={"count": 300, "prefix": "ACME", "kind": "PERCENT", "percent": 50}
    )
    assert sponsor.status_code == 201, sponsor.text
    assert len(_stats_codes(ivy, rid)) == 302  # the first read builds the copy from the shards
    copy = f"codeuses:{rid}"
    assert backend.redis.hget(copy, "l:CLUB") == "5" and backend.redis.hget(copy, "l:OPEN") == ""
    assert 0 < backend.redis.ttl(copy) <= 600  # built again from the shards within ten minutes

    # Uses move the copy as they happen: applied, replaced, given back with the place.
    a, b = (hold(api, rid, eid).json()["holdId"] for _ in range(2))
    assert api.put(f"/api/holds/{a}/code", json={"code": "club"}).status_code == 200
    assert api.put(f"/api/holds/{b}/code", json={"code": "club"}).status_code == 200
    assert _stats_codes(ivy, rid, {"CLUB": 2})["CLUB"] == (2, 5)
    assert api.put(f"/api/holds/{b}/code", json={"code": "open"}).status_code == 200
    assert api.delete(f"/api/holds/{a}").status_code == 204
    moved = _stats_codes(ivy, rid, {"CLUB": 0, "OPEN": 1})
    assert (moved["CLUB"], moved["OPEN"]) == ((0, 5), (1, None))
    assert _uses_in_dynamodb(backend, rid, "CLUB")[0] == 0 and _uses_in_dynamodb(backend, rid, "OPEN")[0] == 1

    # The stats read the copy, not the shards: a shard changed behind the service's back is
    # not seen until the copy is built again (here: dropped, as its expiry would).
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"CODE#{rid}#CLUB", "sk": "SHARD#000"}),
        UpdateExpression="SET taken = :n",
        ExpressionAttributeValues=values({":n": 3}),
    )
    time.sleep(2.5)  # past the stats' own cache
    assert _stats_codes(ivy, rid)["CLUB"] == (0, 5)
    backend.redis.delete(copy)
    assert _stats_codes(ivy, rid, {"CLUB": 3, "OPEN": 1})["CLUB"] == (3, 5)

    # A new code drops the copy: the next read builds it with the code.
    _code(ivy, rid, code="LATE", kind="AMOUNT", amountCents=100, maxUses=2)
    assert _stats_codes(ivy, rid, {"LATE": 0})["LATE"] == (0, 2)
    assert len(_stats_codes(ivy, rid)) == 303

    # Put back what the test changed behind the service's back (audits read the shards).
    backend.dynamodb.update_item(
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"CODE#{rid}#CLUB", "sk": "SHARD#000"}),
        UpdateExpression="SET taken = :n",
        ExpressionAttributeValues=values({":n": 0}),
    )
    backend.redis.delete(copy)


def test_a_hold_the_writer_confirmed_before_the_apis_mark_is_counted_queued_once(
    director: Any, api: Any, backend: Any
) -> None:
    """The message goes to the writer before the hold is marked QUEUED; a fast writer confirms it
    first (the mark's condition then fails). The queueing still counts, once: a stamp on the
    confirmed hold that only the first path to get there writes (the opening's pulse)."""
    from racecap.holds.models import HoldPhase
    from racecap.registration.attempts import DynamoAttempts

    rat = director("rat-queued")
    _, rid, (eid,) = _race(rat)
    hold_id, _ = _card_step(api, rid, eid)
    backend.dynamodb.update_item(  # the writer, faster than the API's own mark
        TableName=backend.table("Inventory"),
        Key=to_item({"pk": f"HOLD#{hold_id}", "sk": "HOLD"}),
        UpdateExpression="SET #s = :c",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues=values({":c": HoldPhase.CONFIRMED}),
    )
    attempts = DynamoAttempts(backend.dynamodb, backend.table("Inventory"))
    hold = attempts.get(hold_id)
    assert hold is not None and hold.attempt is not None and hold.status == HoldPhase.CONFIRMED
    now = datetime.now(UTC)
    assert attempts.mark_queued(hold, hold.attempt, "pi_fast", now, now) is True  # this send queued it
    assert attempts.mark_queued(hold, hold.attempt, "pi_fast", now, now) is False  # the webhook's, later
    stamped = attempts.get(hold_id)
    assert stamped is not None and stamped.status == HoldPhase.CONFIRMED
