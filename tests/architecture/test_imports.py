"""The shape of the package: no import circles, nothing done at import, registries that match.

The import graph is read from the source (``tests/architecture/imports.py``): every import
anywhere in a module, lazy ones included, so a circle cannot hide inside a function.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from tests.architecture.imports import PACKAGE, cycles, import_graph, modules


@pytest.mark.parametrize("type_only", [False, True], ids=["run-time", "with-type-only-imports"])
def test_no_import_circles(type_only) -> None:
    """No circle at any depth: top-level and function-level imports, and (for type checkers) the
    ``TYPE_CHECKING`` ones too."""
    found = cycles(import_graph(type_only=type_only))
    assert found == [], "import circles (each a strongly connected set of modules):\n" + "\n".join(map(str, found))


def test_the_checker_finds_a_circle_and_follows_lazy_and_string_imports(tmp_path) -> None:
    pkg = tmp_path / "ragray"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from ragray.sub import b\n")
    (pkg / "sub" / "b.py").write_text("import importlib\nimportlib.import_module('ragray.c')\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ragray import d\n"
                              "from . import a\n")
    (pkg / "d.py").write_text("from ragray.c import x\n")
    graph = import_graph(pkg)
    assert graph["ragray.a"] == {"ragray.sub.b"} and graph["ragray.sub.b"] == {"ragray.c"}
    assert graph["ragray.c"] == {"ragray.a"}  # the TYPE_CHECKING import is not an edge
    assert cycles(graph) == [["ragray.a", "ragray.c", "ragray.sub.b"]]
    # type-only imports on request; a ragray module's name as data (not an import call) is no edge
    (pkg / "e.py").write_text("NAMES = dict.fromkeys(('x',), 'ragray.c')\nprint('ragray.a')\n")
    assert import_graph(pkg)["ragray.e"] == set()
    assert import_graph(pkg, type_only=True)["ragray.c"] == {"ragray.a", "ragray.d"}
    assert cycles(import_graph(pkg, type_only=True)) == [["ragray.a", "ragray.c", "ragray.d", "ragray.sub.b"]]


def test_the_checker_finds_a_circle_made_only_of_function_level_imports(tmp_path) -> None:
    pkg = tmp_path / "ragray"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text("def f():\n    import ragray.y\n")
    (pkg / "y.py").write_text("class K:\n    def g(self):\n        from ragray import x\n")
    assert cycles(import_graph(pkg)) == [["ragray.x", "ragray.y"]]


def test_no_module_sets_the_environment_at_import() -> None:
    """Environment defaults (Ray's) are set by a function when needed, never by importing."""
    offenders = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only
            for sub in ast.walk(node):
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                    break
                text = ast.unparse(sub) if isinstance(sub, ast.Call) else ""
                if text.startswith(("os.environ.setdefault", "os.environ.update", "os.putenv")):
                    offenders.append(f"{name}: {text}")
            if isinstance(node, ast.Assign) and any("os.environ[" in ast.unparse(t) for t in node.targets):
                offenders.append(f"{name}: {ast.unparse(node)}")
    assert offenders == []


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_importing_every_module_leaves_ray_and_the_environment_alone() -> None:
    """Import all of ragray in a fresh interpreter: none of ragray's Ray defaults (nor a RAGRAY_*
    variable) is set, and Ray is not started (Ray's own import may set its internals)."""
    code = (
        "import importlib, os, sys\n"
        f"names = {sorted(modules())!r}\n"
        "before = dict(os.environ)\n"
        "for n in names:\n"
        "    importlib.import_module(n)\n"
        "from ragray.adapters.execution.ray_runtime import RAY_ENV_DEFAULTS\n"
        "changed = sorted(k for k in os.environ if os.environ.get(k) != before.get(k)\n"
        "                 and (k in RAY_ENV_DEFAULTS or k.startswith('RAGRAY')))\n"
        "ray = sys.modules.get('ray')\n"
        "print(changed, bool(ray and ray.is_initialized()))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=PACKAGE.parent, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "[] False", out.stdout[-500:]


def test_registries_know_their_builtins_without_importing_them() -> None:
    """Each registry names its built-in components; looking each up imports the module that
    registers exactly that name, and no component module registers a name the registry misses."""
    from ragray.generation.base import GENERATORS
    from ragray.rerank.base import RERANKERS
    from ragray.retrieval.base import RETRIEVERS

    for registry in (GENERATORS, RETRIEVERS, RERANKERS):
        assert registry.check(registry.names()[0]) == registry.names()[0]
        classes = registry.load_all()
        assert all(cls.name == name for name, cls in classes.items()), registry.kind
    registered = {}
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(
                    ("GENERATORS.register", "RETRIEVERS.register", "RERANKERS.register")):
                registered[(ast.unparse(node.func).split(".")[0], node.args[0].value)] = name
    builtins = {("GENERATORS", n) for n in GENERATORS.names()} | {("RETRIEVERS", n) for n in RETRIEVERS.names()} \
        | {("RERANKERS", n) for n in RERANKERS.names()}
    assert set(registered) == builtins


def test_null_components_are_declared_by_a_class_attribute() -> None:
    from ragray.generation.base import GENERATORS
    from ragray.rerank import RERANKERS, reranks
    from ragray.retrieval.base import RETRIEVERS

    assert [n for n in RERANKERS.names() if RERANKERS.get(n).passthrough] == ["none"]
    assert not reranks("none") and reranks("bi_encoder")
    assert [n for n in RETRIEVERS.names() if not RETRIEVERS.get(n).ranks_corpus] == ["given"]
    assert [n for n in GENERATORS.names() if GENERATORS.get(n).simulated] == ["simulated"]


def test_config_validation_imports_no_component() -> None:
    """Validating every kind of name (backend, reranker, retriever and scope, template, answer
    measures) imports nothing of ragray but the config layer: ``config`` (its section modules),
    ``config_paths``, ``catalog``, ``errors`` (and ``_moved``, which ``import ragray`` installs)."""
    code = (
        "import sys\n"
        "from ragray.config import load_config\n"
        "load_config(None, ['generation.backend=vllm', 'rerank.strategy=bge', 'retrieval.retriever=hybrid',"
        " 'retrieval.scope=global', 'generation.template=short', 'faithfulness.measures=[rouge_l,semantic]',"
        " 'influence.similarity=edit'])\n"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('ragray.')}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "['_moved', 'catalog', 'config', 'config_paths', 'errors']"


def test_the_catalog_matches_the_registries() -> None:
    """What config validation reads (the catalog) is what the registries and templates hold."""
    from ragray.catalog import CATALOG, ranks_corpus
    from ragray.generation.base import GENERATORS
    from ragray.generation.prompts import TEMPLATES
    from ragray.metrics.similarity import SIMILARITIES
    from ragray.rerank.base import RERANKERS
    from ragray.retrieval.base import RETRIEVERS

    for kind, registry in (("generator", GENERATORS), ("retriever", RETRIEVERS), ("reranker", RERANKERS),
                           ("similarity", SIMILARITIES)):
        assert set(registry.load_all()) == set(CATALOG[kind]), kind
    assert set(TEMPLATES) == set(CATALOG["template"])
    assert {n: ranks_corpus(n) for n in RETRIEVERS.names()} == {n: RETRIEVERS.get(n).ranks_corpus
                                                                 for n in RETRIEVERS.names()}


def test_a_plugin_registered_at_run_time_passes_validation() -> None:
    from ragray.config import load_config
    from ragray.errors import ConfigError
    from ragray.retrieval.base import RETRIEVERS, Retriever

    with pytest.raises(ConfigError, match="unknown retriever 'mine'"):
        load_config(None, ["retrieval.retriever=mine"])

    @RETRIEVERS.register("mine")
    class Mine(Retriever):
        name = "mine"
        ranks_corpus = False

    try:
        assert load_config(None, ["retrieval.retriever=mine", "retrieval.scope=per_question"]).retrieval.retriever == "mine"
        with pytest.raises(ConfigError, match="needs scope per_question"):
            load_config(None, ["retrieval.retriever=mine", "retrieval.scope=global"])
    finally:
        RETRIEVERS._items.pop("mine")
