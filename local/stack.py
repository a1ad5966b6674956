"""Start, provision and stop the whole local stack; ``make run`` and the tests use this.

    python -m local.stack run            # start, seed the demo race, wait for Ctrl-C
    python -m local.stack run --no-seed

Every server binds 127.0.0.1. Ports default to the values below and can be overridden
with RACECAP_<NAME>_PORT (RACECAP_PORT for the gateway). Resources are created from
``blueprint`` through ``local.provision``, the same declarations the CDK app reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import blueprint
from local import auth, directors, faults, provision, servers
from local.run_dir import RUN_DIR, running_stack
from local.runtime import ACCOUNT, LAYER_PATH, REGION, install_layer_path, local_session
from local.stripe_standin import server as stripe_standin

ROOT = blueprint.ROOT
VENV_BIN = Path(sys.executable).parent


@dataclass
class Ports:
    gateway: int = 8080
    dynamodb: int = 8001
    sqs: int = 9324
    redis: int = 6390
    ses: int = 8005
    sfn: int = 8083
    stripe: int = 8007
    s3: int = 8008
    edge: int = 8090  # nginx, the local CloudFront in front of the gateway

    @classmethod
    def from_env(cls) -> Ports:
        ports = cls()
        for name in asdict(ports):
            var = "RACECAP_PORT" if name == "gateway" else f"RACECAP_{name.upper()}_PORT"
            if os.environ.get(var):
                setattr(ports, name, int(os.environ[var]))
        return ports

    @classmethod
    def free(cls) -> Ports:
        return cls(**{name: servers.free_port() for name in asdict(cls())})


# The gateway's HTTP threads in the "own" model: enough for every function's environments
# to be busy at once; a request beyond waits in the listen backlog, counted as queued.
GATEWAY_HTTP_THREADS = 64
GATEWAY_ENVIRONMENTS_VAR = "RACECAP_GATEWAY_ENVIRONMENTS"


class StackError(RuntimeError):
    pass


def node_binary() -> str | None:
    env = os.environ.get("RACECAP_NODE")
    if env and Path(env).exists():
        return env
    for candidate in sorted((ROOT / ".cache" / "node22").glob("**/bin/node")):
        return str(candidate)
    return None


class LocalStack:
    def __init__(
        self,
        work_dir: Path,
        ports: Ports | None = None,
        *,
        gateway_environments: str = "own",
        gateway_workers: int = 8,
        gateway_threads: int = 1,
        schedule_scale: float = 1.0,
        ses_max_rate: float = 14.0,
        params: dict[str, str] | None = None,
        extra_env: dict[str, str] | None = None,
        faults_dir: Path | None = None,
        persist_queues: bool = False,
        quiet: bool = False,
    ) -> None:
        self.work_dir = work_dir
        self.ports = ports or Ports.from_env()
        # "own": one HTTP process of many threads, each invocation in an execution environment
        # of its own, up to the function's concurrency (local/environments.py), as on Lambda.
        # "shared": the former model, ``gateway_workers`` processes of ``gateway_threads``
        # threads running every function's handlers in-process (kept to compare the two).
        if gateway_environments not in ("own", "shared"):
            raise ValueError(f"gateway_environments: 'own' or 'shared', not {gateway_environments!r}")
        self.gateway_environments = gateway_environments
        self.gateway_workers = gateway_workers
        self.gateway_threads = gateway_threads
        self.schedule_scale = schedule_scale
        self.ses_max_rate = ses_max_rate
        # Deploy-parameter overrides (blueprint ``Param`` name -> value), as a CloudFormation
        # parameter would set them: e.g. {"EmailSendRatePerSecond": "500"} for a burst.
        self.params = dict(params or {})
        # A fresh origin secret per stack, shared by the gateway (as CloudFront) and the functions.
        self.params.setdefault(provision.ORIGIN_SECRET_PARAM, secrets.token_urlsafe(32))
        # Extra variables for the function processes (gateway, pollers), e.g. instrumentation.
        self.extra_env = dict(extra_env or {})
        # The chaos burst's switch for DynamoDB faults under the handlers (local/faults.py):
        # only a stack given a folder has the hook at all.
        self.faults_dir = faults_dir
        self.persist_queues = persist_queues
        if faults_dir is not None:
            self.extra_env[faults.ENV_VAR] = str(faults_dir)
        self.quiet = quiet
        self.procs: list[servers.ServerProcess] = []
        self._spawner: ThreadPoolExecutor | None = None
        self.queue_urls: dict[str, str] = {}
        self.log_dir = work_dir / "logs"
        self.issuer = auth.Issuer(work_dir / "auth")
        self.directors: directors.DirectorPool | None = None  # moto's user pool, once provisioned
        # The fairness tokens' signing key, fresh for each stack, put into (moto's) Secrets
        # Manager where an operator puts the real one on AWS; tests mint tokens with it.
        self.fairness_key = secrets.token_hex(32)

    # -- addresses ------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports.gateway}"

    @property
    def edge_url(self) -> str:
        """Through the cache stand-in (nginx configured from blueprint.CACHE_BEHAVIOURS)."""
        return f"http://127.0.0.1:{self.ports.edge}"

    @property
    def mailbox_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.ses}"

    @property
    def stripe_url(self) -> str:
        """The Stripe stand-in: the API base the SDK is pointed at, and Stripe.js's origin."""
        return f"http://127.0.0.1:{self.ports.stripe}"

    def resolve(self, ref: blueprint.Ref) -> str:
        """A blueprint reference, as the local stack names it (see local.provision)."""
        urls = self.queue_urls or {
            q.id: f"http://127.0.0.1:{self.ports.sqs}/{ACCOUNT}/{q.local_name}" for q in blueprint.QUEUES
        }
        resolver = provision.local_resolver(
            urls,
            f"redis://127.0.0.1:{self.ports.redis}/0",
            # The Stripe stand-in takes the real provider's place, as deploy parameters would.
            {
                "PaymentsApiBase": self.stripe_url,
                "PaymentsScriptUrl": f"{self.stripe_url}/v3/",
                "PaymentsPublishableKey": stripe_standin.Keys().publishable,
                "RunnerSiteUrl": self.url,  # the gateway serves the site too
                **self.params,
            },
        )
        return resolver(ref)

    def aws_env(self) -> dict[str, str]:
        """What points boto3 at the local servers: standard variables, no code changes."""
        return {
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL_DYNAMODB": f"http://127.0.0.1:{self.ports.dynamodb}",
            "AWS_ENDPOINT_URL_SQS": f"http://127.0.0.1:{self.ports.sqs}",
            "AWS_ENDPOINT_URL_SESV2": f"http://127.0.0.1:{self.ports.ses}",
            "AWS_ENDPOINT_URL_SFN": f"http://127.0.0.1:{self.ports.sfn}",
            "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{self.ports.s3}",
            # moto serves Secrets Manager too, on the same port as S3.
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": f"http://127.0.0.1:{self.ports.s3}",
            # ... and the directors' user pool (SRP + TOTP sign-in, as on AWS: local/directors.py).
            "AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER": f"http://127.0.0.1:{self.ports.s3}",
            # ... and Application Auto Scaling (the window's pre-warm of provisioned functions).
            "AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING": f"http://127.0.0.1:{self.ports.s3}",
            "AWS_ENDPOINT_URL_LAMBDA": self.url,
        }

    def function_env(self) -> dict[str, str]:
        """The environment the handlers run with: the blueprint's, resolved locally.

        One process hosts every function here, so it gets every function's extra
        variables too (each key names one thing; the blueprint test keeps them unique)."""
        env = {k: self.resolve(v) for k, v in blueprint.COMMON_ENV.items()}
        for fn in blueprint.FUNCTIONS:
            env.update({k: self.resolve(v) for k, v in fn.extra_env.items()})
        env.update(self.aws_env())
        env.update(
            {
                "POWERTOOLS_SERVICE_NAME": "racecap-local",
                # No X-Ray daemon locally; the tracer is a no-op rather than a UDP spray.
                "POWERTOOLS_TRACE_DISABLED": "true",
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
                "PYTHONPATH": os.pathsep.join([str(ROOT), LAYER_PATH]),
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.update(self.extra_env)
        return env

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> LocalStack:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for name, port in asdict(self.ports).items():
            if servers.port_in_use(port):
                var = "RACECAP_PORT" if name == "gateway" else f"RACECAP_{name.upper()}_PORT"
                raise StackError(f"port {port} ({name}) is already in use — is another stack running? set {var}")
        try:
            self._step("DynamoDB Local", lambda: servers.start_dynamodb(self.ports.dynamodb, self.log_dir))
            self._step(
                "ElasticMQ (SQS)",
                self._start_elasticmq,
            )
            self._step("redis-server", self._start_redis)
            self._step("S3 + Secrets Manager (moto)", lambda: servers.start_moto(self.ports.s3, self.log_dir))
            self._step("local SES", self._start_ses)
            self._step("Stripe stand-in", self._start_stripe)
            self._step("Step Functions (ASL)", self._start_sfn)
            self._say("provisioning tables, queues and state machines from blueprint")
            self._provision()
            # The local Cognito: a key pair whose JWKS the gateway checks director tokens with.
            self.issuer = auth.ensure_issuer(self.work_dir / "auth")
            self._step("gateway", self._start_gateway)
            self._step("edge cache (nginx)", self._start_edge)
            self._step("SQS pollers + schedules", self._start_pollers)
        except BaseException:
            self.stop()
            raise
        (self.work_dir / "stack.json").write_text(json.dumps(self.describe(), indent=2))
        return self

    def describe(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "url": self.url,
            "edge": self.edge_url,
            "mailbox": self.mailbox_url,
            "ports": asdict(self.ports),
            "queueUrls": self.queue_urls,
            "auth": {"dir": str(self.issuer.dir), "issuer": self.issuer.issuer, "audience": self.issuer.audience},
            "smokeSecret": self.directors.smoke_secret if self.directors else None,
            "directors": self.directors.describe() if self.directors else None,
            "env": self.function_env(),
        }

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
        if self._spawner is not None:
            self._spawner.shutdown(wait=False)
            self._spawner = None

    def server(self, name: str) -> servers.ServerProcess:
        """The running server called ``name`` (redis, elasticmq, gateway, pollers …)."""
        for proc in self.procs:
            if proc.name == name:
                return proc
        raise KeyError(name)

    def kill(self, name: str) -> int:
        """SIGKILL a server's whole process group, as a crash would: no shutdown of its own.
        Returns the pid it had; ``restart(name)`` brings it back on the same port."""
        proc = self.server(name)
        proc.kill()
        self.procs.remove(proc)
        return proc.pid

    def restart(self, name: str) -> int:
        """Start ``name`` again (after ``kill``, or stopping it now) on its port; the new pid."""
        with contextlib.suppress(KeyError):
            self.kill(name)
        starts = {"redis": self._start_redis, "elasticmq": self._start_elasticmq}
        self.procs.append(self._on_spawner(starts[name]))
        return self.procs[-1].pid

    def _on_spawner(self, start: Callable[[], servers.ServerProcess]) -> servers.ServerProcess:
        """Run ``start`` on the stack's own long-lived thread. A child's parent-death signal
        fires when the *thread* that started it exits (servers.py): a server restarted from
        a short-lived thread (a fault schedule's) would be killed when that thread ends."""
        if self._spawner is None:
            self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stack-spawner")
        return self._spawner.submit(start).result()

    def poller_pids(self) -> dict[str, int]:
        """{name: pid} of the pollers' processes (``<FunctionId>-<n>``, ``schedule-…``)."""
        try:
            return {k: int(v) for k, v in json.loads(self._pollers_pids.read_text()).items()}
        except (OSError, ValueError):
            return {}

    @property
    def _pollers_pids(self) -> Path:
        return self.work_dir / "pollers-pids.json"

    def stop_redis(self) -> None:
        """Stop the cache (fault tests: Redis is an accelerator, never a dependency)."""
        for proc in [p for p in self.procs if p.name == "redis"]:
            proc.stop()
            self.procs.remove(proc)

    def restart_redis(self) -> None:
        """A Redis restart: it comes back empty (nothing is persisted), as ElastiCache would after a failover."""
        self.stop_redis()
        self.procs.append(self._on_spawner(self._start_redis))

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- pieces ---------------------------------------------------------------------------
    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(f"[stack] {msg}", flush=True)

    def _step(self, name: str, start: Any) -> None:
        t0 = time.monotonic()
        self.procs.append(start())
        self._say(f"{name} up on 127.0.0.1:{self.procs[-1].port} ({time.monotonic() - t0:.1f}s)")

    def _spawn(self, name: str, cmd: list[str], port: int, env: dict[str, str] | None = None) -> servers.ServerProcess:
        var = "RACECAP_PORT" if name == "gateway" else f"RACECAP_{name.upper()}_PORT"
        return servers.spawn(name, cmd, port, self.log_dir, env={**os.environ, **(env or {})}, cwd=ROOT, port_var=var)

    def _start_redis(self) -> servers.ServerProcess:
        return servers.start_redis(self.ports.redis, self.log_dir)

    def _start_elasticmq(self) -> servers.ServerProcess:
        # Queues and messages persisted in the work folder: a restarted ElasticMQ has lost
        # nothing, as SQS never loses an accepted message (the chaos burst restarts it). On
        # a restart it is ready once every queue provisioned so far is back with its messages.
        restore = [url.rsplit("/", 1)[1] for url in self.queue_urls.values()] if self.persist_queues else []
        return servers.start_elasticmq(
            self.ports.sqs, self.log_dir, self.work_dir, persist=self.persist_queues, restore=restore
        )

    def _start_ses(self) -> servers.ServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "local.ses",
            "--port",
            str(self.ports.ses),
            "--dir",
            str(self.work_dir / "mail"),
            "--max-rate",
            str(self.ses_max_rate),
        ]
        return self._spawn("ses", cmd, self.ports.ses, {"PYTHONPATH": str(ROOT)})

    def _start_stripe(self) -> servers.ServerProcess:
        # Signed events go to the gateway's webhook route, as Stripe posts them to the stage's.
        webhook = f"{self.url}/api/payments/webhook"
        # The endpoint subscribes to the types Racecap handles, as docs/payments.md tells a stage's
        # operator to set it up: the others (payment_intent.created, charge.succeeded …) would
        # cost an invocation each and change nothing.
        install_layer_path()
        from racecap.ledger.events import HANDLED

        cmd = [
            sys.executable, "-m", "local.stripe_standin", "--port", str(self.ports.stripe),
            "--webhook-url", webhook, "--enabled-events", ",".join(HANDLED),
        ]  # fmt: skip
        return self._spawn("stripe", cmd, self.ports.stripe, {"PYTHONPATH": str(ROOT)})

    def _start_sfn(self) -> servers.ServerProcess:
        node = node_binary()
        if node is None:
            raise StackError("Node 22 not found: run `make install` (local/install.sh node)")
        modules = os.environ.get("RACECAP_NODE_MODULES", str(ROOT / "local" / "node" / "node_modules"))
        cmd = [
            node,
            str(ROOT / "local" / "stepfunctions" / "server.mjs"),
            "--port",
            str(self.ports.sfn),
            "--lambda-endpoint",
            self.url,
        ]
        return self._spawn("stepfunctions", cmd, self.ports.sfn, {"RACECAP_NODE_MODULES": modules})

    def _provision(self) -> None:
        session = local_session()
        env = self.aws_env()
        ddb = session.client("dynamodb", endpoint_url=env["AWS_ENDPOINT_URL_DYNAMODB"])
        sqs = session.client("sqs", endpoint_url=env["AWS_ENDPOINT_URL_SQS"])
        sfn = session.client("stepfunctions", endpoint_url=env["AWS_ENDPOINT_URL_SFN"])
        s3 = session.client("s3", endpoint_url=env["AWS_ENDPOINT_URL_S3"])
        self.queue_urls = provision.provision(ddb, sqs)
        provision.provision_buckets(s3)
        provision.provision_upload_cors(s3, [self.url, self.edge_url])  # the console's results uploads
        scaling = session.client(
            "application-autoscaling", endpoint_url=env["AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING"]
        )
        provision.provision_warm_starts(scaling)
        secrets = session.client("secretsmanager", endpoint_url=env["AWS_ENDPOINT_URL_SECRETS_MANAGER"])
        # The Stripe stand-in's own keys, put where an operator puts the real ones on AWS.
        keys = stripe_standin.Keys()
        provision.provision_secrets(
            secrets,
            {
                "PaymentProvider": {"secretKey": keys.secret, "webhookSecret": keys.webhook_secret},
                "FairnessSigningKey": {"signingKey": self.fairness_key},
            },
        )
        cognito = session.client("cognito-idp", endpoint_url=env["AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER"])
        self.directors = directors.provision_directors(
            cognito, secrets, env["AWS_ENDPOINT_URL_COGNITO_IDENTITY_PROVIDER"], self.work_dir / "auth"
        )
        for sm in blueprint.STATE_MACHINES:
            sfn.create_state_machine(
                name=sm.local_name,
                definition=provision.state_machine_definition(sm, self.resolve),
                roleArn=f"arn:aws:iam::{ACCOUNT}:role/{sm.local_name}",
                type=sm.type,
            )

    def _start_gateway(self) -> servers.ServerProcess:
        # "shared": one request at a time per worker process, as one Lambda execution
        # environment serves one invocation at a time: Powertools keeps per-process state
        # (metrics, the current event) that concurrent invocations in one process would share.
        # "own": one process only (its environments' pools are per process, so the
        # concurrency limits hold); its threads serve HTTP and wait on the environments.
        own = self.gateway_environments == "own"
        workers = 1 if own else self.gateway_workers
        threads = GATEWAY_HTTP_THREADS if own else self.gateway_threads
        cmd = [
            str(VENV_BIN / "gunicorn"), "--bind", f"127.0.0.1:{self.ports.gateway}",
            "--workers", str(workers), "--worker-class", "gthread",
            "--threads", str(threads), "--backlog", "4096", "--keep-alive", "5",
            "--timeout", "60", "--graceful-timeout", "3", "--log-level", "warning",
            # No request-line limit of gunicorn's own (4 KB): the gateway applies CloudFront's.
            "--limit-request-line", "0", "local.gateway:app",
        ]  # fmt: skip
        # The content security policy lets the site load the card form from the Stripe stand-in.
        env = self.function_env() | self.issuer.gateway_env() | {"RACECAP_PAYMENT_ORIGIN": self.stripe_url}
        env[GATEWAY_ENVIRONMENTS_VAR] = self.gateway_environments
        if self.directors is not None:
            env |= self.directors.gateway_env()
        return self._spawn("gateway", cmd, self.ports.gateway, env)

    def _start_edge(self) -> servers.ServerProcess:
        from local import edge

        work = self.work_dir / "edge"
        conf = edge.write_config(self.ports.edge, self.ports.gateway, work, self.log_dir)
        return servers.start_nginx(self.ports.edge, conf, work, self.log_dir)

    def _start_pollers(self) -> servers.ServerProcess:
        cmd = [
            sys.executable,
            "-m",
            "local.pollers",
            "--queue-urls",
            json.dumps(self.queue_urls),
            "--schedule-scale",
            str(self.schedule_scale),
            "--pids-file",
            str(self._pollers_pids),
        ]
        return self._spawn("pollers", cmd, 0, self.function_env())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--no-seed", action="store_true")
    parser.add_argument("--work-dir", type=Path, default=RUN_DIR)
    args = parser.parse_args()

    running = running_stack(args.work_dir)
    if running:
        sys.exit(f"Racecap is already running (pid {running['pid']}) at {running['url']}; stop it with Ctrl-C first.")
    stack = LocalStack(args.work_dir)
    try:
        stack.start()
    except (StackError, servers.PortInUseError, servers.ServerStartError) as exc:
        sys.exit(f"[stack] cannot start: {exc}")
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        if not args.no_seed:
            from local import seed

            os.environ.update(stack.function_env())
            # The demo race belongs to the demo director of moto's user pool (the console's sign-in).
            owner = stack.directors.demo_sub if stack.directors else seed.DEMO_DIRECTOR
            race_id = seed.seed_demo(owner)
            print(f"[stack] demo race seeded: {stack.url}/#/races/{race_id}", flush=True)
        print(
            f"\n  Racecap is running at   {stack.url}\n"
            f"  Through the edge cache  {stack.edge_url}   (nginx, as CloudFront caches)\n"
            f"  API docs (Swagger UI)   {stack.url}/api/docs\n"
            f"  Director's console      {stack.url}{blueprint.CONSOLE_PATH}\n"
            f"                          sign in as {directors.DEMO_EMAIL} / {directors.DEMO_PASSWORD};\n"
            f"                          the TOTP code: `make totp` (a new director: make director EMAIL=…)\n"
            f"  Local mailbox (SES)     {stack.mailbox_url}\n"
            f"  Payments (test cards)   4242 4242 4242 4242 succeeds, 4000 0000 0000 0002 is declined,\n"
            f"                          4000 0025 0000 3155 asks for 3-D Secure (Stripe stand-in {stack.stripe_url})\n"
            f"  Logs                    {stack.log_dir}\n\n  Press Ctrl-C to stop.\n",
            flush=True,
        )
        while not stop:
            time.sleep(0.3)
    finally:
        print("[stack] stopping…", flush=True)
        stack.stop()
        (args.work_dir / "stack.json").unlink(missing_ok=True)
        print("[stack] stopped; nothing left running.", flush=True)


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
