"""Shared fixtures. Integration fixtures start the real local servers on free ports
once per test session and stop them afterwards; unit tests touch no sockets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from local.runtime import FunctionHost, install_layer_path

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
