"""The backing servers start on a free port, answer, listen on 127.0.0.1 only, and stop."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest
import redis
from botocore.config import Config

from local import servers

pytestmark = pytest.mark.integration

LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1"}
BOTO_CONFIG = Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=10)
SESSION = boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")


def listen_addresses(port: int) -> list[str]:
    """Local addresses of the TCP sockets listening on ``port``, from ``ss -ltn``."""
    ss = shutil.which("ss") or "/usr/sbin/ss"
    if not Path(ss).exists():
        pytest.fail("`ss` (iproute2) is needed to check what the servers listen on")
    out = subprocess.run([ss, "-Hltn"], capture_output=True, text=True, check=True).stdout
    hosts = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        host, _, port_text = cols[3].rpartition(":")
        if port_text == str(port):
            hosts.append(host.strip("[]").split("%")[0])
    return hosts


def check_dynamodb(server: servers.ServerProcess) -> None:
    ddb = SESSION.client("dynamodb", endpoint_url=server.endpoint, config=BOTO_CONFIG)
    assert ddb.list_tables()["TableNames"] == []


def check_sqs(server: servers.ServerProcess) -> None:
    sqs = SESSION.client("sqs", endpoint_url=server.endpoint, config=BOTO_CONFIG)
    assert sqs.list_queues().get("QueueUrls", []) == []
    url = sqs.create_queue(QueueName="servers-test")["QueueUrl"]
    assert url.startswith(f"http://127.0.0.1:{server.port}/")


def check_redis(server: servers.ServerProcess) -> None:
    client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=5)
    try:
        assert client.ping() is True
        assert int(str(client.config_get("maxclients")["maxclients"])) >= 1000
    finally:
        client.close()


STARTERS: dict[str, tuple[Callable[[int, Path], servers.ServerProcess], Callable[[servers.ServerProcess], None]]] = {
    "dynamodb": (lambda port, d: servers.start_dynamodb(port, d / "logs"), check_dynamodb),
    "elasticmq": (lambda port, d: servers.start_elasticmq(port, d / "logs", d / "work"), check_sqs),
    "redis": (lambda port, d: servers.start_redis(port, d / "logs"), check_redis),
}


@pytest.mark.parametrize("name", list(STARTERS))
def test_server_starts_answers_on_loopback_only_and_stops(name: str, tmp_path: Path) -> None:
    start, check = STARTERS[name]
    port = servers.free_port()
    server = start(port, tmp_path)
    try:
        assert server.alive()
        assert server.port == port
        check(server)
        hosts = listen_addresses(port)
        assert hosts, f"nothing listens on port {port}"
        assert set(hosts) <= LOOPBACK, f"{name} listens on {hosts}, not only on 127.0.0.1"
        assert servers.port_in_use(port)
    finally:
        server.stop()
    assert server.proc.poll() is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)  # the whole process group is gone
    assert listen_addresses(port) == []
    assert not servers.port_in_use(port)


def test_taken_port_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        assert servers.port_in_use(port)
        with pytest.raises(servers.PortInUseError, match=f"port {port} is already in use.*RACECAP_REDIS_PORT"):
            servers.start_redis(port, tmp_path)
        with pytest.raises(servers.PortInUseError, match="RACECAP_DYNAMODB_PORT"):
            servers.start_dynamodb(port, tmp_path)
        with pytest.raises(servers.PortInUseError, match="RACECAP_SQS_PORT"):
            servers.start_elasticmq(port, tmp_path, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing was started, nothing written


def test_a_server_that_dies_reports_its_log(tmp_path: Path) -> None:
    cmd = ["sh", "-c", "echo 'boom: cannot start'; exit 3"]
    with pytest.raises(servers.ServerStartError, match=r"(?s)exited with code 3.*boom: cannot start"):
        servers.spawn("doomed", cmd, servers.free_port(), tmp_path, timeout=10)


def test_a_persisted_elasticmq_killed_right_after_acknowledging_keeps_every_message(tmp_path: Path) -> None:
    """SQS never loses a message it acknowledged; the chaos burst SIGKILLs ElasticMQ and
    relies on the same. H2 (ElasticMQ's message store) writes a commit up to 500 ms late by
    default, which lost the last messages before a kill; the store is configured to write
    each commit at once."""
    import signal

    port = servers.free_port()
    server = servers.start_elasticmq(port, tmp_path / "logs", tmp_path / "work", persist=True)
    try:
        sqs = SESSION.client("sqs", endpoint_url=server.endpoint, config=BOTO_CONFIG)
        url = sqs.create_queue(QueueName="durable")["QueueUrl"]
        for i in range(20):
            sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
        os.killpg(server.pid, signal.SIGKILL)  # at once: no time for a delayed write
        server.proc.wait(timeout=10)
    finally:
        server.stop()
    again = servers.start_elasticmq(port, tmp_path / "logs2", tmp_path / "work", persist=True, restore=["durable"])
    try:
        sqs = SESSION.client("sqs", endpoint_url=again.endpoint, config=BOTO_CONFIG)
        url = sqs.get_queue_url(QueueName="durable")["QueueUrl"]
        bodies: set[str] = set()
        for _ in range(10):
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
            bodies |= {m["Body"] for m in got}
            if len(bodies) == 20:
                break
        assert bodies == {f"m{i}" for i in range(20)}
    finally:
        again.stop()


def test_a_restarted_persisted_elasticmq_is_ready_only_once_every_queue_is_back_with_its_messages(
    tmp_path: Path,
) -> None:
    """ElasticMQ binds its REST server first and restores the store afterwards, answering
    QueueDoesNotExist in between (the chaos burst's "ElasticMQ restarted on its persisted
    store: QueueDoesNotExist" on a loaded machine). Started with the store's queues named,
    the restart returns only when each is back: the first calls after it find every queue
    and every message, with no wait of their own."""
    import signal

    names = [f"q{i}" for i in range(8)]
    per_queue = 100
    port = servers.free_port()
    server = servers.start_elasticmq(port, tmp_path / "logs", tmp_path / "work", persist=True)
    try:
        sqs = SESSION.client("sqs", endpoint_url=server.endpoint, config=BOTO_CONFIG)
        urls = {n: sqs.create_queue(QueueName=n)["QueueUrl"] for n in names}
        for url in urls.values():
            for first in range(0, per_queue, 10):
                entries = [{"Id": str(i), "MessageBody": f"m{first + i}"} for i in range(10)]
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
        os.killpg(server.pid, signal.SIGKILL)
        server.proc.wait(timeout=10)
    finally:
        server.stop()
    again = servers.start_elasticmq(port, tmp_path / "logs2", tmp_path / "work", persist=True, restore=names)
    try:
        sqs = SESSION.client("sqs", endpoint_url=again.endpoint, config=BOTO_CONFIG)
        counts = {
            n: int(
                sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"][
                    "ApproximateNumberOfMessages"
                ]
            )
            for n, url in urls.items()
        }
        assert counts == dict.fromkeys(names, per_queue), (counts, os.getloadavg())
    finally:
        again.stop()
