"""Execution environments as Lambda runs them, for the local gateway (issue 31).

Lambda gives every concurrent invocation of a function its own execution environment, up to
the function's concurrency; a finished environment is reused warm, an idle one is reclaimed.
The gateway used to be 8 single-thread gunicorn processes shared by every function: a
handler asleep in a retry took an eighth of the local "cloud", and every other request
queued behind it.

Here one gateway process serves HTTP on many threads, and each invocation runs in an
environment of its own: a child process that loads the function's handler once and then
serves one invocation at a time, so two invocations never share module state (Powertools'
metrics, the SDK clients, the in-process cache), as on AWS. Per function:

* at most ``concurrency(fn)`` environments: the blueprint's reserved concurrency, or
  ``LOCAL_CONCURRENCY`` (an account's unreserved pool is 1,000 on AWS; 2 shared cores
  are not, so the local default bounds memory and CPU: 16, measured against 4 and 8 in
  issue 38's entry of the measurements log — 4 queues an opening, 8 and 16 are alike). A
  request beyond it waits for an environment, and the wait is reported (``Timing.wait_s``,
  Server-Timing ``env-wait``);
* created on demand (a cold start) and reused warm, most recently used first, so a quiet
  function keeps few warm environments; one idle for ``IDLE_S`` is stopped;
* forked from a server process that has imported the SDK, Powertools and pydantic once
  (``multiprocessing``'s forkserver), so a cold start costs the handler's own init, not
  the interpreter's;
* an invocation past the function's timeout ends its environment, as Lambda does;
* SnapStart, as far as a fork can have it: a SnapStart function's environments, once
  initialised, are not stopped when idle (on AWS a new one restores the snapshot rather than
  running the init again; here keeping the initialised one spares the cores that init);
* provisioned concurrency, as the deployed stage has it: the floor the registration window's
  pre-warm sets on the function's scalable target (Application Auto Scaling, moto's locally;
  ``local/provision.py``) is read every ``PROVISIONED_POLL_S`` and that many environments are
  initialised ahead of any request (one after another, as AWS allocates them over a while, within
  the local concurrency) and kept however long they stay idle, until the floor comes down.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import blueprint
from local.provision import warm_start_target
from local.runtime import EMULATION_ATTR, FunctionHost, Timing, install_layer_path

log = logging.getLogger("racecap.local.environments")

LOCAL_CONCURRENCY = int(os.environ.get("RACECAP_LOCAL_CONCURRENCY", "16"))
IDLE_S = 120.0
PROVISIONED_POLL_S = 2.0
# Lambda's limit on an on-demand init. An init past it is not fatal on Lambda: it is retried in
# the first invocation, bounded by the function's timeout ("suppressed init", the execution
# environment lifecycle in the Lambda developer guide). Here the same init carries on for that
# long instead of starting again (the same bound, without redoing the work on a loaded machine),
# and the time past the 10 s comes out of that first invocation's timeout.
INIT_TIMEOUT_S = 10.0
# Imported once by the forkserver; each environment starts as a fork of it. Libraries
# only: nothing here reads the environment's settings or builds a client.
PRELOAD = [
    "botocore.session",
    "botocore.client",
    "botocore.config",
    "botocore.retries.standard",
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.tracing",
    "pydantic",
    "redis",
    "local.frozen_preload",  # last: freezes all of the above (see its docstring)
]


def concurrency(fn: blueprint.Function) -> int:
    return fn.reserved_concurrency or LOCAL_CONCURRENCY


class FunctionError(Exception):
    """A handler's exception, re-raised in the gateway under its class name (for the Invoke
    API's X-Amz-Function-Error and Step Functions' ErrorEquals)."""


def _error(type_name: str, message: str) -> Exception:
    return type(type_name, (FunctionError,), {})(message)


def _serve(function_id: str, conn: Connection, init_type: str) -> None:
    """An environment: load the function once, then one invocation at a time until told to stop."""
    # What Lambda tells an init about itself: a provisioned environment's init builds the SDK
    # clients ahead of its first request (racecap.clients.prime), an on-demand one does not.
    os.environ["AWS_LAMBDA_INITIALIZATION_TYPE"] = init_type
    install_layer_path()
    host = FunctionHost()  # installs the chaos faults hook (when asked) before the handler loads
    host.module(function_id)  # the init, before the first invocation
    conn.send("ready")
    while True:
        try:
            event = conn.recv()
        except EOFError:
            return
        if event is None:
            return
        event, timeout_s = event
        try:
            result, timing = host.invoke_timed(function_id, event, timeout_s=timeout_s)
            conn.send(("ok", result, timing))
        except Exception as exc:
            traceback.print_exc()
            conn.send(("error", type(exc).__name__, str(exc)))


class Environment:
    def __init__(self, ctx: Any, fn: blueprint.Function, init_type: str = "on-demand") -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(fn.id, child, init_type), daemon=True, name=f"env-{fn.id}")
        t0 = time.monotonic()
        self.process.start()
        child.close()
        # The cold start: the request that made this environment waits for its init, as on
        # Lambda (and the wait is reported as env-wait). A failed init fails that request.
        in_time = self.conn.poll(INIT_TIMEOUT_S + fn.timeout_s)
        try:
            ready = in_time and self.conn.recv() == "ready"
        except EOFError:  # the init raised: its traceback is in the gateway's log
            ready = False
        if not ready:
            self.process.kill()
            self.process.join(timeout=1)
            if not in_time:  # the retried init ran past the function's timeout: Lambda's timeout error
                raise TimeoutError(f"{fn.id}: the init ran past {INIT_TIMEOUT_S:.0f} s and the function's timeout")
            raise RuntimeError(f"{fn.id}: the environment's init did not finish")
        # A suppressed init's overrun, charged to the first invocation (see INIT_TIMEOUT_S).
        self.init_overrun_s = max(0.0, time.monotonic() - t0 - INIT_TIMEOUT_S)
        self.last_used = time.monotonic()

    def invoke(self, event: Any, timeout_s: float) -> tuple[Any, Timing]:
        """One invocation, ended at ``timeout_s`` less what a suppressed init already took."""
        timeout_s, self.init_overrun_s = max(0.0, timeout_s - self.init_overrun_s), 0.0
        self.conn.send((event, timeout_s))
        # A second past the function's own deadline: the environment's context ends first.
        if not self.conn.poll(timeout_s + 1):
            raise TimeoutError(f"the invocation ran past the function's {timeout_s:.0f}-s timeout")
        answer = self.conn.recv()
        if answer[0] == "ok":
            return answer[1], answer[2]
        raise _error(answer[1], answer[2])

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=1)
        self.conn.close()


class _Pool:
    def __init__(self, ctx: Any, fn: blueprint.Function) -> None:
        self.ctx = ctx
        self.fn = fn
        self.limit = concurrency(fn)
        self.idle: list[Environment] = []  # most recently used last
        self.count = 0
        # SnapStart: on AWS a new environment restores the function's snapshot instead of running
        # its init. A fork here cannot restore a process, so an environment once initialised is
        # kept instead (what the init cost is never paid again: memory, not the cores' time).
        self.restorable = fn.warm_start == "snapstart"
        self.floor = 0  # provisioned environments: never reaped below this many
        self.provisioning = False  # a thread is initialising environments up to the floor
        self.cond = threading.Condition()

    def acquire(self) -> Environment:
        with self.cond:
            while not self.idle and self.count >= self.limit:
                self.cond.wait()
            if self.idle:
                return self.idle.pop()
            self.count += 1
        try:
            return Environment(self.ctx, self.fn)
        except BaseException:
            self._gone()
            raise

    def release(self, env: Environment) -> None:
        env.last_used = time.monotonic()
        with self.cond:
            stale = [] if self.restorable else [e for e in self.idle if env.last_used - e.last_used > IDLE_S]
            stale = stale[: max(0, self.count - self.floor)]  # the oldest first; provisioned ones stay
            self.idle = [e for e in self.idle if e not in stale]
            self.count -= len(stale)
            self.idle.append(env)
            self.cond.notify_all()
        for e in stale:
            e.stop()

    def provision(self, floor: int) -> None:
        """Keep at least ``floor`` environments (within the pool's limit), initialising the
        missing ones in the background, one at a time (a request meanwhile makes its own, as
        on-demand concurrency serves while AWS allocates the provisioned)."""
        with self.cond:
            self.floor = min(floor, self.limit)
            start = self.count < self.floor and not self.provisioning
            self.provisioning = self.provisioning or start
        if start:
            threading.Thread(target=self._initialise, daemon=True, name=f"provision-{self.fn.id}").start()

    def _initialise(self) -> None:
        try:
            while True:
                with self.cond:
                    if self.count >= self.floor:
                        return
                    self.count += 1
                try:
                    env = Environment(self.ctx, self.fn, "provisioned-concurrency")
                except Exception:  # the next look at the floor tries again
                    log.exception("a provisioned environment of %s failed its init", self.fn.id)
                    self._gone()
                    return
                self.release(env)
        finally:
            with self.cond:
                self.provisioning = False

    def discard(self, env: Environment) -> None:
        """An environment that failed mid-invocation (timed out, died) is not reused."""
        env.process.kill()
        env.process.join(timeout=1)
        env.conn.close()
        self._gone()

    def _gone(self) -> None:
        with self.cond:
            self.count -= 1
            self.cond.notify_all()

    def stop_all(self) -> None:
        with self.cond:
            idle, self.idle = self.idle, []
            self.count -= len(idle)
        for e in idle:
            e.stop()


class EnvironmentHost:
    """``FunctionHost``'s interface (``invoke``, ``invoke_timed``), each invocation in an
    environment of its own (see the module's docstring)."""

    def __init__(self) -> None:
        install_layer_path()
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        self._pools: dict[str, _Pool] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        if os.environ.get("AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING"):
            threading.Thread(target=self._follow_floors, daemon=True, name="provisioned-floors").start()

    def _follow_floors(self) -> None:
        """Provisioned concurrency: each provisioned function's floor, as the window's pre-warm
        and cool-down set it on the scalable target, applied to its pool."""
        import botocore.session

        client: Any = botocore.session.get_session().create_client("application-autoscaling", region_name="us-east-1")
        # Lambda does this on AWS, not a function: the bench's call count leaves it out (tools/awscalls.py).
        setattr(client, EMULATION_ATTR, True)
        ids = {warm_start_target(fn.id): fn.id for fn in blueprint.FUNCTIONS if fn.warm_start == "provisioned"}
        while not self._stopped.wait(PROVISIONED_POLL_S):
            try:
                targets = client.describe_scalable_targets(ServiceNamespace="lambda")["ScalableTargets"]
            except Exception:  # moto not up yet, or gone at shutdown: the next look tries again
                log.debug("scalable targets not read", exc_info=True)
                continue
            for t in targets:
                if t["ResourceId"] in ids:
                    self._pool(ids[t["ResourceId"]]).provision(int(t["MinCapacity"]))

    def _pool(self, function_id: str) -> _Pool:
        with self._lock:
            pool = self._pools.get(function_id)
            if pool is None:
                pool = self._pools[function_id] = _Pool(self._ctx, blueprint.function(function_id))
            return pool

    def invoke(self, function_id: str, event: Any) -> Any:
        return self.invoke_timed(function_id, event)[0]

    def invoke_timed(self, function_id: str, event: Any) -> tuple[Any, Timing]:
        pool = self._pool(function_id)
        t0 = time.monotonic()
        env = pool.acquire()
        waited = time.monotonic() - t0
        try:
            result, timing = env.invoke(event, pool.fn.timeout_s)
        except FunctionError:
            pool.release(env)  # the handler raised; its environment is fine, as on Lambda
            raise
        except BaseException:
            pool.discard(env)
            raise
        pool.release(env)
        return result, replace(timing, wait_s=waited + timing.wait_s)

    def environments(self) -> dict[str, int]:
        """Environments per function (warm and busy), for tests and the bench."""
        with self._lock:
            return {fid: p.count for fid, p in self._pools.items()}

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            pools = list(self._pools.values())
        for p in pools:
            p.stop_all()
