"""ragray's module import graph, read from the source (no import runs): every ``import`` and
``from … import`` anywhere in a module (top level or inside a function: a lazy import is still a
dependency), plus ``importlib.import_module("ragray.x")``-style calls that name a ragray module
by a string; imports under ``if TYPE_CHECKING:`` are left out (they never run) unless asked for."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ragray"
#: calls that import the module a string names (a string elsewhere, e.g. the catalog's table of
#: built-ins, is data: the registry imports it when the name is first used, from wherever that is)
IMPORT_CALLS = {"import_module", "__import__"}


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _targets(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        # ``from pkg import sub`` depends on pkg.sub when sub is a module, else on pkg
        return [f"{base}.{a.name}" for a in node.names] or [base]
    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in IMPORT_CALLS:
        return [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                and a.value.startswith("ragray.")]
    return []


def import_graph(root: Path = PACKAGE, *, type_only: bool = False) -> dict[str, set[str]]:
    """module -> the ragray modules it imports (the nearest existing module of each name);
    ``type_only``: the imports under ``if TYPE_CHECKING:`` too (a type checker follows them). Read
    once per tree state and process (the sources' sizes and times key it); each caller gets its own copy."""
    stamp = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(root.rglob("*.py")))
    return {m: set(edges) for m, edges in _graph(root, type_only, stamp).items()}


@functools.lru_cache(maxsize=4)
def _graph(root: Path, type_only: bool, stamp: tuple[tuple[str, int, int], ...]) -> dict[str, frozenset[str]]:
    mods = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        skip = set() if type_only else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for target in _targets(node, package):
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                # a module's own package is imported before it anyway: not an edge
                if target and target != name and not name.startswith(target + "."):
                    graph[name].add(target)
    return {m: frozenset(edges) for m, edges in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found
