"""The import graph of a package, read from the AST, and the cycles in it.

An edge is every ``import``/``from … import`` that names a module of the package: at module
level, inside functions, under ``if TYPE_CHECKING:`` alike (a lazy import still runs when its
function does, and a type-only one is a circle waiting for the day it becomes real). Relative
imports are resolved. Each module also has an edge to its parent packages' ``__init__``, because
importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first: that is how a heavy
``__init__`` closes a circle no import statement shows.

``tests/unit/test_import_graph.py`` asserts there are none; a rank table for the product layer
can be checked on the same ``import_graph`` output.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path


def module_names(root_dir: Path, package_name: str) -> dict[str, Path]:
    """Every module of the package under ``root_dir`` (the package's own folder), by dotted name.

    A package is named for its ``__init__.py`` (``a.b``, not ``a.b.__init__``).
    """
    found: dict[str, Path] = {}
    for path in sorted(root_dir.rglob("*.py")):
        parts = path.relative_to(root_dir).with_suffix("").parts
        if any(part in {"node_modules", "__pycache__"} or part.startswith(".") for part in parts):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((package_name, *parts))] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imported_names(source: str, module: str, is_package: bool) -> set[str]:
    """Dotted names the source imports, relative imports resolved against ``module``.

    ``from x import y`` yields both ``x`` and ``x.y`` (``y`` may be a submodule); the caller
    keeps the names that are modules.
    """
    names: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts)
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _parents(name: str) -> Iterable[str]:
    parts = name.split(".")
    return (".".join(parts[:i]) for i in range(1, len(parts)))


def import_graph(root_dir: Path, package_name: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (plus the parent packages each import runs)."""
    return graph_of(module_names(root_dir, package_name))


def graph_of(modules: dict[str, Path]) -> dict[str, set[str]]:
    """The import graph over any set of modules (several packages' ``module_names`` merged)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for imported in imported_names(path.read_text(), name, _is_package(path)):
            # The longest prefix that is a module of this package: `from a.b import f` -> a.b.
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target:
                edges.add(target)
                edges.update(parent for parent in _parents(target) if parent in modules)
        # Importing this module ran its own parents' __init__ first.
        edges.update(parent for parent in _parents(name) if parent in modules)
        edges.discard(name)
        graph[name] = edges
    return graph


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph collapsed to top-level packages: ``local -> tools`` if any local module imports tools."""
    collapsed: dict[str, set[str]] = {}
    for module, targets in graph.items():
        top = module.partition(".")[0]
        collapsed.setdefault(top, set()).update(t.partition(".")[0] for t in targets)
        collapsed[top].discard(top)
    return collapsed


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a long import chain cannot hit the recursion limit.
        work: list[tuple[str, list[str]]] = [(start, sorted(graph.get(start, ())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=lambda c: (-len(c), c))


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete loop through a component (a -> b -> … -> a), to print when the test fails."""
    members = set(component)
    start = component[0]
    # Breadth-first from start's successors back to start, inside the component.
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, set()) & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    return component


def describe(graph: dict[str, set[str]], found: list[list[str]]) -> str:
    return "\n".join(
        f"{len(component)} modules: {', '.join(component)}\n  e.g. {' -> '.join(cycle_path(graph, component))}"
        for component in found
    )
