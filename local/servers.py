"""Start the local stack's backing servers as child processes, each on 127.0.0.1 only.

    dyn = start_dynamodb(free_port(), log_dir)        # DynamoDB Local, in memory
    sqs = start_elasticmq(free_port(), log_dir, work)  # ElasticMQ (SQS API), no queues declared
    red = start_redis(free_port(), log_dir)            # redis-server, no persistence
    ...
    dyn.stop()

Every start function refuses a port that is already taken (``PortInUseError``), waits until
the server answers a real request, and raises ``ServerStartError`` with the tail of the
server's log if it dies or is not ready in time. Children run in their own process group
(``stop()`` signals the whole group) and, on Linux, get SIGTERM when the process that
started them dies (``PR_SET_PDEATHSIG``; note this fires when the starting *thread* exits,
so start servers from a long-lived thread, normally the main one).

The jars come from ``local/install.sh maven`` (``.cache/maven/{dynamodb,elasticmq}``);
redis-server from ``local/install.sh apt``.

DynamoDB Local has no host option and binds every interface, so it is started through
``local/java/LocalDynamo.java``, which sets the host of DynamoDB Local's Jetty connector to
127.0.0.1 before starting it (compiled into ``.cache/maven/launcher`` by the installer, or
here on first use).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import fcntl
import http.client
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAVEN_DIR = ROOT / ".cache" / "maven"
DYNAMODB_DIR = MAVEN_DIR / "dynamodb"
ELASTICMQ_DIR = MAVEN_DIR / "elasticmq"
LAUNCHER_DIR = MAVEN_DIR / "launcher"
LAUNCHER_SOURCE = ROOT / "local" / "java" / "LocalDynamo.java"

HOST = "127.0.0.1"
JAVA_START_TIMEOUT = 90.0  # a cold JVM on 2 busy cores can be slow
REDIS_START_TIMEOUT = 20.0
LOG_TAIL_LINES = 30

# Which variable moves which server (the names local/stack.py reads).
PORT_VARS = {
    "gateway": "RACECAP_PORT",
    "dynamodb": "RACECAP_DYNAMODB_PORT",
    "elasticmq": "RACECAP_SQS_PORT",
    "sqs": "RACECAP_SQS_PORT",
    "redis": "RACECAP_REDIS_PORT",
    "ses": "RACECAP_SES_PORT",
    "stepfunctions": "RACECAP_SFN_PORT",
    "sfn": "RACECAP_SFN_PORT",
    "stripe": "RACECAP_STRIPE_PORT",
}


class ServerError(RuntimeError):
    """Base class of this module's errors."""


class PortInUseError(ServerError):
    def __init__(self, port: int, port_var: str) -> None:
        super().__init__(f"port {port} is already in use — is another `make run` going? set {port_var}")
        self.port = port
        self.port_var = port_var


class ServerStartError(ServerError):
    """The server died, never became ready, or is not installed."""


@dataclass
class ServerProcess:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    startup_seconds: float = field(default=0.0, compare=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the process group, SIGKILL whatever is left after ``timeout`` seconds."""
        pgid = self.proc.pid  # start_new_session=True: the child leads its own group
        deadline = time.monotonic() + timeout
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            self.proc.wait(5.0)
        # Grandchildren (e.g. gunicorn workers) may outlive the leader for a moment.
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the whole process group at once, as a crash would (no shutdown of its own)."""
        _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10.0)
        deadline = time.monotonic() + 5.0
        while _group_alive(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- ports -------------------------------------------------------------------------------------


# Ports handed out by ``free_port`` come from below the kernel's ephemeral range: a port the OS
# picks with bind(0) is also the source port of the next outgoing connection, and a stack binds
# its ports seconds to minutes after picking them (the edge last), so another process's client
# socket took one in between (seen as PortInUseError in a fresh-clone run with two workers).
_PICK_LOW = 20000
_RESERVED_DIR = Path(tempfile.gettempdir()) / "racecap-ports"
# A picked port stays reserved (an flock other processes see) until this many later picks: far
# longer than any stack takes from picking its ports to binding them, and a bounded fd count.
_RESERVATIONS_KEPT = 64
_reservations: collections.deque[int] = collections.deque()
_reservations_lock = threading.Lock()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _reserve(port: int) -> bool:
    """Hold an exclusive lock on the port's file; False when another process holds it."""
    _RESERVED_DIR.mkdir(parents=True, exist_ok=True)
    fd = os.open(_RESERVED_DIR / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _reservations.append(fd)
    while len(_reservations) > _RESERVATIONS_KEPT:
        os.close(_reservations.popleft())  # closing the fd releases its lock
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now and that no other caller of this function gets.

    Picked at random below the ephemeral range and locked across processes (see above), so two
    test workers' stacks, or a client socket, cannot take it between the pick and the bind.
    """
    high = max(_PICK_LOW + 1000, _ephemeral_low())
    with _reservations_lock:
        for _ in range(500):
            port = random.randrange(_PICK_LOW, high)
            if not port_in_use(port) and _reserve(port):
                return port
    raise ServerError(f"no free port found in {_PICK_LOW}-{high - 1}")


def port_in_use(port: int) -> bool:
    """True if something listens on ``port`` on 127.0.0.1 or on all interfaces."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the servers use it: TIME_WAIT leftovers do not count as "in use".
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


# -- generic child process ---------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
_libc: ctypes.CDLL | None = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    def setup() -> None:  # runs in the child between fork and exec
        die_with_parent(parent_pid)

    return setup


def die_with_parent(parent_pid: int, sig: signal.Signals = signal.SIGTERM) -> None:
    """Ask Linux to send this process ``sig`` when its parent dies (PR_SET_PDEATHSIG);
    exit at once if the parent is already gone. A no-op where prctl is missing."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _port_var(name: str) -> str:
    return PORT_VARS.get(name, f"RACECAP_{name.upper()}_PORT")


def _tcp_ready(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((HOST, port)) == 0


def spawn(
    name: str,
    cmd: Sequence[str],
    port: int,
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    ready: Callable[[ServerProcess], bool] | None = None,
    timeout: float = 30.0,
    port_var: str | None = None,
    die_with_parent: bool = True,
) -> ServerProcess:
    """Start ``cmd`` as a child in its own process group, logging to ``log_dir/<name>.log``.

    With ``port > 0`` the port must be free beforehand (else ``PortInUseError``) and the call
    returns once ``ready(server)`` is true (default: the port accepts TCP connections on
    127.0.0.1). With ``port == 0`` there is nothing to probe: it returns once the process has
    survived a short grace period. Raises ``ServerStartError`` (with the log's tail) if the
    process exits first or ``timeout`` seconds pass.
    """
    if port > 0 and port_in_use(port):
        raise PortInUseError(port, port_var or _port_var(name))
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                list(cmd),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent(os.getpid()) if die_with_parent else None,  # noqa: PLW1509
            )
        except OSError as exc:
            raise ServerStartError(f"{name}: cannot run {cmd[0]}: {exc}") from exc
    server = ServerProcess(name=name, port=port, proc=proc, log_path=log_path)

    def default_probe(s: ServerProcess) -> bool:
        if s.port > 0:
            return _tcp_ready(s.port)
        return time.monotonic() - t0 >= 0.3  # no port: it only has to stay up a moment

    probe = ready or default_probe
    try:
        _wait_ready(server, probe, timeout)
    except BaseException:
        server.stop()
        raise
    server.startup_seconds = time.monotonic() - t0
    return server


def _wait_ready(server: ServerProcess, probe: Callable[[ServerProcess], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        code = server.proc.poll()
        if code is not None:
            raise ServerStartError(
                f"{server.name} exited with code {code} while starting on {HOST}:{server.port}; "
                f"last lines of {server.log_path}:\n{server.log_tail()}"
            )
        try:
            if probe(server) and server.alive():
                return
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() >= deadline:
            raise ServerStartError(
                f"{server.name} did not become ready on {HOST}:{server.port} within {timeout:.0f}s; "
                f"last lines of {server.log_path}:\n{server.log_tail()}"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)


def _log_contains(server: ServerProcess, marker: str) -> bool:
    try:
        return marker in server.log_path.read_text(errors="replace")
    except OSError:
        return False


def _http(
    port: int, method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> tuple[int, bytes]:
    # http.client directly: no proxy variables can reroute a loopback probe.
    conn = http.client.HTTPConnection(HOST, port, timeout=2.0)
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# -- Java --------------------------------------------------------------------------------------


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ServerStartError("java not found (JDK 17+ needed; set JAVA_HOME or put java on PATH)")
    return java


def _require(directory: Path, pattern: str, what: str) -> Path:
    found = sorted(directory.glob(pattern))
    if not found:
        raise ServerStartError(f"{what} is not installed ({directory}/{pattern} missing): run `local/install.sh maven`")
    return found[0]


def _ensure_launcher() -> Path:
    """The compiled LocalDynamo class; compiles it if missing or older than its source."""
    target = LAUNCHER_DIR / "LocalDynamo.class"
    if target.exists() and target.stat().st_mtime >= LAUNCHER_SOURCE.stat().st_mtime:
        return LAUNCHER_DIR
    javac = shutil.which("javac")
    if javac is None:
        raise ServerStartError("javac not found: a JDK 17+ is needed to compile local/java/LocalDynamo.java")
    LAUNCHER_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=MAVEN_DIR) as tmp:
        result = subprocess.run(
            [javac, "-nowarn", "-d", tmp, "-cp", str(DYNAMODB_DIR / "*"), str(LAUNCHER_SOURCE)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise ServerStartError(f"compiling {LAUNCHER_SOURCE} failed:\n{result.stdout}{result.stderr}")
        os.replace(Path(tmp) / "LocalDynamo.class", target)  # atomic: safe with parallel starters
    return LAUNCHER_DIR


# -- the three servers ---------------------------------------------------------------------------


def start_dynamodb(
    port: int, log_dir: Path, *, timeout: float = JAVA_START_TIMEOUT, jvm_args: Sequence[str] = ()
) -> ServerProcess:
    """DynamoDB Local, in memory, telemetry off, listening on 127.0.0.1:``port`` only."""
    if port > 0 and port_in_use(port):
        raise PortInUseError(port, _port_var("dynamodb"))
    _require(DYNAMODB_DIR, "DynamoDBLocal-*.jar", "DynamoDB Local")
    _require(DYNAMODB_DIR, "libsqlite4java-*", "sqlite4java native library")
    launcher = _ensure_launcher()
    cmd = [
        _java(),
        "-Djava.net.preferIPv4Stack=true",
        f"-Dracecap.host={HOST}",
        f"-Djava.library.path={DYNAMODB_DIR}",
        *jvm_args,
        "-cp",
        f"{launcher}{os.pathsep}{DYNAMODB_DIR / '*'}",
        "LocalDynamo",
        "-inMemory",
        "-port",
        str(port),
        "-disableTelemetry",
    ]
    headers = {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": "DynamoDB_20120810.ListTables",
        # DynamoDB Local only checks that a SigV4-shaped header is there.
        "Authorization": "AWS4-HMAC-SHA256 Credential=local/20240101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host;x-amz-target, Signature=0",
    }

    def ready(s: ServerProcess) -> bool:
        if not _log_contains(s, f"LocalDynamo listening on {HOST}:{s.port}"):
            return False
        status, body = _http(s.port, "POST", "/", b"{}", headers)
        return status == 200 and b"TableNames" in body

    return spawn("dynamodb", cmd, port, log_dir, cwd=log_dir, ready=ready, timeout=timeout)


def elasticmq_conf(
    port: int, *, region: str = "us-east-1", account_id: str = "000000000000", store: Path | None = None
) -> str:
    """ElasticMQ's config: REST SQS on 127.0.0.1:``port``, queue URLs naming the same address.

    With ``store`` (a folder), queues and their messages are persisted there, in one H2
    database (``messages-storage``: its ``queues`` table holds the queue definitions, one
    table per queue its messages), so a restarted ElasticMQ comes back with every queue and
    every message, in flight included, as SQS never loses an accepted message. Without it
    everything lives in memory."""
    return f"""\
include classpath("application.conf")

node-address {{
  protocol = "http"
  host = "{HOST}"
  port = {port}
  context-path = ""
}}
generate-node-address = false

rest-sqs {{
  enabled = true
  bind-hostname = "{HOST}"
  bind-port = {port}
  sqs-limits = strict
}}

aws {{
  region = "{region}"
  accountId = "{account_id}"
}}

# Queues are created through the API (local/provision.py), none declared here.
queues {{}}
{_elasticmq_storage(store)}"""


def _elasticmq_storage(store: Path | None) -> str:
    if store is None:
        return ""
    # H2's file URI: no auto-server, one process (ElasticMQ) owns it; ElasticMQ keeps
    # its own schema in it and prunes nothing on start (prune-data-on-init false).
    # WRITE_DELAY=0: H2 writes a commit when it happens, not up to 500 ms later (its
    # default), so a message ElasticMQ acknowledged survives a SIGKILL, as SQS's do.
    # No ``queues-storage``: with ``messages-storage`` on, ElasticMQ (1.7) keeps the queues
    # in the same database and ignores ``queues-storage`` (it never wrote its .conf).
    return f"""
messages-storage {{
  enabled = true
  driver-class = "org.h2.Driver"
  uri = "jdbc:h2:{store / "messages"};WRITE_DELAY=0"
  username = ""
  password = ""
  prune-data-on-init = false
}}
"""


def start_elasticmq(
    port: int,
    log_dir: Path,
    work_dir: Path,
    *,
    region: str = "us-east-1",
    account_id: str = "000000000000",
    timeout: float = JAVA_START_TIMEOUT,
    jvm_args: Sequence[str] = (),
    persist: bool = False,
    restore: Sequence[str] = (),
) -> ServerProcess:
    """ElasticMQ (SQS API) on 127.0.0.1:``port``; its .conf is written into ``work_dir``.

    ``persist``: queues and messages are kept in ``work_dir/elasticmq-store`` and survive a
    restart on the same ``work_dir`` (see ``elasticmq_conf``). ``restore``: the names of the
    queues that store holds; the call returns only once each is back with its messages.

    ElasticMQ restores a persisted store *after* its REST server is up (1.7's
    ``ElasticMQServer.start`` binds, then sends ``QueueEvent.Restore``; each queue is created
    and then refilled, logging "Restored N messages in queue <name>"). In between it answers
    ``ListQueues`` with 200 and no queues, and every call naming a queue with
    ``QueueDoesNotExist``: ready on the REST server alone, a restart looked like one that
    lost its queues whenever a loaded machine stretched that gap past the readiness probe."""
    if port > 0 and port_in_use(port):
        raise PortInUseError(port, _port_var("elasticmq"))
    _require(ELASTICMQ_DIR, "elasticmq-server_*.jar", "ElasticMQ")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    conf = work_dir / "elasticmq.conf"
    store = work_dir / "elasticmq-store" if persist else None
    if store is not None:
        store.mkdir(exist_ok=True)
    conf.write_text(elasticmq_conf(port, region=region, account_id=account_id, store=store))
    cmd = [
        _java(),
        "-Djava.net.preferIPv4Stack=true",
        f"-Dconfig.file={conf}",
        *jvm_args,
        "-cp",
        str(ELASTICMQ_DIR / "*"),
        "org.elasticmq.server.Main",
    ]

    def ready(s: ServerProcess) -> bool:
        # On a failed bind ElasticMQ logs the error but its JVM keeps running.
        if _log_contains(s, "Cannot start SQS rest server") or _log_contains(s, "Uncaught exception in thread: main"):
            where = f"{HOST}:{s.port}; last lines of {s.log_path}"
            raise ServerStartError(f"elasticmq failed to start on {where}:\n{s.log_tail()}")
        if not _log_contains(s, f"Started SQS rest server, bind address {HOST}:{s.port}"):
            return False
        if not elasticmq_restored(s.log_path.read_text(errors="replace"), restore):
            return False
        status, body = _http(s.port, "GET", "/?Action=ListQueues")
        if status != 200 or b"ListQueuesResponse" not in body:
            return False
        return all(f"/{name}</QueueUrl>".encode() in body for name in restore)

    return spawn("elasticmq", cmd, port, log_dir, cwd=work_dir, ready=ready, timeout=timeout)


def elasticmq_restored(log: str, queues: Sequence[str]) -> bool:
    """True once ElasticMQ's log says each of ``queues`` got its persisted messages back
    (the last step of its restore, after the queue itself was created)."""
    restored = set(re.findall(r"Restored \d+ messages in queue (\S+)", log))
    return set(queues) <= restored


def start_redis(port: int, log_dir: Path, *, timeout: float = REDIS_START_TIMEOUT) -> ServerProcess:
    """redis-server on 127.0.0.1:``port``, nothing persisted, up to 10,000 clients."""
    if port > 0 and port_in_use(port):
        raise PortInUseError(port, _port_var("redis"))
    binary = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).exists()), None
    )
    if binary is None:
        raise ServerStartError("redis-server is not installed: run `local/install.sh apt`")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        binary,
        "--bind", HOST,
        "--port", str(port),
        "--protected-mode", "yes",
        "--save", "",
        "--appendonly", "no",
        "--maxclients", "10000",
        "--daemonize", "no",
        "--logfile", "",
        "--dir", str(log_dir),
    ]  # fmt: skip

    def ready(s: ServerProcess) -> bool:
        with socket.create_connection((HOST, s.port), timeout=1.0) as sock:
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            return sock.recv(64).startswith(b"+PONG")

    return spawn("redis", cmd, port, log_dir, cwd=log_dir, ready=ready, timeout=timeout)


# -- S3 (moto) and the edge cache (nginx) --------------------------------------------------------


def start_moto(port: int, log_dir: Path, *, timeout: float = 30.0) -> ServerProcess:
    """moto's standalone server on 127.0.0.1:``port``: the local S3 (presigned URLs included)."""
    binary = Path(sys.executable).parent / "moto_server"
    if not binary.exists():
        raise ServerStartError("moto_server is not installed (requirements-dev.txt: moto[server])")

    def ready(s: ServerProcess) -> bool:
        status, body = _http(s.port, "GET", "/")
        return status == 200 and b"ListAllMyBucketsResult" in body

    # cognito-idp checks TOTP codes only when told to (the directors' pool requires TOTP MFA).
    env = {**os.environ, "MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP": "true"}
    cmd = [str(binary), "-H", HOST, "-p", str(port)]
    return spawn("s3", cmd, port, log_dir, env=env, ready=ready, timeout=timeout)


NGINX = "/usr/sbin/nginx"


def start_nginx(port: int, conf: Path, work_dir: Path, log_dir: Path, *, timeout: float = 15.0) -> ServerProcess:
    """nginx (Debian's) in the foreground with ``conf``; its prefix, pid and temp files in ``work_dir``."""
    binary = shutil.which("nginx") or (NGINX if Path(NGINX).exists() else None)
    if binary is None:
        raise ServerStartError("nginx is not installed: run `local/install.sh apt`")
    cmd = [binary, "-p", str(work_dir), "-c", str(conf), "-e", str(log_dir / "edge-error.log")]
    return spawn("edge", cmd, port, log_dir, cwd=work_dir, timeout=timeout, port_var="RACECAP_EDGE_PORT")
