"""Warm starts: after a SnapStart restore, environments do not share ``random``'s state or
a dead Redis connection (racecap.clients.after_restore); a warm init (SnapStart's, a
provisioned environment's) builds the SDK clients before any request (racecap.clients.prime)."""

from __future__ import annotations

import random

import pytest
from racecap import clients


def test_given_environments_restored_from_one_snapshot_when_each_restores_then_their_random_streams_differ() -> None:
    random.seed(1234)  # the state frozen in the snapshot
    state = random.getstate()
    draws = []
    for _ in range(2):  # two environments restored from the same snapshot
        random.setstate(state)
        clients.after_restore()
        draws.append([random.random() for _ in range(4)])
    assert draws[0] != draws[1]


def test_given_a_redis_client_made_before_the_snapshot_when_restored_then_the_next_call_gets_a_new_one(
    placeholder_env: dict[str, str],
) -> None:
    clients.cache.cache_clear()
    before = clients.cache()  # no connection is opened until a command runs
    clients.after_restore()
    assert clients.cache() is not before
    clients.cache.cache_clear()


def _forget_clients() -> None:
    clients.aws.cache_clear()
    clients.cache.cache_clear()


def test_given_a_warm_init_when_the_clients_module_primes_then_the_dynamodb_sqs_and_cache_clients_are_built(
    placeholder_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _forget_clients()
    for init in sorted(clients.WARM_INITS):
        monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", init)
        assert clients.prime() is True
        assert clients.aws.cache_info().currsize == 2  # dynamodb and sqs
        assert clients.cache.cache_info().currsize == 1
        _forget_clients()


def test_given_an_on_demand_init_when_the_clients_module_primes_then_nothing_is_built(
    placeholder_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _forget_clients()
    monkeypatch.setenv("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
    assert clients.prime() is False
    assert clients.aws.cache_info().currsize == 0
    assert clients.cache.cache_info().currsize == 0


def test_given_a_client_when_built_then_it_sends_the_one_user_agent_built_once(placeholder_env: dict[str, str]) -> None:
    _forget_clients()
    client = clients.dynamodb()
    assert client.meta.config.user_agent == clients._user_agent()
    assert clients._user_agent().startswith("racecap botocore/")
    _forget_clients()
