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


@pytest.fixture(autouse=True)
def _pulse_counts_stay_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The services count their opening's seconds into the process-wide ``racecap.pulse.pulse``,
    which the HTTP resolver flushes to Redis: here the flush drops them (tests of the counts build
    their own ``Pulse`` on a stand-in)."""
    from racecap import pulse

    monkeypatch.setattr(pulse.pulse, "flush", lambda: pulse.pulse._pending.clear() or True)
