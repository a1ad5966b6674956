"""No import circle anywhere: none inside the product layer ``racecap``, ``racecap_cdk``, ``local``
or ``tools``, and none between ``local`` and ``tools`` (``tools`` may use ``local``, never the other way round).

The graph (``tests/import_graph.py``) counts every import statement, lazy and type-only ones
too, and the parent packages' ``__init__`` each import runs. The planted trees at the end prove
the check finds a circle closed by a parent ``__init__``, by a function-level import and by a
``TYPE_CHECKING`` import, and one between two top-level packages.

The product layer's rank table (which capability may import which) is in ``test_layer_ranks.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.import_graph import cycles, describe, graph_of, import_graph, module_names, package_graph

ROOT = Path(__file__).resolve().parents[2]

# package -> (its folder, the module prefixes left out of its cycle check: say why beside each)
PACKAGES: dict[str, tuple[Path, tuple[str, ...]]] = {
    "racecap": (ROOT / "layers/racecap/python/racecap", ()),
    "racecap_cdk": (ROOT / "cdk/racecap_cdk", ()),
    "local": (ROOT / "local", ()),
    "tools": (ROOT / "tools", ()),
}


def _without(graph: dict[str, set[str]], prefixes: tuple[str, ...]) -> dict[str, set[str]]:
    def kept(name: str) -> bool:
        return not any(name == p or name.startswith(p + ".") for p in prefixes)

    return {m: {t for t in targets if kept(t)} for m, targets in graph.items() if kept(m)}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle_within_the_package(package: str) -> None:
    folder, excluded = PACKAGES[package]
    graph = _without(import_graph(folder, package), excluded)
    assert len(graph) > 1, f"no modules found for {package} under {folder}"
    found = cycles(graph)
    assert not found, f"{len(found)} import cycle(s) in {package}:\n{describe(graph, found)}"


def test_no_cycle_between_local_and_tools() -> None:
    # Every tools module here, tools/burst too: it imports local, which must not import it back.
    graph = graph_of({**module_names(ROOT / "local", "local"), **module_names(ROOT / "tools", "tools")})
    found = cycles(package_graph(graph))
    back = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if m.startswith("local.")
        for t in targets
        if t.startswith("tools")
    )
    assert not found, f"local and tools import each other: {found}; local's side:\n" + "\n".join(back)


# ---------------------------------------------------------------------------
# planted violations: the check can fail
# ---------------------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_closed_by_a_parent_init_is_found(tmp_path: Path) -> None:
    # The CDK shape this branch removed: the package __init__ builds the app, and a construct's
    # `from .. import constants` runs that __init__. No statement imports `app` back.
    heavy_init = "from .stack import Stack\n"
    files = {
        "__init__.py": heavy_init,
        "constants.py": "X = 1\n",
        "stack.py": "from .constructs.site import Site\nclass Stack: ...\n",
        "constructs/__init__.py": "",
        "constructs/site.py": "from .. import constants\nclass Site: ...\n",
    }
    graph = import_graph(_tree(tmp_path / "app", files), "app")
    found = cycles(graph)
    assert len(found) == 1
    assert {"app", "app.stack", "app.constructs.site", "app.constants"} <= set(found[0])
    assert "app.constants" in graph["app.constructs.site"]
    assert "app" in graph["app.constants"]  # the parent edge: importing app.constants runs app/__init__

    # The fix: the __init__ a docstring, the app in its own module.
    files |= {"__init__.py": '"""The app is app.main."""\n', "main.py": heavy_init}
    assert cycles(import_graph(_tree(tmp_path / "app", files), "app")) == []


def test_a_function_level_import_cycle_is_found(tmp_path: Path) -> None:
    # The bench shape this branch removed: a registry imports its entries lazily, and each entry
    # imports its type from the registry.
    files = {
        "__init__.py": "",
        "registry.py": "class Entry: ...\n\ndef entries():\n    from reg import one\n    return [one.ENTRY]\n",
        "one.py": "from reg.registry import Entry\nENTRY = Entry()\n",
    }
    found = cycles(import_graph(_tree(tmp_path / "reg", files), "reg"))
    assert found == [["reg.one", "reg.registry"]]


def test_a_type_only_import_cycle_is_found(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "a.py": "from . import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",
    }
    assert cycles(import_graph(_tree(tmp_path / "typed", files), "typed")) == [["typed.a", "typed.b"]]


def test_two_packages_importing_each_other_are_found(tmp_path: Path) -> None:
    lo = _tree(tmp_path / "lo", {"__init__.py": "", "auth.py": "def token():\n    from to.smoke import sign_in\n"})
    to = _tree(tmp_path / "to", {"__init__.py": "", "smoke.py": "from lo import auth\n"})
    graph = graph_of({**module_names(lo, "lo"), **module_names(to, "to")})
    assert cycles(package_graph(graph)) == [["lo", "to"]]
