"""The local Step Functions server (``local/stepfunctions/server.mjs``) driven by boto3.

A fake Lambda Invoke endpoint stands in for the local gateway, so these tests exercise
the server alone: the AWS JSON protocol, the ASL interpreter, Task states reaching
functions over HTTP, named function errors meeting ``Retry``/``Catch``, real waits,
StopExecution, and the real ``statemachines/registration_window.asl.json``.

Node >= 22 comes from ``RACECAP_NODE`` or the installer's ``.cache/node22``; the npm
modules from ``RACECAP_NODE_MODULES`` (default ``local/node/node_modules``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from local import servers

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "local" / "stepfunctions" / "server.mjs"
WINDOW_ASL = ROOT / "statemachines" / "registration_window.asl.json"
ACCOUNT = "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/racecap-local-sfn"
WINDOW_FUNCTION = "racecap-window-tasks"


def fn_arn(name: str) -> str:
    return f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:{name}"


# ---------------------------------------------------------------------------
# Finding Node >= 22 and the npm modules
# ---------------------------------------------------------------------------
def _node_major(binary: str) -> int | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"v(\d+)\.", out.stdout.strip())
    return int(m.group(1)) if m else None


def _find_node() -> tuple[str | None, str]:
    explicit = os.environ.get("RACECAP_NODE")
    if explicit:
        major = _node_major(explicit)
        if major is None or major < 22:
            return None, f"RACECAP_NODE={explicit} is not a Node >= 22 binary"
        return explicit, ""
    candidates = sorted((ROOT / ".cache" / "node22").glob("**/bin/node"))
    on_path = shutil.which("node")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        major = _node_major(str(candidate))
        if major is not None and major >= 22:
            return str(candidate), ""
    return None, "no Node >= 22 (set RACECAP_NODE, or install it into .cache/node22 with the local installer)"


def _modules_env() -> tuple[dict[str, str] | None, str]:
    modules = os.environ.get("RACECAP_NODE_MODULES", str(ROOT / "local" / "node" / "node_modules"))
    search = [modules, *filter(None, os.environ.get("NODE_PATH", "").split(os.pathsep))]
    if not any((Path(d) / "aws-local-stepfunctions" / "package.json").is_file() for d in search):
        return None, f"npm package aws-local-stepfunctions not installed in {modules} (or NODE_PATH)"
    return {**os.environ, "RACECAP_NODE_MODULES": modules}, ""


# ---------------------------------------------------------------------------
# A fake Lambda Invoke endpoint (what the local gateway serves)
# ---------------------------------------------------------------------------
@dataclass
class Call:
    function: str
    payload: Any
    at: float  # epoch seconds


@dataclass
class FakeLambda:
    url: str = ""
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls_to(self, function: str, **match: Any) -> list[Call]:
        with self.lock:
            return [
                c
                for c in self.calls
                if c.function == function
                and isinstance(c.payload, dict)
                and all(c.payload.get(k) == v for k, v in match.items())
            ]

    def respond(self, function: str, payload: Any) -> tuple[int, dict[str, str], Any]:
        """Canned behaviour per function: (status, extra headers, body)."""
        with self.lock:
            self.calls.append(Call(function, payload, time.time()))
            earlier = sum(1 for c in self.calls if c.function == function and c.payload == payload) - 1
        unhandled = {"X-Amz-Function-Error": "Unhandled"}
        if function == "racecap-greeter":
            return 200, {}, {"greeting": f"hello {payload['who']}"}
        if function == "racecap-double":
            return 200, {}, {"doubled": payload["n"] * 2}
        if function == "racecap-holds":
            return (
                200,
                unhandled,
                {
                    "errorType": "HoldsStillOpen",
                    "errorMessage": "3 holds are still open",
                    "stackTrace": [],
                },
            )
        if function == "racecap-flaky":
            if earlier == 0:
                return 200, unhandled, {"errorType": "TransientError", "errorMessage": "try again"}
            return 200, {}, {"ok": True, "attempt": earlier + 1}
        if function == WINDOW_FUNCTION:
            if payload.get("raceId") == "race-missing":
                return 200, unhandled, {"errorType": "RaceNotFound", "errorMessage": "no race race-missing"}
            if str(payload.get("raceId")).startswith("race-noscale") and payload.get("task") in ("prewarm", "cooldown"):
                return 200, unhandled, {"errorType": "WarmStartTargetMissing", "errorMessage": "no target"}
            return 200, {}, {"done": payload.get("task")}
        return (
            404,
            {"X-Amzn-ErrorType": "ResourceNotFoundException"},
            {
                "Type": "User",
                "message": f"Function not found: {function}",
            },
        )


def _fake_lambda_handler(fake: FakeLambda) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            m = re.fullmatch(r"/2015-03-31/functions/([^/]+)/invocations(\?.*)?", self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not m:
                status, headers, body = 404, {}, {"message": "not found"}
            else:
                payload = json.loads(raw) if raw else None
                status, headers, body = fake.respond(m.group(1), payload)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

    return Handler


@pytest.fixture(scope="module")
def fake_lambda() -> Iterator[FakeLambda]:
    fake = FakeLambda()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _fake_lambda_handler(fake))
    httpd.daemon_threads = True
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield fake
    httpd.shutdown()
    httpd.server_close()


# ---------------------------------------------------------------------------
# The server under test
# ---------------------------------------------------------------------------
@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def run_server(log_dir: Path, lambda_url: str, *extra: str) -> Iterator[Server]:
    node, why = _find_node()
    if node is None:
        pytest.skip(why)
    env, why = _modules_env()
    if env is None:
        pytest.skip(why)
    port = servers.free_port()
    log = log_dir / f"stepfunctions-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [node, str(SERVER), "--port", str(port), "--lambda-endpoint", lambda_url, *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = Server(proc, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"stepfunctions server exited with {proc.returncode}:\n{server.output()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"stepfunctions server did not listen on {port}:\n{server.output()}")
                time.sleep(0.05)
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def client(server: Server) -> Any:
    return boto3.client(
        "stepfunctions",
        endpoint_url=server.url,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


@pytest.fixture(scope="module")
def server(fake_lambda: FakeLambda, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with run_server(tmp_path_factory.mktemp("sfn"), fake_lambda.url) as srv:
        yield srv


@pytest.fixture(scope="module")
def sfn(server: Server) -> Any:
    return client(server)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(sfn: Any, definition: dict[str, Any] | str, name: str | None = None) -> str:
    text = definition if isinstance(definition, str) else json.dumps(definition)
    resp = sfn.create_state_machine(name=name or unique("sm"), definition=text, roleArn=ROLE)
    return str(resp["stateMachineArn"])


def start(sfn: Any, machine_arn: str, payload: Any, name: str | None = None) -> str:
    kwargs: dict[str, Any] = {"stateMachineArn": machine_arn, "input": json.dumps(payload)}
    if name:
        kwargs["name"] = name
    return str(sfn.start_execution(**kwargs)["executionArn"])


def wait_done(sfn: Any, execution_arn: str, timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        desc: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if desc["status"] != "RUNNING":
            return desc
        if time.monotonic() > deadline:
            pytest.fail(f"{execution_arn} still RUNNING after {timeout}s")
        time.sleep(0.1)


def history_types(sfn: Any, execution_arn: str, final: bool = True) -> list[str]:
    # For a finished execution the history ends with its Execution* event, which the
    # server appends once the interpreter's event log has caught up (a few ticks).
    deadline = time.monotonic() + 3
    while True:
        types = [e["type"] for e in sfn.get_execution_history(executionArn=execution_arn)["events"]]
        done = len(types) > 1 and types[-1].startswith("Execution")
        if not final or done or time.monotonic() > deadline:
            return types
        time.sleep(0.05)


def iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def window_definition() -> str:
    text = WINDOW_ASL.read_text()
    assert "${WindowTasksFunctionArn}" in text
    return text.replace("${WindowTasksFunctionArn}", fn_arn(WINDOW_FUNCTION))


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------
FLOW = {
    "Comment": "Pass, Choice, Wait and both Lambda Task forms",
    "StartAt": "Prepare",
    "States": {
        "Prepare": {"Type": "Pass", "Result": {"n": 21}, "ResultPath": "$.numbers", "Next": "Route"},
        "Route": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.kind", "StringEquals": "slow", "Next": "Pause"}],
            "Default": "Greet",
        },
        "Pause": {"Type": "Wait", "Seconds": 1, "Next": "Greet"},
        "Greet": {
            "Type": "Task",
            "Resource": fn_arn("racecap-greeter"),
            "Parameters": {"who.$": "$.who"},
            "ResultPath": "$.greeting",
            "Next": "Double",
        },
        "Double": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": fn_arn("racecap-double"), "Payload": {"n.$": "$.numbers.n"}},
            "ResultSelector": {"value.$": "$.Payload.doubled", "status.$": "$.StatusCode"},
            "ResultPath": "$.double",
            "Next": "Done",
        },
        "Done": {"Type": "Succeed"},
    },
}


def test_pass_choice_wait_and_tasks_succeed(sfn: Any, fake_lambda: FakeLambda) -> None:
    machine = create(sfn, FLOW)
    who = unique("runner")
    slow = start(sfn, machine, {"who": who, "kind": "slow"})
    fast = start(sfn, machine, {"who": who, "kind": "fast"})
    # StartExecution returns at once; the executions run in the background.
    assert sfn.describe_execution(executionArn=slow)["status"] == "RUNNING"

    desc = wait_done(sfn, slow)
    assert desc["status"] == "SUCCEEDED", desc
    assert json.loads(desc["output"]) == {
        "who": who,
        "kind": "slow",
        "numbers": {"n": 21},
        "greeting": {"greeting": f"hello {who}"},
        "double": {"value": 42, "status": 200},
    }
    assert (desc["stopDate"] - desc["startDate"]).total_seconds() >= 1.0  # the Wait really waited
    assert json.loads(desc["input"]) == {"who": who, "kind": "slow"}

    desc_fast = wait_done(sfn, fast)
    assert desc_fast["status"] == "SUCCEEDED"
    # Choice skipped the Wait: its history, not its duration (a loaded machine can take a second
    # for the tasks alone).
    assert "WaitStateEntered" not in history_types(sfn, fast), history_types(sfn, fast)
    assert "WaitStateEntered" in history_types(sfn, slow)

    # The functions got the Task payloads (Parameters applied; lambda:invoke sends Payload).
    assert [c.payload for c in fake_lambda.calls_to("racecap-greeter", who=who)] == [{"who": who}] * 2
    assert {"n": 21} in [c.payload for c in fake_lambda.calls_to("racecap-double")]

    types = history_types(sfn, slow)
    assert types[0] == "ExecutionStarted"
    assert types[-1] == "ExecutionSucceeded"
    assert [t for t in types if t.endswith("StateEntered")] == [
        "PassStateEntered",
        "ChoiceStateEntered",
        "WaitStateEntered",
        "TaskStateEntered",
        "TaskStateEntered",
        "SucceedStateEntered",
    ]
    assert "WaitStateEntered" not in history_types(sfn, fast)

    listed = sfn.list_executions(stateMachineArn=machine, statusFilter="SUCCEEDED")["executions"]
    assert {e["executionArn"] for e in listed} == {slow, fast}


def test_named_function_error_is_caught_by_name(sfn: Any) -> None:
    machine = create(
        sfn,
        {
            "StartAt": "ReleaseHolds",
            "States": {
                "ReleaseHolds": {
                    "Type": "Task",
                    "Resource": fn_arn("racecap-holds"),
                    "Catch": [
                        {"ErrorEquals": ["SomethingElse"], "Next": "Wrong"},
                        {"ErrorEquals": ["HoldsStillOpen"], "ResultPath": "$.error", "Next": "Report"},
                    ],
                    "Next": "Wrong",
                },
                "Report": {"Type": "Pass", "End": True},
                "Wrong": {"Type": "Fail", "Error": "WrongBranch"},
            },
        },
    )
    desc = wait_done(sfn, start(sfn, machine, {"raceId": "r1"}))
    assert desc["status"] == "SUCCEEDED", desc
    out = json.loads(desc["output"])
    assert out["raceId"] == "r1"
    assert out["error"]["Error"] == "HoldsStillOpen"
    # As on AWS, the Cause is the function's error payload as a JSON string.
    assert json.loads(out["error"]["Cause"])["errorMessage"] == "3 holds are still open"


def test_uncaught_named_error_fails_the_execution(sfn: Any) -> None:
    machine = create(
        sfn,
        {
            "StartAt": "ReleaseHolds",
            "States": {"ReleaseHolds": {"Type": "Task", "Resource": fn_arn("racecap-holds"), "End": True}},
        },
    )
    execution = start(sfn, machine, {})
    desc = wait_done(sfn, execution)
    assert desc["status"] == "FAILED"
    assert desc["error"] == "HoldsStillOpen"
    assert "3 holds are still open" in desc["cause"]
    assert "output" not in desc
    assert "TaskFailed" in history_types(sfn, execution)
    assert history_types(sfn, execution)[-1] == "ExecutionFailed"


def test_retry_on_transient_named_error_succeeds_second_time(sfn: Any, fake_lambda: FakeLambda) -> None:
    machine = create(
        sfn,
        {
            "StartAt": "Flaky",
            "States": {
                "Flaky": {
                    "Type": "Task",
                    "Resource": fn_arn("racecap-flaky"),
                    "Parameters": {"key.$": "$$.Execution.Name"},
                    "Retry": [
                        {"ErrorEquals": ["SomethingElse"], "MaxAttempts": 5},
                        {"ErrorEquals": ["TransientError"], "IntervalSeconds": 1, "MaxAttempts": 2},
                    ],
                    "End": True,
                }
            },
        },
    )
    name = unique("flaky")
    desc = wait_done(sfn, start(sfn, machine, {}, name=name))
    assert desc["status"] == "SUCCEEDED", desc
    assert json.loads(desc["output"]) == {"ok": True, "attempt": 2}
    calls = fake_lambda.calls_to("racecap-flaky", key=name)
    assert len(calls) == 2
    assert calls[1].at - calls[0].at >= 0.9  # IntervalSeconds honoured


def test_gateway_and_resource_errors(sfn: Any) -> None:
    missing = create(
        sfn,
        {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": fn_arn("racecap-nope"), "End": True}}},
    )
    desc = wait_done(sfn, start(sfn, missing, {}))
    assert (desc["status"], desc["error"]) == ("FAILED", "Lambda.ResourceNotFoundException")

    # Only Lambda resources are served locally; anything else fails instead of reaching AWS.
    sqs = create(
        sfn,
        {
            "StartAt": "Send",
            "States": {
                "Send": {
                    "Type": "Task",
                    "Resource": "arn:aws:states:::sqs:sendMessage",
                    "Parameters": {"QueueUrl": "http://127.0.0.1:1/q", "MessageBody": "x"},
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                    "End": True,
                },
                "Caught": {"Type": "Pass", "End": True},
            },
        },
    )
    desc = wait_done(sfn, start(sfn, sqs, {}))
    assert (desc["status"], desc["error"]) == ("FAILED", "States.Runtime")
    assert "not supported" in desc["cause"]


def test_stop_execution_aborts_a_waiting_execution(sfn: Any, fake_lambda: FakeLambda) -> None:
    machine = create(
        sfn,
        {
            "StartAt": "Sleep",
            "States": {
                "Sleep": {"Type": "Wait", "Seconds": 30, "Next": "After"},
                "After": {"Type": "Task", "Resource": fn_arn("racecap-greeter"), "End": True},
            },
        },
    )
    who = unique("never")
    execution = start(sfn, machine, {"who": who})
    deadline = time.monotonic() + 20  # within a second when quiet; far above a loaded machine
    while "WaitStateEntered" not in history_types(sfn, execution, final=False):
        assert time.monotonic() < deadline, f"never reached the Wait state; {machine()}"
        time.sleep(0.05)

    stopped = sfn.stop_execution(executionArn=execution, error="Admin.Reschedule", cause="window moved")
    assert stopped["stopDate"]
    desc = sfn.describe_execution(executionArn=execution)
    assert desc["status"] == "ABORTED"
    assert (desc["error"], desc["cause"]) == ("Admin.Reschedule", "window moved")
    # Stopped, not waited out: before the Wait's 30 s ran (the test's 20-s bound above, plus the stop).
    assert (desc["stopDate"] - desc["startDate"]).total_seconds() < 30, (desc, machine())

    aborted = sfn.list_executions(stateMachineArn=machine, statusFilter="ABORTED")["executions"]
    assert [e["executionArn"] for e in aborted] == [execution]
    assert sfn.list_executions(stateMachineArn=machine, statusFilter="RUNNING")["executions"] == []
    assert history_types(sfn, execution)[-1] == "ExecutionAborted"
    time.sleep(0.5)
    assert fake_lambda.calls_to("racecap-greeter", who=who) == []  # nothing ran after the Wait
    assert sfn.describe_execution(executionArn=execution)["status"] == "ABORTED"


def test_registration_window_runs_its_tasks_at_their_times(sfn: Any, fake_lambda: FakeLambda) -> None:
    machine = create(sfn, window_definition(), name=unique("racecap-registration-window"))
    described = sfn.describe_state_machine(stateMachineArn=machine)
    assert described["status"] == "ACTIVE"
    assert json.loads(described["definition"])["StartAt"] == "WaitForWarmUp"

    race = unique("race")
    now = datetime.now(UTC)
    times = {"warm": now + timedelta(seconds=1), "open": now + timedelta(seconds=2)}
    times["cool"], times["close"] = now + timedelta(seconds=2.5), now + timedelta(seconds=3)
    times["prewarm"], times["cooldown"] = times["warm"], times["cool"]
    window = {
        "raceId": race,
        "warmUpAt": iso(times["warm"]),
        "opensAt": iso(times["open"]),
        "coolDownAt": iso(times["cool"]),
        "closesAt": iso(times["close"]),
    }
    execution = start(sfn, machine, window)
    time.sleep(0.5)
    assert fake_lambda.calls_to(WINDOW_FUNCTION, raceId=race) == []  # still waiting for warm-up

    desc = wait_done(sfn, execution)
    assert desc["status"] == "SUCCEEDED", desc
    assert json.loads(desc["output"]) == window  # every Task has ResultPath null

    calls = fake_lambda.calls_to(WINDOW_FUNCTION, raceId=race)
    name = execution.rsplit(":", 1)[-1]  # each task names its execution ($$.Execution.Name)
    assert [c.payload for c in calls] == [
        {"task": t, "raceId": race, "execution": name}
        | ({"coolDownAt": window["coolDownAt"]} if t == "prewarm" else {})
        for t in ("warm", "prewarm", "open", "cooldown", "close")
    ]
    for call in calls:
        due = times[call.payload["task"]].timestamp()
        assert due - 0.05 <= call.at < due + 1.0, (call, due)

    entered = [t for t in history_types(sfn, execution) if t.endswith("StateEntered")]
    wait, task = "WaitStateEntered", "TaskStateEntered"
    assert entered == [wait, task, task, wait, task, wait, task, wait, task, "SucceedStateEntered"]


def test_a_failed_pre_warm_or_cool_down_never_stops_the_window(sfn: Any, fake_lambda: FakeLambda) -> None:
    machine = create(sfn, window_definition())
    race = unique("race-noscale")
    now = iso(datetime.now(UTC))
    window = {"raceId": race, "warmUpAt": now, "opensAt": now, "coolDownAt": now, "closesAt": now}
    desc = wait_done(sfn, start(sfn, machine, window))
    assert desc["status"] == "SUCCEEDED", desc
    tasks = [c.payload["task"] for c in fake_lambda.calls_to(WINDOW_FUNCTION, raceId=race)]
    assert tasks == ["warm", "prewarm", "open", "cooldown", "close"]  # no retries of a task error
    output = json.loads(desc["output"])
    assert output["prewarmFailure"]["Error"] == output["cooldownFailure"]["Error"] == "WarmStartTargetMissing"
    assert {k: output[k] for k in window} == window


def test_registration_window_task_error_ends_in_window_failed(sfn: Any, fake_lambda: FakeLambda) -> None:
    machine = create(sfn, window_definition())
    past = iso(datetime.now(UTC) - timedelta(minutes=1))
    execution = start(
        sfn,
        machine,
        {"raceId": "race-missing", "warmUpAt": past, "opensAt": past, "coolDownAt": past, "closesAt": past},
    )
    desc = wait_done(sfn, execution)
    assert desc["status"] == "FAILED"
    assert desc["error"] == "RaceNotFound"  # WindowFailed reports the task's error
    assert json.loads(desc["cause"])["errorMessage"] == "no race race-missing"
    types = history_types(sfn, execution)
    assert "FailStateEntered" in types
    assert types.count("TaskStateEntered") == 1  # not a retried error


def test_registration_window_open_now_by_restarting(sfn: Any, fake_lambda: FakeLambda) -> None:
    """Months-away times really wait (beyond setTimeout's 24.8-day limit); 'open now' is
    StopExecution plus a new execution with the new times."""
    machine = create(sfn, window_definition())
    race = unique("race")
    now = datetime.now(UTC)
    first = start(
        sfn,
        machine,
        {
            "raceId": race,
            "warmUpAt": iso(now - timedelta(seconds=1)),
            "opensAt": iso(now + timedelta(days=60)),
            "coolDownAt": iso(now + timedelta(days=60, minutes=30)),
            "closesAt": iso(now + timedelta(days=90)),
        },
    )
    deadline = time.monotonic() + 5
    while not fake_lambda.calls_to(WINDOW_FUNCTION, raceId=race, task="prewarm"):
        assert time.monotonic() < deadline, "warm-up and pre-warm never ran"
        time.sleep(0.05)
    time.sleep(0.5)
    assert sfn.describe_execution(executionArn=first)["status"] == "RUNNING"
    assert fake_lambda.calls_to(WINDOW_FUNCTION, raceId=race, task="open") == []

    sfn.stop_execution(executionArn=first, cause="opened now by the race director")
    now = datetime.now(UTC)
    second = start(
        sfn,
        machine,
        {
            "raceId": race,
            "warmUpAt": iso(now),
            "opensAt": iso(now),
            "coolDownAt": iso(now + timedelta(seconds=1)),
            "closesAt": iso(now + timedelta(seconds=1)),
        },
    )
    assert wait_done(sfn, second)["status"] == "SUCCEEDED"
    assert sfn.describe_execution(executionArn=first)["status"] == "ABORTED"
    tasks = [c.payload["task"] for c in fake_lambda.calls_to(WINDOW_FUNCTION, raceId=race)]
    assert tasks == ["warm", "prewarm", "warm", "prewarm", "open", "cooldown", "close"]


def test_api_errors_and_idempotency(sfn: Any) -> None:
    name = unique("api")
    definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    arn = create(sfn, definition, name=name)
    assert arn == f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:{name}"
    assert create(sfn, definition, name=name) == arn  # identical definition: idempotent
    with pytest.raises(ClientError) as err:
        create(sfn, {"StartAt": "Q", "States": {"Q": {"Type": "Pass", "End": True}}}, name=name)
    assert err.value.response["Error"]["Code"] == "StateMachineAlreadyExists"

    assert name in {m["name"] for m in sfn.list_state_machines()["stateMachines"]}

    with pytest.raises(sfn.exceptions.StateMachineDoesNotExist):
        sfn.describe_state_machine(stateMachineArn=arn + "-nope")
    with pytest.raises(sfn.exceptions.StateMachineDoesNotExist):
        sfn.start_execution(stateMachineArn=arn + "-nope", input="{}")
    with pytest.raises(sfn.exceptions.ExecutionDoesNotExist):
        sfn.describe_execution(executionArn=f"arn:aws:states:us-east-1:{ACCOUNT}:execution:{name}:nope")
    with pytest.raises(sfn.exceptions.InvalidDefinition):
        create(sfn, {"StartAt": "Missing", "States": {"P": {"Type": "Pass", "End": True}}})
    with pytest.raises(sfn.exceptions.InvalidDefinition):
        create(sfn, "{not json")
    with pytest.raises(sfn.exceptions.InvalidExecutionInput):
        sfn.start_execution(stateMachineArn=arn, input="{not json")

    execution = start(sfn, arn, {"a": 1}, name="once")
    assert execution.endswith(":once")
    wait_done(sfn, execution)
    with pytest.raises(sfn.exceptions.ExecutionAlreadyExists):
        start(sfn, arn, {"a": 2}, name="once")


def test_wait_scale_and_sigterm(fake_lambda: FakeLambda, tmp_path: Path) -> None:
    with run_server(tmp_path, fake_lambda.url, "--wait-scale", "0.1") as srv:
        sfn = client(srv)
        machine = create(
            sfn,
            {
                "StartAt": "Ten",
                "States": {
                    "Ten": {"Type": "Wait", "Seconds": 10, "Next": "Until"},
                    "Until": {"Type": "Wait", "TimestampPath": "$.at", "Next": "Hang"},
                    "Hang": {"Type": "Wait", "Seconds": 600, "End": True},
                },
            },
        )
        execution = start(sfn, machine, {"at": iso(datetime.now(UTC) + timedelta(seconds=10))})
        deadline = time.monotonic() + 6  # 10 s + ~10 s scaled by 0.1 is ~2 s
        while history_types(sfn, execution, final=False).count("WaitStateEntered") < 3:
            assert time.monotonic() < deadline, history_types(sfn, execution, final=False)
            time.sleep(0.05)
        assert sfn.describe_execution(executionArn=execution)["status"] == "RUNNING"

        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=5) == 0
        out = srv.output()
        assert "SIGTERM" in out
        assert re.search(r"execution started .*:" + re.escape(execution.rsplit(":", 1)[1]), out)
        assert re.search(r"execution aborted .*:" + re.escape(execution.rsplit(":", 1)[1]), out)
