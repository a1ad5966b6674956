"""Shared fixtures. Integration fixtures start the real local servers on free ports
once per test session and stop them afterwards; unit tests touch no sockets.

The suites that run a stack (``tests/integration``, ``tests/browser``) each define ``stack``
and ``backend`` in their own conftest, at their own scope (the browser's stack is the
package's, so a full run never keeps two up at once); fixtures here that ask for ``stack``
get the one of the suite that runs the test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from local.runtime import FunctionHost, install_layer_path

if TYPE_CHECKING:
    import requests

    from local.stack import LocalStack

install_layer_path()
# Logic under test in this process emits Powertools metrics; give them their namespace
# as the function environment would (the blueprint's value).
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Racecap")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "racecap-tests")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")


@pytest.fixture(scope="session")
def placeholder_env() -> Iterator[dict[str, str]]:
    """A well-formed function environment pointing nowhere (for importing handlers)."""
    from local.stack import LocalStack

    env = LocalStack(Path("/nonexistent")).function_env()
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    yield env
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def function_host(placeholder_env) -> FunctionHost:
    return FunctionHost()


@pytest.fixture
def api(stack: LocalStack) -> Iterator[requests.Session]:
    """The runner API over plain HTTP on the suite's stack (relative URLs go to its gateway),
    for calling it as a runner does or arranging what other runners did."""
    from tests.integration.conftest import api_session

    session = api_session(stack)
    yield session
    session.close()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``pytest -n`` (``make test``): a file's tests run on one worker (its module fixtures
    start once) and the whole browser suite on one worker (its stack is the package's, and two
    Chromiums on two cores would slow every test beside them). xdist's own ``loadgroup`` marks
    do not reach the scheduler under pytest 9 (it rewrites a node id pytest no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    class BySuite(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/browser" if path.startswith("tests/browser/") else path

    return BySuite(config, log)
