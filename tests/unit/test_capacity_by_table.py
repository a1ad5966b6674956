"""The bench's DynamoDB units per table (tools/awscalls.py, tools/bench/costs.py): what each
table must take in a burst, which the preflight checks each table's warm throughput against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import blueprint
from tools.awscalls import Counter, _capacity_fields, _tables_of, subtract
from tools.bench.costs import per_registration

INVENTORY = blueprint.table("Inventory").local_name
REGISTRATIONS = blueprint.table("Registrations").local_name


def _put(table: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"Put": {"TableName": table, "Item": item}}


def _update(table: str) -> dict[str, Any]:
    return {"Update": {"TableName": table, "Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET a = :a"}}


def test_given_a_transaction_over_two_tables_when_counted_then_each_table_gets_its_items_and_index_units() -> None:
    params = {"TransactItems": [_put(REGISTRATIONS, {"pk": {"S": "x" * 1500}}), _update(INVENTORY), _update(INVENTORY)]}
    consumed = [
        {"TableName": REGISTRATIONS, "CapacityUnits": 8.0, "GlobalSecondaryIndexes": {"gsi1": {"CapacityUnits": 4.0}}},
        {"TableName": INVENTORY, "CapacityUnits": 8.0},
    ]
    fields = _capacity_fields("TransactWriteItems", consumed, params)
    # AWS: 2 units per KB of each item (a 1.5 KB put is 4), index units halved (4 reported, 2 billed).
    assert fields[f"wcu:{REGISTRATIONS}"] == 4 + 2
    assert fields[f"wcu:{INVENTORY}"] == 2 + 2
    assert fields["wcu_table"] == 8 and fields["wcu_index"] == 2
    # Were it cancelled, each item's failed condition is charged to its own table.
    assert _tables_of("TransactWriteItems", params) == [REGISTRATIONS, INVENTORY, INVENTORY]
    assert _tables_of("UpdateItem", {"TableName": INVENTORY}) == [INVENTORY]


def test_given_a_writer_batch_when_counted_then_every_items_index_write_is_billed() -> None:
    """DynamoDB Local reports a transaction's index units per table (4), however many of its items
    write the index: AWS bills each one (issue 38: a batch of ten counted the index writes of one)."""
    removes = {
        "Update": {
            "TableName": INVENTORY,
            "Key": {"pk": {"S": "HOLD#h"}},
            "UpdateExpression": "SET #s = :confirmed REMOVE gsi1pk, gsi1sk",
            "ExpressionAttributeNames": {"#s": "status"},
        }
    }
    regs = [_put(REGISTRATIONS, {"pk": {"S": f"REG#{i}"}, "gsi1pk": {"S": "EVENT"}}) for i in range(3)]
    params = {"TransactItems": [_update(INVENTORY), *regs, removes, removes, removes]}
    consumed = [
        {"TableName": REGISTRATIONS, "CapacityUnits": 12.0, "GlobalSecondaryIndexes": {"gsi1": {"CapacityUnits": 4.0}}},
        {"TableName": INVENTORY, "CapacityUnits": 16.0, "GlobalSecondaryIndexes": {"gsi1": {"CapacityUnits": 4.0}}},
    ]
    fields = _capacity_fields("TransactWriteItems", consumed, params)
    assert fields["wcu_table"] == 2 * 7 and fields["wcu_index"] == 2 * 3 + 2 * 3
    assert fields[f"wcu:{REGISTRATIONS}"] == 6 + 6 and fields[f"wcu:{INVENTORY}"] == 8 + 6


def test_given_counted_calls_when_per_registration_then_units_are_by_blueprint_table(tmp_path: Path) -> None:
    counter = Counter(tmp_path)
    before = counter.snapshot()
    get = {"TableName": INVENTORY, "CapacityUnits": 1.0, "Table": {"CapacityUnits": 1.0}}
    counter.record_call("dynamodb", "GetItem", {"requests": 1, **_capacity_fields("GetItem", get, {})})
    put = {
        "TableName": REGISTRATIONS,
        "Table": {"CapacityUnits": 1.0},
        "GlobalSecondaryIndexes": {"gsi1": {"CapacityUnits": 1.0}},
    }
    counter.record_call("dynamodb", "PutItem", {"requests": 1, **_capacity_fields("PutItem", put, {})})
    # A failed conditional write: billed, estimated at one unit for its table.
    counter.record_call("dynamodb", "UpdateItem", {"requests": 1, "wcu_failed_estimated": 1, f"wcu:{INVENTORY}": 1})
    delta = subtract(counter.snapshot(), {**before, "redis": {}})

    by_table = per_registration(delta, registrations=2)["dynamodb"]["capacity_per_registration_by_table"]

    assert by_table == {"Inventory": {"wcu": 0.5, "rcu": 0.5}, "Registrations": {"wcu": 1.0, "rcu": 0.0}}


def test_given_traced_writes_when_summarized_then_each_write_shape_gets_its_requests_and_units(tmp_path: Path) -> None:
    from tools.awscalls import summarize_writes

    counter = Counter(tmp_path)
    counter.trace_dir = tmp_path
    counter.current.route = "POST /api/holds"
    for hold in ("H1", "H2"):  # two runners' claims: one line, whatever their ids
        claim = {
            "TransactItems": [
                {"Update": {"TableName": INVENTORY, "Key": {"pk": {"S": "CAP#r#e"}, "sk": {"S": "SHARD#0"}}}},
                _put(INVENTORY, {"pk": {"S": f"HOLD#{hold}"}, "sk": {"S": "HOLD"}}),
            ]
        }
        counter.trace_write("TransactWriteItems", claim, {"wcu_table": 4.0, "wcu_index": 2.0})
    counter.current.route = None
    counter.current.function = "EmailSender"
    sent = {"RequestItems": {REGISTRATIONS: [{"PutRequest": {"Item": {"pk": {"S": "REG#1"}, "sk": {"S": "SENT#a"}}}}]}}
    counter.trace_write("BatchWriteItem", sent, {"wcu_table": 1.0})

    rows = summarize_writes(tmp_path, registrations=2)

    assert rows == [
        (
            f"POST /api/holds | TransactWriteItems [Update {INVENTORY}:CAP#…/SHARD#… + Put {INVENTORY}:HOLD#…/HOLD]",
            1.0,
            6.0,
        ),
        (f"EmailSender | BatchWriteItem [Put {REGISTRATIONS}:REG#…/SENT#…]", 0.5, 0.5),
    ]
