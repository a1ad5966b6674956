"""The one transaction runner (aws/transactions.py): a one-item "transaction" is that item's
own conditional write (half the write units), with the same outcome for a failed condition."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber
from racecap.aws.transactions import ConditionFailed, transact, update_item


def _client() -> Any:
    return botocore.session.get_session().create_client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached: the stubber answers
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def _update(pk: str) -> dict[str, Any]:
    return update_item("t", {"pk": {"S": pk}}, "SET n = :n", condition="attribute_exists(pk)", vals={":n": 1})


def test_one_item_is_written_as_a_conditional_update_not_a_transaction() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("update_item", {}, _update("a")["Update"])
        transact(client, [_update("a")])
        stub.assert_no_pending_responses()


def test_one_items_failed_condition_is_the_first_items_failure() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_client_error("update_item", service_error_code="ConditionalCheckFailedException")
        with pytest.raises(ConditionFailed) as err:
            transact(client, [_update("a")])
    assert err.value.indexes == [0]


def test_two_items_are_one_transaction() -> None:
    client = _client()
    items = [_update("a"), _update("b")]
    with Stubber(client) as stub:
        stub.add_response("transact_write_items", {}, {"TransactItems": items})
        transact(client, items)
        stub.assert_no_pending_responses()
