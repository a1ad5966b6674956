"""handler → logic → dal, never upward: checked on the import statements themselves (AST).

* ``racecap.domain`` (the records) imports no other layer;
* ``racecap.dal`` never imports ``racecap.logic`` (nor the composition root or HTTP);
* ``racecap.logic`` never imports the composition root or HTTP;
* handlers (``functions/*/handler.py``) never import ``racecap.dal``: they get every
  service from ``racecap.wiring``;
* ``racecap.logic`` depends on the data layer's ports, never on an adapter: no
  ``Dynamo*``/``Sqs*``/``Ses*``/``StepFunctions*``/``Http*``/``Stripe*``/``Limited*`` class
  (``wiring`` builds those), so every service can run on the fakes of ``tests/fakes``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers/racecap/python/racecap"

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "racecap.domain": ("racecap.dal", "racecap.logic", "racecap.wiring", "racecap.http"),
    "racecap.dal": ("racecap.logic", "racecap.wiring", "racecap.http"),
    "racecap.logic": ("racecap.wiring", "racecap.http"),
    "handler": ("racecap.dal",),
}


# How the data layer names its adapters (the classes that talk to AWS or a provider).
ADAPTER = re.compile(r"^(Dynamo|Sqs|Ses|StepFunctions|AutoScaling|Http|Stripe|Limited)[A-Z]")


def imported_modules(source: str) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def layer_of(path: Path) -> str | None:
    if path.name == "handler.py" and path.parent.parent.name == "functions":
        return "handler"
    rel = path.relative_to(PACKAGE).with_suffix("") if path.is_relative_to(PACKAGE) else None
    if rel is None:
        return None
    dotted = ".".join(("racecap", *rel.parts))
    return next((layer for layer in FORBIDDEN if dotted == layer or dotted.startswith(layer + ".")), None)


def violations(paths: list[Path], read=lambda p: p.read_text()) -> list[str]:
    found = []
    for path in paths:
        layer = layer_of(path)
        if layer is None:
            continue
        for name in imported_modules(read(path)):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                found.append(f"{path.relative_to(ROOT)} ({layer}) imports {name}")
    return sorted(set(found))


def adapter_imports(paths: list[Path], read=lambda p: p.read_text()) -> list[str]:
    """Adapters the logic layer imports (it should take ports and let wiring build these)."""
    found = []
    for path in paths:
        if layer_of(path) != "racecap.logic":
            continue
        for node in ast.walk(ast.parse(read(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("racecap.dal"):
                found += [f"{path.relative_to(ROOT)} imports {a.name}" for a in node.names if ADAPTER.match(a.name)]
    return sorted(found)


def _all_modules() -> list[Path]:
    return [*PACKAGE.rglob("*.py"), *(ROOT / "functions").glob("*/handler.py")]


def test_no_layer_imports_upward():
    assert violations(_all_modules()) == []


def test_every_layer_is_checked():
    layers = {layer_of(p) for p in _all_modules()}
    assert {"racecap.domain", "racecap.dal", "racecap.logic", "handler"} <= layers


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("dal/holds.py", "from racecap.logic.holds import HoldService"),
        ("dal/payments.py", "import racecap.logic.registration"),
        ("domain.py", "from racecap.dal.keys import hold_key"),
        ("logic/sweeper.py", "from racecap.wiring import sweeper"),
    ],
)
def test_a_planted_upward_import_is_caught(module, planted):
    target = PACKAGE / module
    source = target.read_text() + f"\n{planted}\n"
    found = violations([target], read=lambda p: source if p == target else p.read_text())
    assert found
    assert all(planted.split()[1] in f for f in found)


def test_a_handler_importing_the_data_layer_is_caught():
    handler = ROOT / "functions/hold_sweeper/handler.py"
    source = handler.read_text() + "\nfrom racecap.dal.holds import DynamoHolds\n"
    assert violations([handler], read=lambda p: source) == [
        "functions/hold_sweeper/handler.py (handler) imports racecap.dal.holds",
        "functions/hold_sweeper/handler.py (handler) imports racecap.dal.holds.DynamoHolds",
    ]


def test_the_logic_imports_no_adapter():
    assert adapter_imports(_all_modules()) == []


def test_a_planted_adapter_import_is_caught():
    target = PACKAGE / "logic/window.py"
    source = target.read_text() + "\nfrom racecap.dal.workflows import StepFunctionsWorkflow\n"
    found = adapter_imports([target], read=lambda p: source)
    assert found == ["layers/racecap/python/racecap/logic/window.py imports StepFunctionsWorkflow"]


def test_every_adapter_wiring_builds_is_named_as_one():
    """The rule above only holds if the adapters keep to their names: every concrete class
    the composition root takes from the data layer must match ``ADAPTER``."""
    classes: list[Any] = []
    for node in ast.walk(ast.parse((PACKAGE / "wiring.py").read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("racecap.dal"):
            module = importlib.import_module(node.module or "")
            classes += [getattr(module, a.name) for a in node.names]
    concrete = [c for c in classes if inspect.isclass(c) and not getattr(c, "_is_protocol", False)]
    assert concrete, "wiring builds no adapter?"
    assert [c.__name__ for c in concrete if not ADAPTER.match(c.__name__)] == []
