"""The question store's contract: the same cases against the fake and DynamoDB Local, so
the versioning the unit tests rely on (each save the next version, two saves from one read
never both land, a saved version never changes) holds on the real table too."""

from __future__ import annotations

import uuid

import pytest
from racecap.aws.transactions import ConditionFailed


def test_versions_follow_each_other_and_a_second_save_from_the_same_read_fails(stores):
    store, race_id, event_id = stores.questions, f"race-{uuid.uuid4().hex[:8]}", "ev0"
    assert store.current_version(race_id, event_id) == 0
    assert store.get(race_id, event_id, 1) is None
    first = {"questions": [{"id": "pace", "kind": "NUMBER", "min": 3.5}], "builtIns": {}}
    stores.transact(store.save_items(race_id, event_id, 1, first))
    with pytest.raises(ConditionFailed):  # the same version again: a concurrent save lost
        stores.transact(store.save_items(race_id, event_id, 1, {"questions": []}))
    with pytest.raises(ConditionFailed) as skipped:  # a version built on one never saved
        stores.transact(store.save_items(race_id, event_id, 3, {"questions": []}))
    assert skipped.value.indexes == [1]
    stores.transact(store.save_items(race_id, event_id, 2, {"questions": []}))
    assert store.current_version(race_id, event_id) == 2
    assert store.get(race_id, event_id, 1) == first  # floats and all, as saved
    assert store.get(race_id, event_id, 3) is None
    assert store.current_version(race_id, "ev1") == 0  # another event of the race has its own
