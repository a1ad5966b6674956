"""Two uploads of one event processed at once, against DynamoDB Local: each becomes its own
version, whatever the interleaving, and no version's content is the other upload's.

Before: both read the pointer, both wrote their chunks under the same next number (the
second overwriting the first's), and the first to install pointed the event at a version
holding the other's rows under its own audit entry.
"""

from __future__ import annotations

import functools
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from racecap.audit.service import AuditTrail
from racecap.audit.store import DynamoAudit
from racecap.aws.transactions import transact
from racecap.models import Director
from racecap.results.service import ResultsProcessor
from racecap.results.store import DynamoResults

pytestmark = pytest.mark.integration

DIRECTOR = Director(sub="director-versions", username="versions")


class Paced(DynamoResults):
    """The real store, with a pause after each of this upload's steps: the test interleaves
    two uploads exactly, as two Lambda environments could."""

    def __init__(self, client: Any, table: str) -> None:
        super().__init__(client, table)
        self.wrote = threading.Event()
        self.may_install = threading.Event()

    def write_version(self, race_id: str, event_id: str, version: int, blob: bytes) -> bool:
        claimed = super().write_version(race_id, event_id, version, blob)
        if claimed:
            self.wrote.set()
        return claimed

    def install_items(self, *args: Any, **kwargs: Any) -> list[Any]:
        assert self.may_install.wait(30)
        return super().install_items(*args, **kwargs)


def _upload(store: DynamoResults, backend: Any, race_id: str, event_id: str, n: int) -> dict[str, Any]:
    doc = {
        "uploadId": f"upl_{n}_{datetime.now(UTC):%H%M%S%f}",
        "raceId": race_id,
        "eventId": event_id,
        "status": "WAITING_FOR_FILE",
        "createdAt": datetime.now(UTC).isoformat(),
        "objectKey": "unused",
        "rules": {},
        "actor": DIRECTOR.model_dump(),
    }
    transact(backend.dynamodb, [store.new_upload_item(doc)])
    assert store.claim_upload(race_id, event_id, doc["uploadId"], datetime.now(UTC).isoformat())
    return doc


def _processor(store: DynamoResults, backend: Any) -> ResultsProcessor:
    return ResultsProcessor(
        store,
        None,  # type: ignore[arg-type]  # the file was read already: install() takes the checked result
        backend.store(),
        backend.registrations(),
        functools.partial(transact, backend.dynamodb),
        AuditTrail(DynamoAudit(backend.dynamodb, backend.table("Audit"))),
        backend.cache(),
    )


@pytest.mark.parametrize("second_installs_first", [False, True], ids=["in-claim-order", "out-of-order"])
def test_given_two_uploads_installing_at_once_then_each_version_holds_its_own_upload(
    backend: Any, second_installs_first: bool
) -> None:
    race_id = backend.create_race([10], name="Two Uploads")
    event_id = backend.store().get_race(race_id)[1][0].eventId
    table = backend.table("Results")
    first, second = Paced(backend.dynamodb, table), Paced(backend.dynamodb, table)
    docs = [_upload(first, backend, race_id, event_id, 1), _upload(second, backend, race_id, event_id, 2)]
    blobs = [b"first upload's rows " * 50_000, b"second upload's rows " * 30_000]  # 3 chunks, and 2
    versions: dict[int, int] = {}

    def run(i: int, store: Paced) -> None:
        versions[i] = _processor(store, backend).install(docs[i], blobs[i], {"rows": i + 1, "finishers": i + 1})

    one = threading.Thread(target=run, args=(0, first))
    one.start()
    assert first.wrote.wait(30)  # the first upload has written its chunks and waits to install
    two = threading.Thread(target=run, args=(1, second))
    two.start()
    assert second.wrote.wait(30)  # so has the second, under a number of its own
    turns = [(first, one), (second, two)]
    for store, thread in reversed(turns) if second_installs_first else turns:
        store.may_install.set()
        thread.join(30)

    reader = DynamoResults(backend.dynamodb, table)
    assert len(set(versions.values())) == 2
    for i in (0, 1):
        assert reader.read_version(race_id, event_id, versions[i]) == blobs[i]
        upload = reader.upload(race_id, event_id, docs[i]["uploadId"])
        assert upload is not None and (upload["status"], upload["version"]) == ("READY", versions[i])
    # The pointer names the version installed last, and that version is its upload's.
    last = 0 if second_installs_first else 1
    pointer = reader.pointer(race_id, event_id)
    assert pointer is not None and pointer["version"] == versions[last] == max(versions.values())


def test_given_a_version_number_written_once_when_written_again_then_it_is_refused_and_unchanged(backend: Any) -> None:
    store = DynamoResults(backend.dynamodb, backend.table("Results"))
    race_id = backend.create_race([10], name="Write Once")
    assert store.write_version(race_id, "evt_x", 1, b"mine" * 200_000)
    assert not store.write_version(race_id, "evt_x", 1, b"theirs")
    assert store.read_version(race_id, "evt_x", 1) == b"mine" * 200_000
