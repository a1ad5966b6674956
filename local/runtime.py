"""A Lambda-like runtime for the local stack: loads the *same* handler modules the CDK
app deploys, with the layer on ``sys.path`` as ``/opt/python`` is on AWS, and invokes
them with a Lambda context.

One process can host several functions; each function's module is imported once per
process, so module-level state (clients, the in-process cache tier) behaves like one
warm execution environment per worker, as on Lambda.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import queue
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import blueprint

LAYER_PATH = str(blueprint.ROOT / "layers" / "racecap" / "python")
REGION = "us-east-1"
ACCOUNT = "000000000000"
# Set on a client the local stack uses to emulate AWS itself (the gateway's look at the
# provisioned floors, local/environments.py): tools/awscalls.py does not count its calls, which
# stand for nothing a deployment makes.
EMULATION_ATTR = "racecap_emulation"


def local_session() -> Any:
    """A boto3 session for the local servers: they check that a request is signed, not with
    which keys, and serve the stack's one region."""
    import boto3

    return boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION)  # noqa: S106


def install_layer_path() -> None:
    if LAYER_PATH not in sys.path:
        sys.path.insert(0, LAYER_PATH)


@dataclass
class LambdaContext:
    """The attributes Powertools and handlers read from the real Lambda context."""

    function_name: str
    memory_limit_in_mb: int
    timeout_s: float
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_s
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = f"local/{os.getpid()}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass(frozen=True)
class Timing:
    """One invocation's time, as the gateway reports it (``Server-Timing``)."""

    wait_s: float = 0.0  # waiting for an execution environment (a free one or a new one)
    handler_s: float = 0.0  # in the handler, its sleeps included
    sdk_sleep_s: float = 0.0  # of which asleep in botocore's retry backoffs
    limiter_s: float = 0.0  # ... held back by the adaptive mode's rate limiter
    own_sleep_s: float = 0.0  # ... asleep in our own retries
    sdk_retries: int = 0
    environment: int = 0  # the environment's process id (0: in the gateway's own process)
    gc_s: float = 0.0  # ... in Python's garbage collector (a whole process's, see _GcClock)

    @classmethod
    def of(cls, record: Any, *, wait_s: float, handler_s: float, gc_s: float = 0.0) -> Timing:
        return cls(
            wait_s=wait_s,
            handler_s=handler_s,
            gc_s=gc_s,
            sdk_sleep_s=record.sdk_sleep_s,
            limiter_s=record.limiter_wait_s,
            own_sleep_s=record.own_sleep_s,
            sdk_retries=record.sdk_retries,
            environment=os.getpid(),
        )

    def server_timing(self, gateway_s: float) -> str:
        """The ``Server-Timing`` header: durations in ms, as browsers and the burst read them."""
        parts = {
            "gateway": gateway_s,
            "env-wait": self.wait_s,
            "handler": self.handler_s,
            "sdk-sleep": self.sdk_sleep_s,
            "limiter": self.limiter_s,
            "own-sleep": self.own_sleep_s,
            "gc": self.gc_s,
        }
        durations = ", ".join(f"{k};dur={v * 1000:.1f}" for k, v in parts.items())
        return f"{durations}, sdk-retries;desc={self.sdk_retries}, env;desc={self.environment}"


class _GcClock:
    """Seconds this process has spent in the garbage collector (``gc.callbacks``): how much of a
    handler's time, and of its tail, is the collector's rather than its own work or its calls.
    Per process: exact in an environment (one invocation at a time), shared by the threads of
    the "shared" gateway model."""

    def __init__(self) -> None:
        self.total = 0.0
        self._started = 0.0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._started

    @classmethod
    def installed(cls) -> _GcClock:
        clock = next((c for c in gc.callbacks if isinstance(c, cls)), None)
        if clock is None:
            clock = cls()
            gc.callbacks.append(clock)
        return clock


def _deadline() -> Any:
    # The layer's module, as the handlers import it (the layer is on sys.path by then).
    from racecap import deadline

    return deadline


class FunctionHost:
    """Keeps warm "execution environments" per function and invokes handlers in them.

    As on Lambda, one environment serves one invocation at a time: concurrent requests
    get their own environment (a separate load of the handler module, a cold start),
    and a finished one goes back to the pool to be reused warm. Module-level state in a
    handler (Powertools' idempotency layer, for one) is therefore never shared between
    concurrent invocations, exactly as on AWS.
    """

    def __init__(self) -> None:
        install_layer_path()
        # The chaos burst's DynamoDB faults, when the stack was started with them (and only
        # then): below botocore's retries, before any handler creates a client.
        from local import faults

        faults.install_from_env()
        self._pools: dict[str, queue.LifoQueue[ModuleType]] = {}
        self._counts: dict[str, int] = {}
        self._gc = _GcClock.installed()
        self._lock = threading.Lock()

    def module(self, function_id: str) -> ModuleType:
        """One environment's module (for tests and the OpenAPI generator)."""
        env = self._acquire(function_id)
        self._pools[function_id].put(env)
        return env

    def handler(self, function_id: str) -> Any:
        return getattr(self.module(function_id), blueprint.function(function_id).attr)

    def invoke(self, function_id: str, event: Any) -> Any:
        return self.invoke_timed(function_id, event)[0]

    def invoke_timed(self, function_id: str, event: Any, timeout_s: float | None = None) -> tuple[Any, Timing]:
        """The handler's result, and where the invocation's time went (``timeout_s``: what is
        left of the function's timeout, when a suppressed init took some of it)."""
        fn = blueprint.function(function_id)
        t0 = time.monotonic()
        env = self._acquire(function_id)
        t1 = time.monotonic()
        record = _deadline().reset()
        gc_before = self._gc.total
        try:
            context = LambdaContext(fn.id, fn.memory_mb, fn.timeout_s if timeout_s is None else timeout_s)
            result = getattr(env, fn.attr)(event, context)
        finally:
            self._pools[function_id].put(env)
        gc_s = self._gc.total - gc_before
        return result, Timing.of(record, wait_s=t1 - t0, handler_s=time.monotonic() - t1, gc_s=gc_s)

    def _acquire(self, function_id: str) -> ModuleType:
        with self._lock:
            pool = self._pools.setdefault(function_id, queue.LifoQueue())
        try:
            return pool.get_nowait()
        except queue.Empty:
            with self._lock:
                n = self._counts.get(function_id, 0)
                self._counts[function_id] = n + 1
            return self._load(blueprint.function(function_id), n)

    @staticmethod
    def _load(fn: blueprint.Function, n: int) -> ModuleType:
        path = fn.path / f"{fn.module.replace('.', '/')}.py"
        # A unique module name per function and environment: every entry file is handler.py.
        name = f"racecap_fn_{fn.id}_{n}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
