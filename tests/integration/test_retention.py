"""Personal data past the race's retention period, on the local stack: the hourly job
(RetentionPurge, invoked as EventBridge would) deletes every runner's email, date of birth
and payment references from every table, keeps names, bibs, stats and age groups, and a
second run changes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from racecap.aws.items import to_item, values

import blueprint
from local.runtime import FunctionHost

from .admin import DirectorSession
from .flows import event_ids, hold_and_register, runner, wait_confirmed, wait_for_audit
from .results import upload, wait_for_upload
from .test_own_entry import HEADER, _day, _link_token
from .test_transfers import _new_runner, _offer_token

SCHEDULED = {"version": "0", "id": "tick", "detail-type": "Scheduled Event", "source": "aws.events",
             "account": "000000000000", "time": "2026-01-01T00:00:00Z", "region": "us-east-1",
             "resources": ["arn:aws:events:us-east-1:000000000000:rule/PurgePersonalData"], "detail": {}}  # fmt: skip
DOBS = ("1971-03-04", "1982-07-19", "2001-11-30")


def _dump(backend: Any) -> dict[str, str]:
    """Every item of every table, as text: what a data-protection check would grep."""
    out = {}
    for table in blueprint.TABLES:
        items: list[Any] = []
        kwargs: dict[str, Any] = {"TableName": table.local_name}
        while True:
            page = backend.dynamodb.scan(**kwargs)
            items += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        out[table.id] = json.dumps(sorted(items, key=str), default=str)  # results chunks are binary
    return out


def _register(api: requests.Session, race_id: str, emails: list[str], dobs: tuple[str, ...]) -> list[str]:
    (event_id,) = event_ids(api, race_id)
    rids = [
        hold_and_register(api, race_id, event_id, runner(e) | {"dateOfBirth": d})[1]
        for e, d in zip(emails, dobs, strict=True)
    ]
    wait_confirmed(api, rids)
    return rids


def _ran_past_retention(backend: Any, race_id: str) -> None:
    """The race ran 46 days ago and its director keeps personal data 45 days."""
    ran = (datetime.now(UTC) - timedelta(days=46)).date().isoformat()
    backend.dynamodb.update_item(
        TableName=backend.table("Races"),
        Key=to_item({"pk": f"RACE#{race_id}", "sk": "RACE"}),
        UpdateExpression="SET raceDate = :d, retentionDays = :n",
        ExpressionAttributeValues=values({":d": ran, ":n": 45}),
    )


def _purge() -> dict[str, int]:  # in this process, as Lambda would invoke it
    return dict(FunctionHost().invoke("RetentionPurge", SCHEDULED))


@pytest.fixture
def kim(stack: Any) -> Any:
    session = DirectorSession(stack, "kim-retention")
    yield session
    session.close()


def test_the_retention_setting_is_the_directors_within_bounds(kim: Any) -> None:
    race = kim.create_race((10,))
    assert (race["retentionDays"], race["purgedAt"]) == (365, None)
    assert (
        race["personalDataDeletedOn"]
        == (datetime.fromisoformat(race["raceDate"]) + timedelta(days=365)).date().isoformat()
    )
    url = f"/api/admin/races/{race['raceId']}"
    for bad in (44, 3651, True, "90", 90.5):
        resp = kim.patch(url, json={"retentionDays": bad})
        assert resp.status_code == 400 and "retentionDays" in resp.json()["fields"], (bad, resp.text)
    assert kim.get(url).json()["version"] == race["version"]
    assert kim.patch(url, json={"retentionDays": 45}).json()["retentionDays"] == 45


def test_given_a_race_past_its_retention_then_its_personal_data_is_gone_and_what_results_publish_stays(
    api: requests.Session, backend: Any, stack: Any, kim: Any, in_process_env: None
) -> None:
    race = kim.create_race((10,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    kim.open_now(race_id)
    emails = [f"retention-{i}@example.com" for i in range(3)]
    rids = _register(api, race_id, emails, DOBS)
    kept = kim.create_race((10,))  # not due: its runner's data stays
    kim.open_now(kept["raceId"])
    _register(api, kept["raceId"], ["retention-kept@example.com"], ("1999-09-09",))
    payment_ids = [backend.registrations().get(r).chargeId for r in rids]
    # A partial refund: its provider id is in the ledger's entry, and goes with the rest.
    refunded = kim.post(f"/api/admin/races/{race_id}/registrations/{rids[1]}/refunds", json={"amountCents": 500})
    assert refunded.status_code == 201, refunded.text
    payment_ids.append(refunded.json()["refund"]["providerId"])
    stats_before = kim.get(f"/api/admin/races/{race_id}/stats").json()["totals"]

    _ran_past_retention(backend, race_id)
    counts = _purge()
    assert counts["unfinished"] == 0
    # The sweeper's reconciliation reaches back five minutes over the provider's payments: it
    # must not take a purged runner's payment (its hold deleted) for money with no place. (It
    # sees every test's payments, so the audit below checks this race's: 3 charges, 1 refunded in part.)
    FunctionHost().invoke("HoldSweeper", SCHEDULED)
    tables = _dump(backend)
    everything = "\n".join(tables.values())
    for secret in [*emails, *DOBS, *payment_ids]:
        assert secret not in everything, f"{secret} is still stored"
    assert "retention-kept@example.com" in tables["Registrations"] and "1999-09-09" in tables["Registrations"]

    # What results publish and the director's figures stay.
    view = kim.get(f"/api/admin/races/{race_id}").json()
    assert view["purgedAt"] is not None
    assert kim.get(f"/api/admin/races/{kept['raceId']}").json()["purgedAt"] is None
    assert kim.get(f"/api/admin/races/{race_id}/stats").json()["totals"] == stats_before
    rows = kim.get(f"/api/admin/races/{race_id}/registrations").json()["registrations"]
    assert sorted((r["bib"], r["firstName"], r["lastName"], r["email"], r["dateOfBirth"]) for r in rows) == [
        (1, "Ada", "Lovelace", "", ""), (2, "Ada", "Lovelace", "", ""), (3, "Ada", "Lovelace", "", ""),
    ]  # fmt: skip
    assert all(r["purgedAt"] for r in rows)
    entries = kim.get(f"/api/admin/races/{race_id}/audit").json()["entries"]
    assert entries[0]["action"] == "race.personalDataDeleted"
    cancel = kim.post(f"/api/admin/races/{race_id}/registrations/{rids[0]}/cancel", json={})
    assert cancel.status_code == 409 and "retention period is over" in cancel.json()["message"]

    # Results uploaded afterwards still place runners in age groups (the age on race day).
    csv = "bib,chip_time,status,category\n1,0:40:00,finished,F\n2,0:41:00,finished,F\n3,0:42:00,finished,F\n"
    done = wait_for_upload(kim, upload(kim, race_id, event_id, csv))
    assert done["status"] == "READY", done
    kim.post(f"/api/admin/races/{race_id}/events/{event_id}/results/publish")
    page = api.get(f"/api/races/{race_id}/events/{event_id}/results/1").json()
    ages = {r["bib"]: r["ageGroup"] for r in page["results"]}
    assert all(ages.values()) and len(ages) == 3, ages

    # The audit a director relies on is still clean; a second run finds nothing to do.
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()
    assert (report.confirmed, report.charges_succeeded, report.refunds) == (3, 3, 1), report.summary()
    before = _dump(backend)
    assert _purge() == {"races": 0, "registrations": 0, "unfinished": 0}
    after = _dump(backend)
    # (Inventory moves on by itself: the sweeper's reconciliation mark, every few seconds.)
    assert [after[t] for t in ("Races", "Registrations", "Audit")] == [
        before[t] for t in ("Races", "Registrations", "Audit")
    ]


def test_the_purge_scrubs_addresses_from_audit_entries_written_before_the_trail_kept_none(
    backend: Any, in_process_env: None
) -> None:
    table = backend.table("Audit")
    backend.dynamodb.delete_item(TableName=table, Key=values({"pk": "SCRUB", "sk": "personal-data-v1"}))
    old = {
        "pk": "RACE#race-legacy-audit", "sk": "2026-01-01T00:00:00+00:00#abc", "raceId": "race-legacy-audit",
        "entryId": "abc", "at": "2026-01-01T00:00:00+00:00", "action": "registration.cancel", "target": "reg_1",
        "actor": {"sub": "dir-9", "username": "dana", "email": "dana@example.com"},
        "details": {"email": "ann@example.com", "bib": 3, "refund": "FULL"},
    }  # fmt: skip
    backend.dynamodb.put_item(TableName=table, Item=to_item(old))
    assert _purge().get("auditEntriesScrubbed", 0) >= 1
    item = backend.dynamodb.get_item(TableName=table, Key=values({"pk": old["pk"], "sk": old["sk"]}))["Item"]
    assert "@" not in json.dumps(item)
    assert item["details"]["M"]["bib"] == {"N": "3"} and item["actor"]["M"]["username"] == {"S": "dana"}
    assert "auditEntriesScrubbed" not in _purge()  # once: the mark remembers it


def test_after_a_switch_and_a_transfer_the_purge_leaves_no_trace_of_any_runner_involved(
    api: requests.Session, backend: Any, stack: Any, kim: Any, in_process_env: None
) -> None:
    # Issue 41: a switch leaves a SWITCHED record (a copy of the entry, email and all) and its own
    # hold; a transfer replaced its first runner everywhere. Past retention, none of them stays.
    race = kim.create_race((10, 10))  # Event 0 at 30.00, Event 1 at 30.01: a switch pays nothing
    race_id, (ten, five) = race["raceId"], [e["eventId"] for e in race["events"]]
    policy = {"switchesUntil": _day(20), "transfersUntil": _day(20)}
    assert kim.patch(f"/api/admin/races/{race_id}", json={"refundPolicy": policy}).status_code == 200
    kim.open_now(race_id)
    tag = race_id[-6:].lower()
    mover, giver, taker = (f"{n}.{tag}@example.com" for n in ("mover", "giver", "taker"))
    dobs = ("1964-02-03", "1977-05-06", "1988-08-09")
    rids = [
        hold_and_register(api, race_id, ten, runner(e) | {"dateOfBirth": d})[1]
        for e, d in zip((mover, giver), dobs, strict=False)
    ]
    wait_confirmed(api, rids)
    payment_ids = [backend.registrations().get(r).chargeId for r in rids]

    moved = api.post("/api/my/registration/switch", headers={HEADER: _link_token(stack, mover)}, json={"eventId": five})
    assert (moved.status_code, moved.json()["status"]) == (200, "SWITCHED"), moved.text
    offered = api.post(
        "/api/my/registration/transfer", headers={HEADER: _link_token(stack, giver)}, json={"email": taker}
    )
    assert offered.status_code == 202, offered.text
    taken = api.post("/api/transfers/accept", json=_new_runner(_offer_token(stack, taker), dateOfBirth=dobs[2]))
    assert (taken.status_code, taken.json()["status"]) == (200, "TRANSFERRED"), taken.text
    assert mover in _dump(backend)["Registrations"]  # the SWITCHED record keeps a copy until the purge

    _ran_past_retention(backend, race_id)
    assert _purge()["unfinished"] == 0
    everything = "\n".join(_dump(backend).values())
    for secret in [mover, giver, taker, *dobs, *payment_ids]:
        assert secret not in everything, f"{secret} is still stored"
    report = wait_for_audit(stack, backend, race_id)
    assert report.ok, report.summary()


def test_the_purge_deletes_every_ballot_application_and_its_addresses_claim(
    backend: Any, kim: Any, in_process_env: None
) -> None:
    from racecap.aws.keys import ballot_claim_key

    from .test_ballot_draw import _applications

    race = kim.create_race((10,))
    race_id, event_id = race["raceId"], race["events"][0]["eventId"]
    apps = _applications(backend, race_id, event_id, [1, 2, 1], f"ret{race_id[-4:].lower()}")
    _ran_past_retention(backend, race_id)
    assert _purge()["unfinished"] == 0
    everything = "\n".join(_dump(backend).values())
    for app in apps:
        assert app.email not in everything and app.applicationId not in everything
        claim = backend.dynamodb.get_item(
            TableName=backend.table("Inventory"), Key=ballot_claim_key(race_id, app.email)
        )
        assert "Item" not in claim
