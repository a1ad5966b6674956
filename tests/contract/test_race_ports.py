"""The directors' stores' contract: races and events, cap shards, the registration window
and the audit trail — the same cases against the in-memory fakes and the DynamoDB adapters
on DynamoDB Local, so the fakes the admin and window unit tests use cannot drift."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from racecap.audit.models import AuditEntry
from racecap.aws.transactions import ConditionFailed
from racecap.errors import Conflict
from racecap.holds.models import Hold, HoldPhase
from racecap.models import Director
from racecap.places.models import ShardChange
from racecap.races.models import Event, Race
from racecap.window.models import WindowRecord

from tests.contract.stores_under_test import StoresUnderTest

NOW = datetime.now(UTC).replace(microsecond=0)
DIRECTOR = Director(sub="dir-c", username="cora")


@pytest.fixture
def race_id() -> str:
    return f"race-{uuid.uuid4().hex[:10]}"


def _race(race_id: str, **over: object) -> Race:
    fields: dict[str, object] = {
        "raceId": race_id,
        "ownerId": f"owner-{race_id}",
        "name": "Harbour Run",
        "raceDate": "2027-05-01",
        "registrationOpensAt": NOW,
        "registrationClosesAt": NOW + timedelta(days=3),
    }
    return Race.model_validate(fields | over)


def _events(race_id: str, *caps: int) -> list[Event]:
    # Stored out of order on purpose: reads come back in the director's order.
    return [
        Event(raceId=race_id, eventId=f"ev{9 - i}", name=f"E{i}", cap=cap, priceCents=100 * (i + 1), position=i)
        for i, cap in enumerate(caps)
    ]


def _created(s: StoresUnderTest, race_id: str, *caps: int, **over: object) -> tuple[Race, list[Event]]:
    race, events = _race(race_id, **over), _events(race_id, *caps)
    s.races.create(race, events)
    found = s.races.get_race(race_id)
    assert found is not None
    return found


def _listed(s: StoresUnderTest, race_id: str) -> list[Race]:
    return [r for r in s.races.list_published() if r.raceId == race_id]


# -- races ------------------------------------------------------------------------------------------
def test_a_created_race_reads_back_with_its_events_in_order(stores, race_id):
    assert stores.races.get_race(race_id) is None
    assert stores.races.race_version(race_id) == 0
    before = stores.races.listing_version()
    race, events = _created(stores, race_id, 10, 20, 30)
    assert race == _race(race_id)
    assert [e.eventId for e in events] == ["ev9", "ev8", "ev7"]
    assert events == _events(race_id, 10, 20, 30)
    assert stores.races.race_version(race_id) == 1
    assert stores.races.listing_version() == before + 1
    assert _listed(stores, race_id) == [race]


def test_a_race_id_is_created_once(stores, race_id):
    _created(stores, race_id, 5)
    before = stores.races.listing_version()
    with pytest.raises(Conflict):
        stores.races.create(_race(race_id, name="Other"), _events(race_id, 1))
    found = stores.races.get_race(race_id)
    assert found is not None and found[0].name == "Harbour Run" and found[1][0].cap == 5
    assert stores.races.listing_version() == before


@pytest.mark.parametrize("listing", ["UNLISTED", "DRAFT"])
def test_a_race_not_listed_is_not_on_the_list(stores, race_id, listing):
    _created(stores, race_id, 5, listing=listing)
    assert _listed(stores, race_id) == []


def test_a_failed_extra_item_stops_the_creation(stores, race_id):
    other = f"{race_id}-x"
    _created(stores, other, 5)
    with pytest.raises(ConditionFailed):
        stores.races.create(_race(race_id), _events(race_id, 5), [stores.races.put_event_item(_events(other, 5)[0])])
    assert stores.races.get_race(race_id) is None


def test_an_update_bumps_the_version_and_keeps_the_listing_in_step(stores, race_id):
    race, _ = _created(stores, race_id, 5)
    before = stores.races.listing_version()
    updated = stores.races.apply_update(race, {"name": "New name", "raceDate": "2027-06-01"})
    assert (updated.name, updated.version) == ("New name", 2)
    found = stores.races.get_race(race_id)
    assert found is not None and found[0] == updated
    assert stores.races.listing_version() == before + 1
    assert _listed(stores, race_id) == [updated]  # moved to its new date, listed once
    hidden = stores.races.apply_update(updated, {"listing": "UNLISTED"})
    assert _listed(stores, race_id) == []
    shown = stores.races.apply_update(hidden, {"listing": "LISTED", "registrationState": "OPEN"})
    assert _listed(stores, race_id) == [shown] and shown.version == 4


def test_an_update_of_a_stale_copy_is_a_conflict_and_changes_nothing(stores, race_id):
    race, _ = _created(stores, race_id, 5)
    stores.races.apply_update(race, {"name": "First"})
    with pytest.raises(Conflict):
        stores.races.apply_update(race, {"name": "Second"})
    with pytest.raises(Conflict):
        stores.races.update_race(race_id, {"name": "Third"}, expected_version=1)
    with pytest.raises(KeyError):
        stores.races.update_race(f"{race_id}-none", {"name": "Nobody"})
    assert stores.races.update_race(race_id, {"name": "Fourth"}, expected_version=2).version == 3
    found = stores.races.get_race(race_id)
    assert found is not None and (found[0].name, found[0].version) == ("Fourth", 3)


def test_a_failed_extra_item_stops_an_update(stores, race_id):
    race, events = _created(stores, race_id, 5)
    with pytest.raises(Conflict):
        stores.races.apply_update(race, {"name": "Never"}, [stores.races.put_event_item(events[0])])
    found = stores.races.get_race(race_id)
    assert found is not None and found[0] == race


def test_a_directors_races_come_newest_first(stores, race_id):
    owner = f"owner-{race_id}"
    for n in range(3):
        _created(stores, f"{race_id}-{n}", 5, ownerId=owner)
    assert [r.raceId for r in stores.races.list_by_owner(owner)] == [f"{race_id}-{n}" for n in (2, 1, 0)]
    assert stores.races.list_by_owner(f"{owner}-nobody") == []


def test_event_items_add_and_change_events_under_their_conditions(stores, race_id):
    race, (event,) = _created(stores, race_id, 5)
    added = Event(raceId=race_id, eventId="ev-new", name="5K", cap=3, priceCents=900, position=1)
    stores.transact([stores.races.put_event_item(added), stores.races.version_item(race)])
    with pytest.raises(ConditionFailed) as failed:
        stores.transact([stores.races.version_item(race), stores.races.put_event_item(added)])
    assert failed.value.indexes == [0, 1]
    stores.transact([stores.races.update_event_item(event, {"cap": 8, "name": "Long"})])
    with pytest.raises(ConditionFailed):  # the cap moved since ``event`` was read
        stores.transact([stores.races.update_event_item(event, {"priceCents": 1})])
    gone = event.model_copy(update={"eventId": "ev-none"})
    with pytest.raises(ConditionFailed):
        stores.transact([stores.races.update_event_item(gone, {"name": "x"})])
    found = stores.races.get_race(race_id)
    assert found is not None
    again, events = found
    assert again.version == 2
    assert [(e.eventId, e.name, e.cap, e.priceCents) for e in events] == [
        ("ev9", "Long", 8, 100),
        ("ev-new", "5K", 3, 900),
    ]


# -- cap shards -------------------------------------------------------------------------------------
def _claim(s: StoresUnderTest, race_id: str, event_id: str, shards: list[str]) -> Hold | None:
    token = uuid.uuid4().hex
    hold = Hold(
        holdId=f"hold_{token}",
        registrationId=f"reg_{token}",
        raceId=race_id,
        eventId=event_id,
        status=HoldPhase.HELD,
        createdAt=NOW,
        expiresAt=NOW + timedelta(minutes=10),
    )
    return s.holds.claim(hold, shards)


def test_usage_counts_the_shards_places(stores, race_id):
    stores.inventory.create_event_shards(race_id, "ev", [3, 2])
    assert _claim(stores, race_id, "ev", ["SHARD#001"]) is not None
    usage = stores.inventory.usage(race_id, "ev", consistent=True)
    assert (usage.cap, usage.taken, usage.left) == (5, 1, 4)
    assert [(s.sk, s.cap, s.taken) for s in usage.shards] == [("SHARD#000", 3, 0), ("SHARD#001", 2, 1)]
    empty = stores.inventory.usage(race_id, "ev-none", consistent=True)
    assert (empty.cap, empty.taken, empty.left, empty.shards) == (0, 0, 0, [])


def test_a_cap_change_holds_only_while_the_shards_are_as_planned(stores, race_id):
    stores.inventory.create_event_shards(race_id, "ev", [2, 2])
    assert _claim(stores, race_id, "ev", ["SHARD#000"]) is not None
    inv = stores.inventory
    with pytest.raises(ConditionFailed) as below:  # one place is taken on SHARD#000
        stores.transact(inv.cap_change_items(race_id, "ev", [ShardChange("SHARD#000", 2, 0)]))
    assert below.value.indexes == [0]
    with pytest.raises(ConditionFailed) as stale:
        stores.transact(inv.cap_change_items(race_id, "ev", [ShardChange("SHARD#001", 3, 1)]))
    assert stale.value.indexes == [0]
    with pytest.raises(ConditionFailed) as exists:
        stores.transact(inv.cap_change_items(race_id, "ev", [ShardChange("SHARD#001", None, 1)]))
    assert exists.value.indexes == [0]
    plan = [ShardChange("SHARD#000", 2, 1), ShardChange("SHARD#001", 2, 4), ShardChange("SHARD#002", None, 5)]
    stores.transact(inv.cap_change_items(race_id, "ev", plan))
    usage = inv.usage(race_id, "ev", consistent=True)
    assert [(s.sk, s.cap, s.taken) for s in usage.shards] == [
        ("SHARD#000", 1, 1),
        ("SHARD#001", 4, 0),
        ("SHARD#002", 5, 0),
    ]


# -- the registration window ------------------------------------------------------------------------
def _window(race_id: str, execution: str | None) -> WindowRecord:
    extra = {"execution": execution, "mode": "schedule", "opensAt": NOW.isoformat(), "closesAt": NOW.isoformat()}
    return WindowRecord.model_validate(
        {"raceId": race_id, "startedAt": NOW.isoformat(), "startedBy": "dir-c"} | (extra if execution else {})
    )


def test_a_window_is_replaced_only_from_the_sequence_read(stores, race_id):
    assert stores.windows.get(race_id) is None
    stores.transact([stores.windows.replace_item(race_id, 0, _window(race_id, f"{race_id}-w1"))])
    first = stores.windows.get(race_id)
    assert first == _window(race_id, f"{race_id}-w1").model_copy(update={"seq": 1})
    with pytest.raises(ConditionFailed):  # a second click that read the same sequence
        stores.transact([stores.windows.replace_item(race_id, 0, _window(race_id, f"{race_id}-w1b"))])
    stores.transact([stores.windows.replace_item(race_id, 1, _window(race_id, None))])
    closed = stores.windows.get(race_id)
    assert closed is not None and (closed.seq, closed.execution, closed.mode) == (2, None, None)


def test_only_the_current_execution_passes_the_guard(stores, race_id):
    with pytest.raises(ConditionFailed):  # no window at all
        stores.transact([stores.windows.guard_item(race_id, f"{race_id}-w1")])
    stores.transact([stores.windows.replace_item(race_id, 0, _window(race_id, f"{race_id}-w1"))])
    stores.transact([stores.windows.guard_item(race_id, f"{race_id}-w1")])
    with pytest.raises(ConditionFailed):
        stores.transact([stores.windows.guard_item(race_id, f"{race_id}-w0")])
    stores.transact([stores.windows.replace_item(race_id, 1, _window(race_id, None))])
    with pytest.raises(ConditionFailed):  # closed by hand: no execution is current
        stores.transact([stores.windows.guard_item(race_id, f"{race_id}-w1")])


# -- the audit trail --------------------------------------------------------------------------------
def _entry(race_id: str, n: int, **details: object) -> AuditEntry:
    return AuditEntry(
        raceId=race_id,
        entryId=f"e{n:02d}",
        at=NOW + timedelta(seconds=n),
        actor=DIRECTOR,
        action="race.update",
        target=race_id,
        details=details,
    )


def test_audit_entries_page_newest_first(stores, race_id):
    stores.transact([stores.audit.put_item(_entry(race_id, n, k=n, names=["a", "b"])) for n in range(5)])
    with pytest.raises(ConditionFailed):
        stores.transact([stores.audit.put_item(_entry(race_id, 2))])
    first, cursor = stores.audit.page(race_id, 2)
    assert [e.entryId for e in first] == ["e04", "e03"] and cursor is not None
    assert first[0] == _entry(race_id, 4, k=4, names=["a", "b"])
    second, cursor = stores.audit.page(race_id, 2, cursor)
    assert [e.entryId for e in second] == ["e02", "e01"] and cursor is not None
    last, cursor = stores.audit.page(race_id, 2, cursor)
    assert ([e.entryId for e in last], cursor) == (["e00"], None)
    assert stores.audit.page(f"{race_id}-none", 2) == ([], None)
