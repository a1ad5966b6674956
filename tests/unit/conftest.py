"""Unit tests touch no network: every socket is blocked (pytest-socket), so a test that
needs a server belongs in tests/integration or tests/contract."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_socket import disable_socket, enable_socket


@pytest.fixture(autouse=True)
def _no_sockets() -> Iterator[None]:
    disable_socket(allow_unix_socket=False)
    yield
    enable_socket()
