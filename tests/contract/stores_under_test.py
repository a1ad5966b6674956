"""The stores the contract suite runs against: the in-memory fakes and the DynamoDB
adapters on a real DynamoDB Local (tables created from the blueprint)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from racecap.audit.store import AuditStore, DynamoAudit
from racecap.aws.items import query_all, to_item, values
from racecap.aws.keys import code_pk, waitlist_line_key
from racecap.aws.transactions import TransactItem, transact
from racecap.codes.hold_store import DynamoCodeHolds
from racecap.codes.service import CodeHolds
from racecap.holds.store import DynamoHolds, HoldStore
from racecap.ledger.cancel_store import CancelStore, DynamoCancelStore
from racecap.ledger.store import DynamoLedger, LedgerStore
from racecap.places.returns import POOL, pool_attr
from racecap.places.store import DynamoInventory, Inventory
from racecap.questions.store import DynamoQuestions, QuestionStore
from racecap.races.store import DynamoRaceStore, RaceStore
from racecap.registration.attempts import Attempts, DynamoAttempts
from racecap.registration.store import DynamoRegistrations, RegistrationStore
from racecap.retention.service import RetentionStore
from racecap.retention.store import DynamoRetention
from racecap.waitlist.store import DynamoWaitlist, WaitlistStore
from racecap.window.store import DynamoWindows, WindowStore

import blueprint
from local import servers
from local.provision import create_table_params
from tests.fakes.attempts import FakeAttempts
from tests.fakes.cancel_store import FakeCancelStore
from tests.fakes.catalog import FakeCatalog
from tests.fakes.code_holds import FakeCodeHolds
from tests.fakes.ledger import FakeLedger
from tests.fakes.questions import FakeQuestions
from tests.fakes.races import FakeAuditStore, FakeInventory, FakeRaceStore, FakeWindows
from tests.fakes.retention import FakeRetention
from tests.fakes.stores import FakeHolds, FakeRegistrations, FakeTables
from tests.fakes.waitlist import FakeWaitlist


@dataclass
class StoresUnderTest:
    name: str
    holds: HoldStore
    regs: RegistrationStore
    add_event: Callable[[str, str, list[int]], None]
    taken: Callable[[str, str], int]
    transact: Callable[[list[TransactItem]], None]
    races: RaceStore
    inventory: Inventory
    windows: WindowStore
    audit: AuditStore
    ledger: LedgerStore
    questions: QuestionStore
    add_code: Callable[[str, str, list[int]], None]  # a discount code's use counter: race, code, shard caps
    code_uses: Callable[[str, str], int]
    attempts: Attempts  # the payment step's writes on the same holds
    code_holds: CodeHolds  # a code's writes on the same holds
    cancel_store: CancelStore  # the ledger's writes on the same registrations
    waitlist: WaitlistStore  # events' waitlists: their lines and entries
    pool: Callable[[str, str, str, int], None]  # k freed places to an event's line on a shard (places.returns)
    retention: RetentionStore  # the purge's reads and deletes, on the same tables


def fake_stores() -> Iterator[StoresUnderTest]:
    tables = FakeTables()
    waitlist = FakeWaitlist()
    yield StoresUnderTest(
        "fake",
        FakeHolds(tables),
        FakeRegistrations(tables),
        tables.add_event,
        tables.taken,
        tables.transact,
        FakeRaceStore(tables),
        FakeInventory(tables),
        FakeWindows(tables),
        FakeAuditStore(tables),
        FakeLedger(tables),
        FakeQuestions(tables),
        lambda race_id, code, caps: tables.code_shards.update(
            {(race_id, code): {f"SHARD#{n:03d}": [cap, 0] for n, cap in enumerate(caps)}}
        ),
        tables.code_uses,
        FakeAttempts(tables),
        FakeCodeHolds(tables),
        FakeCancelStore(tables),
        waitlist,
        waitlist.pool,
        FakeRetention(tables, FakeCatalog(tables), waitlist),
    )


def dynamo_stores() -> Iterator[StoresUnderTest]:
    with tempfile.TemporaryDirectory(prefix="racecap-contract-") as work:
        server = servers.start_dynamodb(servers.free_port(), Path(work))
        try:
            client: Any = boto3.session.Session(
                aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1"
            ).client("dynamodb", endpoint_url=f"http://127.0.0.1:{server.port}")
            for table_id in ("Inventory", "Registrations", "Races", "Audit"):
                client.create_table(**create_table_params(blueprint.table(table_id)))
            inv, regs = blueprint.table("Inventory").local_name, blueprint.table("Registrations").local_name
            races = blueprint.table("Races").local_name
            inventory = DynamoInventory(client, inv)
            yield StoresUnderTest(
                "dynamodb-local",
                DynamoHolds(client, inv),
                DynamoRegistrations(client, regs, inv),
                inventory.create_event_shards,
                lambda race_id, event_id: inventory.usage(race_id, event_id, consistent=True).taken,
                lambda items: transact(client, items),
                DynamoRaceStore(client, races),
                inventory,
                DynamoWindows(client, races),
                DynamoAudit(client, blueprint.table("Audit").local_name),
                DynamoLedger(client, regs),
                DynamoQuestions(client, races),
                lambda race_id, code, caps: _add_code(client, inv, race_id, code, caps),
                lambda race_id, code: _code_uses(client, inv, race_id, code),
                DynamoAttempts(client, inv),
                DynamoCodeHolds(client, inv),
                DynamoCancelStore(client, regs, inv),
                DynamoWaitlist(client, inv),
                lambda race_id, event_id, shard, k: _pool(client, inv, race_id, event_id, shard, k),
                DynamoRetention(client, races, inv, regs),
            )
        finally:
            server.stop()


def _pool(client: Any, table: str, race_id: str, event_id: str, shard: str, k: int) -> None:
    """The LINE's share of ``places.returns``' pooling items (its shard's ``taken`` is not this suite's)."""
    client.update_item(
        TableName=table,
        Key=waitlist_line_key(race_id, event_id),
        UpdateExpression="ADD #pool :k, #ps :k",
        ExpressionAttributeNames={"#pool": POOL, "#ps": pool_attr(shard)},
        ExpressionAttributeValues=values({":k": k}),
    )


def _add_code(client: Any, table: str, race_id: str, code: str, caps: list[int]) -> None:
    """The counter's shards as ``racecap.codes.store.DynamoCodes.create`` writes them."""
    for n, cap in enumerate(caps):
        client.put_item(
            TableName=table,
            Item=to_item({"pk": code_pk(race_id, code), "sk": f"SHARD#{n:03d}", "cap": cap, "taken": 0}),
        )


def _code_uses(client: Any, table: str, race_id: str, code: str) -> int:
    items = query_all(
        client,
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues=values({":pk": code_pk(race_id, code)}),
        ConsistentRead=True,
    )
    return sum(int(i["taken"]) for i in items)


STORES: dict[str, Callable[[], Iterator[StoresUnderTest]]] = {"fake": fake_stores, "dynamodb-local": dynamo_stores}
