"""Contract fixtures: each port's cases run against the fake AND every real adapter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.contract.payments_ports import PROVIDERS, PortUnderTest
from tests.contract.queues_under_test import QUEUES, NewQueue, QueueUnderTest
from tests.contract.stores_under_test import STORES, StoresUnderTest
from tests.contract.workflows_under_test import WORKFLOWS, WorkflowUnderTest


@pytest.fixture(scope="session", params=sorted(PROVIDERS))
def payment_port(request: pytest.FixtureRequest) -> Iterator[PortUnderTest]:
    yield from PROVIDERS[request.param]()


@pytest.fixture(scope="session", params=sorted(STORES))
def stores(request: pytest.FixtureRequest) -> Iterator[StoresUnderTest]:
    yield from STORES[request.param]()


@pytest.fixture(scope="session", params=sorted(QUEUES))
def queues(request: pytest.FixtureRequest) -> Iterator[NewQueue]:
    yield from QUEUES[request.param]()


@pytest.fixture
def queue(queues: NewQueue) -> QueueUnderTest:
    """A fresh, empty queue of the backend under test."""
    return queues()


@pytest.fixture(scope="session", params=sorted(WORKFLOWS))
def workflow(request: pytest.FixtureRequest) -> Iterator[WorkflowUnderTest]:
    yield from WORKFLOWS[request.param]()
