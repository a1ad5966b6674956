"""The chaos burst's DynamoDB faults (local/faults.py): off unless switched on, shaped as
DynamoDB answers them, below the SDK's retries, and counted."""

from __future__ import annotations

from pathlib import Path

import botocore.handlers
import botocore.session
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local import faults


@pytest.fixture
def switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    injector = faults.Injector(tmp_path)
    # Only for this test's sessions: the process-wide list is restored afterwards.
    monkeypatch.setattr(botocore.handlers, "BUILTIN_HANDLERS", [*botocore.handlers.BUILTIN_HANDLERS])
    botocore.handlers.BUILTIN_HANDLERS.append(("before-send.dynamodb", injector))
    monkeypatch.setattr(faults, "RELOAD_S", 0.0)
    return tmp_path


def _client(attempts: int) -> object:
    return botocore.session.get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: every call is answered by the hook
        aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"max_attempts": attempts, "mode": "standard"}),
    )


def test_a_throttle_is_retried_by_the_sdk_as_dynamodbs_own_and_each_attempt_is_counted(switch: Path) -> None:
    faults.switch_on(switch, throttle=1.0, conflict=0.0)
    client = _client(attempts=2)

    with pytest.raises(ClientError) as err:
        client.get_item(TableName="t", Key={"pk": {"S": "a"}})  # type: ignore[attr-defined]

    assert err.value.response["Error"]["Code"] == "ThrottlingException"
    retries = err.value.response["ResponseMetadata"]["RetryAttempts"]
    assert retries >= 1  # the SDK retried it, as it retries DynamoDB's own throttling
    assert [(i["kind"], i["op"]) for i in faults.injected(switch)] == [("throttle", "GetItem")] * (retries + 1)


def test_a_conflict_names_one_item_per_item_of_the_transaction(switch: Path) -> None:
    faults.switch_on(switch, throttle=0.0, conflict=1.0)
    client = _client(attempts=1)
    items = [{"Put": {"TableName": "t", "Item": {"pk": {"S": str(i)}}}} for i in range(3)]

    with pytest.raises(client.exceptions.TransactionCanceledException) as err:  # type: ignore[attr-defined]
        client.transact_write_items(TransactItems=items)  # type: ignore[attr-defined]

    codes = [r["Code"] for r in err.value.response["CancellationReasons"]]
    assert sorted(codes) == ["None", "None", "TransactionConflict"]
    assert [i["kind"] for i in faults.injected(switch)] == ["conflict"]


def test_switched_off_nothing_is_injected(switch: Path) -> None:
    faults.switch_on(switch, throttle=1.0, conflict=1.0)
    faults.switch_off(switch)
    injector = faults.Injector(switch)

    assert injector(request=None, event_name="before-send.dynamodb.GetItem") is None
    assert faults.injected(switch) == []
