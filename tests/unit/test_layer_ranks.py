"""The layer's shape, checked on the import statements themselves (AST), as LAYOUT.md 2.1 sets it
(no import cycle in it: ``test_import_graph.py``):

* ranks: a capability imports only lower-ranked ones (the kernel and ``aws`` import none);
* only the edge (handlers and the API routers) imports a capability's ``wiring``; a wiring
  imports its own package, the kernel and lower-ranked wirings (the ranks give that);
* handlers never import a store or ``aws``: they get every service from a wiring;
* services depend on ports, never on an adapter: no ``Dynamo*``/``Sqs*``/``Ses*``/
  ``StepFunctions*``/``Http*``/``Stripe*``/``Limited*`` class outside stores and wirings, so every
  service runs on the fakes of ``tests/fakes``.

Planted violations prove each rule can fail.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers/racecap/python"
PACKAGE = LAYER / "racecap"

KERNEL = {"models", "errors", "money", "config", "clients", "observability", "deadline", "cache", "ratelimit"}
KERNEL |= {"pulse"}  # every capability counts its opening's seconds through it (racecap.pulse)
KERNEL |= {"http", "auth", "aws"}
RANKS: dict[str, int] = {
    **dict.fromkeys(KERNEL, 0),
    **dict.fromkeys(["audit", "places", "emails", "payments"], 1),
    "races": 2,
    **dict.fromkeys(["questions", "fairness", "holds"], 3),
    **dict.fromkeys(["window", "waitlist"], 4),  # window's wiring passes fairness' ``opened`` callback
    "setup": 5,  # ``RaceAdmin`` moves a scheduled window
    "ballot": 6,  # its draw feeds the waitlist; its settings are written through setup
    **dict.fromkeys(["codes", "registration"], 6),
    "ledger": 7,
    **dict.fromkeys(["participants", "stats", "results", "retention"], 8),
    "api": 9,  # the edge: Powertools routers, as the handlers are
}

# How the adapters are named (the classes that talk to AWS or a provider).
ADAPTER = re.compile(r"^(Dynamo|Sqs|Ses|S3|StepFunctions|AutoScaling|Http|Stripe|Limited)[A-Z]")
# Ports only where a second implementation exists: the results service and the opening queue run
# on DynamoDB Local (and a local S3) in their tests, never on a fake, so they take their adapters.
NO_SECOND_IMPLEMENTATION = {
    "results/service.py": {"DynamoResults", "S3Files"},
    "fairness/queue.py": {"DynamoQueueStore"},
}

Reader = Callable[[Path], str]


def _read(path: Path) -> str:
    return path.read_text()


def module_name(path: Path, base: Path = LAYER) -> str:
    return ".".join(path.relative_to(base).with_suffix("").parts).removesuffix(".__init__")


def imports_of(source: str) -> Iterable[tuple[int, str, list[str]]]:
    """(line, module, names) for every absolute import, wherever it stands in the file."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [a.name for a in node.names]


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "racecap" and len(parts) > 1 else None


def rank_violations(paths: list[Path], read: Reader = _read) -> list[str]:
    found = []
    for path in paths:
        room = room_of(module_name(path))
        if room is None:
            continue
        if room not in RANKS:
            found.append(f"{path.relative_to(ROOT)}: package {room!r} has no rank")
            continue
        for line, module, names in imports_of(read(path)):
            targets = [f"{module}.{n}" for n in names] if module == "racecap" else [module]
            for target in targets:
                other = room_of(target)
                if target.endswith(".wiring") and path.name != "wiring.py" and room != "api":
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {target}: only the edge imports a wiring")
                if other is None or other == room:
                    continue
                upward = RANKS.get(other, 99) >= RANKS[room] and not (RANKS[room] == RANKS.get(other) == 0)
                if upward:
                    found.append(f"{path.relative_to(ROOT)}:{line} ({room}, rank {RANKS[room]}) imports {target}")
    return sorted(set(found))


def handler_violations(paths: list[Path], read: Reader = _read) -> list[str]:
    found = []
    for path in paths:
        for line, module, _ in imports_of(read(path)):
            if module.startswith("racecap.aws") or module.endswith(".store"):
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


def adapter_imports(paths: list[Path], read: Reader = _read) -> list[str]:
    """Adapters a service imports (it should take a port and let the wiring build the adapter)."""
    found = []
    for path in paths:
        source = read(path)
        if path.name == "wiring.py" or room_of(module_name(path)) in KERNEL | {None} or _defines_adapter(source):
            continue  # wirings build adapters; an adapter's module may build on another (a subclass)
        for line, module, names in imports_of(source):
            if module.startswith("racecap."):
                allowed = NO_SECOND_IMPLEMENTATION.get(str(path.relative_to(PACKAGE)), set())
                found += [
                    f"{path.relative_to(ROOT)}:{line} imports {n}"
                    for n in names
                    if ADAPTER.match(n) and n not in allowed
                ]
    return found


def _defines_adapter(source: str) -> bool:
    return any(isinstance(n, ast.ClassDef) and ADAPTER.match(n.name) for n in ast.parse(source).body)


def _layer() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _handlers() -> list[Path]:
    return sorted((ROOT / "functions").glob("*/handler.py"))


# -- the rules hold --------------------------------------------------------------------------
def test_every_import_points_down_the_ranks():
    assert rank_violations(_layer()) == []


def test_every_package_has_a_rank_and_the_flat_rooms_are_gone():
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert packages <= set(RANKS)
    assert not {"logic", "dal", "teams"} & packages
    assert not (PACKAGE / "domain.py").exists() and not (PACKAGE / "wiring.py").exists()


def test_handlers_reach_no_store():
    assert handler_violations(_handlers()) == []


def test_services_import_no_adapter():
    assert adapter_imports(_layer()) == []


def test_every_adapter_a_wiring_builds_is_named_as_one():
    """The adapter rule only holds if adapters keep to their names: every concrete class a wiring
    takes from a store (or the provider's modules) must match ``ADAPTER``."""
    classes: list[Any] = []
    for wiring in PACKAGE.glob("*/wiring.py"):
        for _, module, names in imports_of(wiring.read_text()):
            if (
                module.endswith((".store", ".stripe_provider", ".budget", ".webhook_log"))
                or module == "racecap.aws.queues"
            ):
                mod = importlib.import_module(module)
                classes += [getattr(mod, n) for n in names]
    concrete = [c for c in classes if inspect.isclass(c) and not getattr(c, "_is_protocol", False)]
    assert len(concrete) > 10, "the wirings build no adapters?"
    assert [c.__name__ for c in concrete if not ADAPTER.match(c.__name__)] == []


# -- each rule can fail ------------------------------------------------------------------------
def _planted(target: Path, line: str) -> Reader:
    source = target.read_text() + f"\n{line}\n"
    return lambda p: source if p == target else p.read_text()


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("places/store.py", "from racecap.holds.service import HoldService"),  # a rank up
        ("payments/port.py", "import racecap.registration.service"),
        ("models.py", "from racecap.aws.keys import hold_key"),  # kernel to kernel is fine...
        ("aws/keys.py", "from racecap.races.models import Race"),  # ...but the kernel reaches no capability
        ("registration/sweeper.py", "from racecap.registration.wiring import sweeper"),  # a service to a wiring
        ("codes/service.py", "from racecap.registration.service import RegistrationService"),  # same rank
    ],
)
def test_a_planted_upward_import_is_caught(module, planted):
    target = PACKAGE / module
    found = rank_violations([target], read=_planted(target, planted))
    if module == "models.py":
        assert found == []
    else:
        assert found
        assert all(planted.split()[1] in f for f in found)


def test_a_handler_importing_a_store_is_caught():
    handler = ROOT / "functions/hold_sweeper/handler.py"
    found = handler_violations([handler], read=_planted(handler, "from racecap.holds.store import DynamoHolds"))
    assert found and all("racecap.holds.store" in f for f in found)


def test_a_planted_adapter_import_is_caught():
    target = PACKAGE / "window/service.py"
    found = adapter_imports([target], read=_planted(target, "from racecap.window.store import StepFunctionsWorkflow"))
    assert len(found) == 1 and found[0].endswith("imports StepFunctionsWorkflow")


def test_a_package_without_a_rank_is_caught(tmp_path, monkeypatch):
    monkeypatch.delitem(RANKS, "stats")
    assert any("'stats' has no rank" in f for f in rank_violations(sorted((PACKAGE / "stats").glob("*.py"))))


def test_the_runner_api_loads_no_admin_router():
    """The registration API takes a burst's traffic: it must not load the directors' routes."""
    runner = [ROOT / "functions/registration_api/handler.py", *sorted((PACKAGE / "api/runner").glob("*.py"))]
    assert [
        f"{p.relative_to(ROOT)}:{line}"
        for p in runner
        for line, module, names in imports_of(p.read_text())
        if module.startswith("racecap.api.admin") or (module == "racecap.api" and "admin" in names)
    ] == []


def test_the_opening_function_loads_no_own_entry_router():
    """RegistrationApi is cold-started by the thousand at an opening: a runner's own entry (the
    ledger, cancellations, email change) is MyRegistrationApi's, out of those cold starts."""
    imported = [module for _, module, _ in imports_of((ROOT / "functions/registration_api/handler.py").read_text())]
    names = [
        n for _, module, ns in imports_of((ROOT / "functions/registration_api/handler.py").read_text()) for n in ns
    ]
    assert "own" not in names and not any(m.startswith(("racecap.api.runner.own", "racecap.ledger")) for m in imported)
