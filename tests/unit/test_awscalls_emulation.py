"""The bench counts the calls a deployment would make (tools/awscalls.py): a client the local
stack marks as its own emulation (the gateway's look at the provisioned floors) is not counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import botocore.client
import pytest
import redis.client

from local import runtime
from tools import awscalls


def test_a_client_marked_as_the_local_stacks_emulation_is_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered: list[str] = []

    def no_network(self: Any, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        answered.append(operation)
        return {"ScalableTargets": []}

    # install() patches these for good: monkeypatch puts each back after the test.
    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_network)
    monkeypatch.setattr(redis.client.Redis, "execute_command", redis.client.Redis.execute_command)
    monkeypatch.setattr(redis.client.Pipeline, "execute", redis.client.Pipeline.execute)
    monkeypatch.setattr(runtime.FunctionHost, "invoke_timed", runtime.FunctionHost.invoke_timed)
    counter = awscalls.install(tmp_path)
    counted = runtime.local_session().client("application-autoscaling")
    emulation = runtime.local_session().client("application-autoscaling")
    setattr(emulation, runtime.EMULATION_ATTR, True)

    counted.describe_scalable_targets(ServiceNamespace="lambda")
    emulation.describe_scalable_targets(ServiceNamespace="lambda")

    assert answered == ["DescribeScalableTargets"] * 2  # both were made
    assert counter.calls["application-autoscaling:DescribeScalableTargets"]["requests"] == 1  # one counted
