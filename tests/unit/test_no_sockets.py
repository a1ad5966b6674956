"""The unit suite's guard works: opening a socket fails the test."""

from __future__ import annotations

import socket

import pytest
from pytest_socket import SocketBlockedError


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_a_unit_test_cannot_open_a_socket():
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


@pytest.mark.filterwarnings("ignore:A test tried to use socket")
def test_nor_reach_a_server_through_a_client():
    import urllib.request

    with pytest.raises(SocketBlockedError):
        urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
