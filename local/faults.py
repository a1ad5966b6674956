"""DynamoDB faults for the chaos burst: throttling and transaction conflicts, which
DynamoDB Local never produces, injected under the *unchanged* handlers.

The stack turns this on only when asked (``LocalStack(faults_dir=…)`` sets
``RACECAP_FAULTS_DIR`` for the gateway and the pollers); the function host calls
``install_from_env()`` before any handler module is loaded. Nothing in ``racecap`` knows
about it: the hook is a botocore ``before-send`` handler added to the handlers every new
botocore session registers, so it sits *below* the SDK's retry logic, where a real
DynamoDB answer arrives. A throttle is therefore retried by the SDK (adaptive mode) as on
AWS; a ``TransactionCanceledException`` [TransactionConflict] goes on to our own
``aws/retry.py``, as on AWS.

The directory is the switch, read at most every ``RELOAD_S``:

    <dir>/faults.json     {"throttle": 0.1, "conflict": 0.1}  present = on; absent = off
    <dir>/injected.jsonl  one line per injected fault (appended by every process)

so a burst can turn the faults on after its warm-up and off when the runners are done,
and count afterwards what really hit. Every process appends whole short lines with
``O_APPEND``: one ``write`` each, so lines from concurrent processes never interleave.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import botocore.handlers
from botocore.awsrequest import AWSResponse, HTTPHeaders

ENV_VAR = "RACECAP_FAULTS_DIR"
SWITCH = "faults.json"
LOG = "injected.jsonl"
RELOAD_S = 0.5
_DYNAMO_JSON = "application/x-amz-json-1.0"


class _Body:
    """The raw stream AWSResponse reads its content from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


def _answer(code: str, message: str, **extra: Any) -> AWSResponse:
    """An HTTP 400 exactly as DynamoDB sends one (the JSON protocol's ``__type``)."""
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra})
    headers = HTTPHeaders()
    headers["Content-Type"] = _DYNAMO_JSON
    headers["x-amzn-RequestId"] = f"injected-{random.getrandbits(48):012x}"
    return AWSResponse("http://injected", 400, headers, _Body(body.encode()))


def throttling() -> AWSResponse:
    return _answer("ThrottlingException", "Rate of requests exceeds the allowed throughput.")


def transaction_conflict(n_items: int) -> AWSResponse:
    """DynamoDB's answer when another transaction holds one of the items: one reason per
    item, ``TransactionConflict`` on one of them and ``None`` on the rest."""
    hit = random.randrange(max(1, n_items))
    reasons = [
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
        if i == hit
        else {"Code": "None"}
        for i in range(max(1, n_items))
    ]
    codes = ", ".join(r["Code"] for r in reasons)
    return _answer(
        "TransactionCanceledException",
        f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
        CancellationReasons=reasons,
    )


class Injector:
    """The ``before-send.dynamodb`` hook: reads the switch, rolls the dice, logs what hit."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._lock = threading.Lock()
        self._checked = 0.0
        self._config: dict[str, float] = {}
        self._rng = random.Random()  # fault dice, not secrets

    def config(self) -> dict[str, float]:
        now = time.monotonic()
        with self._lock:
            if now - self._checked >= RELOAD_S:
                self._checked = now
                try:
                    raw = json.loads((self.dir / SWITCH).read_text())
                    self._config = {k: float(v) for k, v in raw.items() if isinstance(v, int | float)}
                except (OSError, ValueError):
                    self._config = {}
            return self._config

    def __call__(self, request: Any = None, event_name: str = "", **_: Any) -> AWSResponse | None:
        cfg = self.config()
        if not cfg:
            return None
        operation = event_name.rsplit(".", 1)[-1]
        if operation == "TransactWriteItems" and self._rng.random() < cfg.get("conflict", 0.0):
            self._log("conflict", operation)
            return transaction_conflict(_items_in(request))
        if self._rng.random() < cfg.get("throttle", 0.0):
            self._log("throttle", operation)
            return throttling()
        return None

    def _log(self, kind: str, operation: str) -> None:
        line = json.dumps({"t": time.time(), "kind": kind, "op": operation, "pid": os.getpid()}) + "\n"
        try:
            fd = os.open(self.dir / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # the count is the report's; a lost line must not change what the handler sees


def _items_in(request: Any) -> int:
    try:
        return len(json.loads(request.body)["TransactItems"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return 1


_installed: Injector | None = None


def install(directory: Path) -> Injector:
    """Register the hook on every botocore session created from now on (once per process)."""
    global _installed
    if _installed is None:
        _installed = Injector(directory)
        botocore.handlers.BUILTIN_HANDLERS.append(("before-send.dynamodb", _installed))
    return _installed


def install_from_env() -> Injector | None:
    directory = os.environ.get(ENV_VAR)
    return install(Path(directory)) if directory else None


# -- what the chaos burst reads and writes --------------------------------------------------------
def switch_on(directory: Path, *, throttle: float, conflict: float) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{SWITCH}.tmp"
    tmp.write_text(json.dumps({"throttle": throttle, "conflict": conflict}))
    os.replace(tmp, directory / SWITCH)  # atomic: a reader sees the old or the new file


def switch_off(directory: Path) -> None:
    (directory / SWITCH).unlink(missing_ok=True)


def injected(directory: Path) -> list[dict[str, Any]]:
    path = directory / LOG
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
