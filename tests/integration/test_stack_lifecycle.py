"""`make run`'s stack: starts, seeds, answers, stops everything on Ctrl-C, refuses clashes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

import blueprint
from local.servers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3 * 300)]

# Bounds on a start, a refusal and a stop: they catch hangs, not slowness. At load 25-30 on
# two cores, a `make run` took over 120 s to say it was ready and a refused second one
# over 60 s to import and answer.
STARTUP_S = 300  # each; the tests' own bound is three of them
PORT_VARS = {
    "gateway": "RACECAP_PORT",
    "dynamodb": "RACECAP_DYNAMODB_PORT",
    "sqs": "RACECAP_SQS_PORT",
    "redis": "RACECAP_REDIS_PORT",
    "ses": "RACECAP_SES_PORT",
    "sfn": "RACECAP_SFN_PORT",
    "stripe": "RACECAP_STRIPE_PORT",
    "s3": "RACECAP_S3_PORT",
    "edge": "RACECAP_EDGE_PORT",
}


def _env(ports: dict[str, int]) -> dict[str, str]:
    env = {**os.environ, **{PORT_VARS[k]: str(v) for k, v in ports.items()}}
    env["PYTHONPATH"] = str(blueprint.ROOT)
    return env


def _descendants(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        p, pp = (int(x) for x in line.split())
        children.setdefault(pp, []).append(p)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _kill_tree(pid: int) -> None:
    for p in _descendants(pid) | {pid}:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.add(pid)
        except OSError:
            pass
    return alive


def test_make_run_starts_seeds_and_stops_everything_on_ctrl_c(tmp_path: Path):
    ports = {name: free_port() for name in PORT_VARS}
    proc = subprocess.Popen(
        [sys.executable, "-m", "local.stack", "run", "--work-dir", str(tmp_path)],
        cwd=blueprint.ROOT,
        env=_env(ports),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + STARTUP_S
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "Press Ctrl-C to stop" in line or not line:
                break
        output = "".join(lines)
        assert "Racecap is running at" in output, output
        url = f"http://127.0.0.1:{ports['gateway']}"
        races = requests.get(f"{url}/api/races", timeout=30).json()["races"]
        assert [r["name"] for r in races] == ["Racecap City Marathon"]
        race = requests.get(f"{url}/api/races/{races[0]['raceId']}", timeout=30).json()
        assert len(race["events"]) == 4
        assert race["status"] == "OPEN"
        children = _descendants(proc.pid)
        assert len(children) >= 7  # the servers, the gateway (and its workers), the pollers

        # A second `make run` with the same work dir is refused with a sentence.
        second = subprocess.run(
            [sys.executable, "-m", "local.stack", "run", "--work-dir", str(tmp_path)],
            cwd=blueprint.ROOT,
            env=_env(ports),
            capture_output=True,
            check=False,
            text=True,
            timeout=STARTUP_S,
        )
        assert second.returncode != 0
        assert "already running" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=STARTUP_S)
        except subprocess.TimeoutExpired:
            # A stack left running (its stdout pipe unread) outlived a failed run by an hour.
            _kill_tree(proc.pid)
            raise
    assert proc.returncode == 0
    assert "nothing left running" in rest
    time.sleep(0.5)
    assert _alive(children) == set()


def test_a_taken_port_is_a_clear_message_not_a_stack_trace(tmp_path: Path):
    ports = {name: free_port() for name in PORT_VARS}
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports["redis"]))
        squatter.listen()
        result = subprocess.run(
            [sys.executable, "-m", "local.stack", "run", "--work-dir", str(tmp_path), "--no-seed"],
            cwd=blueprint.ROOT,
            env=_env(ports),
            capture_output=True,
            check=False,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert f"port {ports['redis']}" in result.stderr
    assert "RACECAP_REDIS_PORT" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("pollers_killed_first", [False, True], ids=["stack", "pollers-then-stack"])
def test_a_stack_killed_hard_leaves_no_process_behind(tmp_path: Path, pollers_killed_first: bool):
    # As a closing terminal or a timed-out job stops `make run`: SIGTERM, then SIGKILL a
    # moment later, before the stack can stop anything itself. Every child must die with
    # it (parent-death signals), and every one of their own shutdown waits is bounded.
    # The second case SIGKILLs the pollers' own process first (as the OOM killer might):
    # its forked pollers then get no SIGTERM from it, only their own parent-death signal.
    ports = {name: free_port() for name in PORT_VARS}
    proc = subprocess.Popen(
        [sys.executable, "-m", "local.stack", "run", "--no-seed", "--work-dir", str(tmp_path)],
        cwd=blueprint.ROOT,
        env=_env(ports),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_S
        assert proc.stdout is not None
        said: list[str] = []  # what the stack printed: the failure's own account if it never served
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            said.append(line)
            if "Press Ctrl-C to stop" in line or not line:
                break
        url = f"http://127.0.0.1:{ports['gateway']}"
        try:
            served = requests.get(f"{url}/api/races", timeout=30).status_code
        except requests.ConnectionError as exc:
            raise AssertionError(f"the stack never served (exit {proc.poll()}): {''.join(said[-30:])}") from exc
        assert served == 200
        children = _descendants(proc.pid)
        pollers = [p for p in children if "local.pollers" in _cmdline(p) or _cmdline(p) == ""]
        assert len(children) >= 7 and pollers, children
        if pollers_killed_first:
            # The pollers' main process is the stack's own child; its forks share its cmdline.
            (main,) = [p for p in children if "local.pollers" in _cmdline(p) and _parent(p) == proc.pid]
            os.kill(main, signal.SIGKILL)
            time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.kill()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30  # the slowest child's bounded shutdown, under load
    while _alive(children) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = {pid: _cmdline(pid) for pid in _alive(children)}
    for pid in left:  # never leave them to the next test run
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert left == {}


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state letter


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
