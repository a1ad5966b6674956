"""The waitlist's store (``waitlist.store``), the same cases on the fake and on DynamoDB Local:
one entry per address, a join number given only from the line as read (a stale read or a full
list refuses item 0, an entry no longer pending item 1), leaving and removing shorten the line."""

from __future__ import annotations

import uuid

import pytest
from racecap.aws.transactions import ConditionFailed
from racecap.waitlist.models import Offer, WaitlistEntry

from tests.contract.stores_under_test import StoresUnderTest

NOW = 1_900_000_000


def _entry(race: str, n: int, **over: object) -> WaitlistEntry:
    fields = {"entryId": f"entry{n}", "raceId": race, "eventId": "evt", "state": "PENDING", "email": f"r{n}@x.io",
              "firstName": "Ada", "lastName": "L", "joinedAt": "2030-01-01T00:00:00+00:00", "ttl": NOW + 600}  # fmt: skip
    return WaitlistEntry.model_validate(fields | over)


def test_an_address_has_one_live_entry_and_may_join_again_once_it_left_or_its_pending_one_expired(
    stores: StoresUnderTest,
) -> None:
    w, race = stores.waitlist, f"race-{uuid.uuid4().hex[:8]}"
    assert w.put_pending(_entry(race, 1), NOW)
    assert not w.put_pending(_entry(race, 1, firstName="Other"), NOW)  # a live pending entry stays as it is
    got = w.get(race, "evt", "entry1")
    assert got is not None and got.firstName == "Ada"
    assert w.put_pending(_entry(race, 1, firstName="Later"), NOW + 601)  # that one expired
    w.confirm(w.get(race, "evt", "entry1"), w.line(race, "evt"), None, "at")  # type: ignore[arg-type]
    assert not w.put_pending(_entry(race, 1), NOW)  # waiting: stays
    w.leave(w.get(race, "evt", "entry1"), "at")  # type: ignore[arg-type]
    assert w.put_pending(_entry(race, 1), NOW)  # left: may join again
    assert [e.state for e in w.entries(race, "evt")] == ["PENDING"]


def test_a_number_is_given_from_the_line_as_read_and_the_cap_and_the_state_are_checked_in_the_same_write(
    stores: StoresUnderTest,
) -> None:
    w, race = stores.waitlist, f"race-{uuid.uuid4().hex[:8]}"
    for n in range(1, 5):
        assert w.put_pending(_entry(race, n), NOW)
    empty = w.line(race, "evt")
    assert (empty.seq, empty.waiting, empty.exists) == (0, 0, False)
    w.confirm(w.get(race, "evt", "entry1"), empty, 2, "at")  # type: ignore[arg-type]
    with pytest.raises(ConditionFailed) as stale:  # the line moved since it was read
        w.confirm(w.get(race, "evt", "entry2"), empty, 2, "at")  # type: ignore[arg-type]
    assert stale.value.indexes == [0]
    w.confirm(w.get(race, "evt", "entry2"), w.line(race, "evt"), 2, "at")  # type: ignore[arg-type]
    with pytest.raises(ConditionFailed) as full:
        w.confirm(w.get(race, "evt", "entry3"), w.line(race, "evt"), 2, "at")  # type: ignore[arg-type]
    assert full.value.indexes == [0]
    with pytest.raises(ConditionFailed) as done:  # confirmed already
        w.confirm(_entry(race, 1), w.line(race, "evt"), None, "at")
    assert done.value.indexes == [1]
    line = w.line(race, "evt")
    assert (line.seq, line.waiting, line.head, line.exists) == (2, 2, 0, True)
    first = w.get(race, "evt", "entry1")
    assert first is not None and (first.state, first.seq, first.confirmedAt, first.ttl) == ("WAITING", 1, "at", None)

    # Leaving empties the runner's data and shortens the line; removing too, from any live state.
    w.leave(first, "left-at")
    left = w.get(race, "evt", "entry1")
    assert left is not None and (left.state, left.email, left.firstName, left.seq) == ("LEFT", "", "", 1)
    with pytest.raises(ConditionFailed):
        w.leave(first, "again")  # read as WAITING, it is LEFT now
    w.remove(w.get(race, "evt", "entry3"), "rm", [])  # type: ignore[arg-type]
    w.remove(w.get(race, "evt", "entry2"), "rm", [])  # type: ignore[arg-type]
    line = w.line(race, "evt")
    assert (line.seq, line.waiting) == (2, 0)
    assert sorted((e.entryId, e.state) for e in w.entries(race, "evt")) == [
        ("entry1", "LEFT"), ("entry2", "REMOVED"), ("entry3", "REMOVED"), ("entry4", "PENDING"),
    ]  # fmt: skip


def test_the_retention_purge_deletes_every_entry_and_offer_of_the_event_and_keeps_the_lines_figures(
    stores: StoresUnderTest,
) -> None:
    w, race, other = stores.waitlist, f"race-{uuid.uuid4().hex[:8]}", f"race-{uuid.uuid4().hex[:8]}"
    for n in range(1, 4):
        assert w.put_pending(_entry(race, n), NOW)
        w.confirm(w.get(race, "evt", f"entry{n}"), w.line(race, "evt"), None, "at")  # type: ignore[arg-type]
    assert w.put_pending(_entry(race, 4), NOW)  # still to confirm
    stores.pool(race, "evt", "SHARD#000", 1)
    first = w.get(race, "evt", "entry1")
    assert first is not None and first.seq == 1
    w.offer(w.line(race, "evt"), [(first, Offer(
        entryId="entry1", raceId=race, eventId="evt", state="OFFERED", seq=1, shard="SHARD#000", email="r1@x.io",
        offeredAt="at", expiresAt="2030-01-03T00:00:00+00:00", priceCents=2500))])  # fmt: skip
    assert w.put_pending(_entry(race, 5, eventId="evt2"), NOW)  # another event of the race: its own purge
    assert w.put_pending(_entry(other, 6), NOW)  # another race: kept

    items = stores.retention.waitlist_items(race, "evt")
    assert len(items) == 5  # four entries and the offer: each holds an address
    stores.transact(items)
    assert w.entries(race, "evt") == [] and w.offers(race, "evt") == []
    line = w.line(race, "evt")
    assert (line.exists, line.seq, line.made, line.offered) == (True, 3, 1, 1)  # figures, no one's data
    assert [e.entryId for e in w.entries(race, "evt2")] == ["entry5"]
    assert [e.entryId for e in w.entries(other, "evt")] == ["entry6"]
    assert stores.retention.waitlist_items(race, "evt") == []  # a resumed run: nothing left to delete


def _offer(race: str, entry: WaitlistEntry, shard: str = "SHARD#000") -> Offer:
    return Offer(entryId=entry.entryId, raceId=race, eventId="evt", state="OFFERED", seq=entry.seq, shard=shard,
                 email=entry.email, offeredAt="at", expiresAt="2030-01-03T00:00:00+00:00", priceCents=2500)  # fmt: skip


def test_a_ticket_is_offered_whole_and_a_group_passed_over_is_offered_behind_the_head_without_moving_it(
    stores: StoresUnderTest,
) -> None:
    """A ballot's line (issue 43): entries 1-2 a group, 3-4 a group, 5 alone; three places pooled."""
    w, race = stores.waitlist, f"race-{uuid.uuid4().hex[:8]}"
    for n in range(1, 6):
        assert w.put_pending(_entry(race, n), NOW)
        w.confirm(w.get(race, "evt", f"entry{n}"), w.line(race, "evt"), None, "at")  # type: ignore[arg-type]
    stores.pool(race, "evt", "SHARD#000", 2)
    stores.pool(race, "evt", "SHARD#001", 1)
    e = {n: w.get(race, "evt", f"entry{n}") for n in range(1, 6)}
    assert all(x is not None for x in e.values())

    w.offer(w.line(race, "evt"), [(e[1], _offer(race, e[1])), (e[2], _offer(race, e[2], "SHARD#001"))])  # type: ignore[arg-type]
    line = w.line(race, "evt")
    assert (line.head, line.pool, line.offered, line.waiting, line.made) == (2, 1, 2, 3, 2)
    assert {s: k for s, k in line.pool_by_shard.items() if k} == {"SHARD#000": 1}
    assert [w.get(race, "evt", f"entry{n}").state for n in (1, 2)] == ["OFFERED", "OFFERED"]  # type: ignore[union-attr]

    # Two places wanted, one pooled: nothing written.
    with pytest.raises(ConditionFailed) as refused:
        w.offer(line, [(e[3], _offer(race, e[3])), (e[4], _offer(race, e[4]))])  # type: ignore[arg-type]
    assert 0 in refused.value.indexes
    # The group passed over; 5 behind it gets the place, and the head moves past the group.
    w.offer(line, [(e[5], _offer(race, e[5]))])  # type: ignore[arg-type]
    assert w.line(race, "evt").head == 5
    # Two places come back: the group, behind the head now, is offered whole; the head stays.
    stores.pool(race, "evt", "SHARD#000", 2)
    w.offer(w.line(race, "evt"), [(e[3], _offer(race, e[3])), (e[4], _offer(race, e[4]))])  # type: ignore[arg-type]
    line = w.line(race, "evt")
    assert (line.head, line.pool, line.offered, line.waiting, line.made) == (5, 0, 5, 0, 5)
    # An entry offered already is not offered twice (its state, then its offer item).
    stores.pool(race, "evt", "SHARD#000", 1)
    with pytest.raises(ConditionFailed) as twice:
        w.offer(w.line(race, "evt"), [(e[5], _offer(race, e[5]))])  # type: ignore[arg-type]
    assert twice.value.indexes == [1, 2]
