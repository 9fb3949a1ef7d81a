"""The layers of ragray, bottom to top, and the rule that an import runs down (or sideways) only.

Run with ``-s`` to see the order: ``pytest tests/architecture/test_layers.py -s``. A module belongs
to the layer of its longest listed prefix; a new top-level module must be placed here.
"""

from tests.architecture.imports import import_graph

#: bottom to top: tiers of packages, and within a tier its packages bottom to top. Each package (or
#: top-level module) is a row of its own: it may import itself and the rows below it, never a row
#: above, sideways included, so no two packages tie both ways
LAYERS: list[tuple[str, str, tuple[str, ...]]] = [
    ("foundation", "errors, plain types, paths, registries, the console and progress, text helpers",
     ("ragray.errors", "ragray.types", "ragray.paths", "ragray.console", "ragray.worker", "ragray.demo",
      "ragray.cancel", "ragray._moved", "ragray._imports", "ragray.catalog", "ragray.registry",
      "ragray.model_loads", "ragray.progress", "ragray.text")),
    ("config", "the validated config, its paths, who may set what, the short names of settings",
     ("ragray.config_paths", "ragray.config", "ragray.config_access", "ragray.shortcuts")),
    ("records", "typed rows and summaries, run directories and the history, data sets, sentence encoders",
     ("ragray.rows", "ragray.store", "ragray.data", "ragray.encoders")),
    ("models", "generators, rerankers, the caches of their work, retrievers",
     ("ragray.generation", "ragray.rerank", "ragray.cache", "ragray.retrieval", "ragray.loopback")),
    ("measures", "the retrieval audit, answer metrics and statistics, attributions, the ablation engine and "
     "its checks, faithfulness",
     ("ragray.audit", "ragray.metrics", "ragray.attribution", "ragray.ablation", "ragray.faithfulness")),
    ("outputs", "report.html and its charts", ("ragray.report",)),
    ("pipeline", "what every command does, whoever calls it", ("ragray.pipeline", "ragray.simulate")),
    ("api", "the Python API", ("ragray.api_inputs", "ragray.api_tables", "ragray.api", "ragray.attributor")),
    ("adapters", "the CLI, HTTP (Serve), Tune, Ray Data and the dashboard: they call the pipeline or the API",
     ("ragray.adapters",)),
]

#: every package's row, bottom to top
ROWS: list[str] = [p for _, _, prefixes in LAYERS for p in prefixes]


def layer_of(module: str) -> int | None:
    """The row of ``module``'s package (its longest listed prefix), or None where it has none."""
    best: tuple[int, int] | None = None
    for i, p in enumerate(ROWS):
        if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
            best = (i, len(p))
    return None if best is None else best[0]


def test_every_module_has_a_layer_and_imports_run_down():
    graph = import_graph()
    print("\nragray's layers, bottom to top (each package a row):")
    for name, what, prefixes in LAYERS:
        print(f"  {name:<11} {what}: {', '.join(p.removeprefix('ragray.') for p in prefixes)}")
    unplaced = sorted(m for m in graph if m != "ragray" and layer_of(m) is None)
    assert not unplaced, f"place these modules in a layer: {unplaced}"
    up = sorted(f"{a} -> {b} ({ROWS[layer_of(b)]} is above {ROWS[layer_of(a)]})" for a, bs in graph.items()
                for b in bs if a != "ragray" and layer_of(b) is not None and layer_of(b) > layer_of(a))
    assert not up, "imports running up (0 allowed):\n" + "\n".join(up)


def test_no_two_packages_tie_both_ways():
    """A package tie both ways is what an upward import makes; asked directly so the message names
    the pair even where the rows are reordered to hide one direction."""
    graph = import_graph()
    ties = {(layer_of(a), layer_of(b)) for a, bs in graph.items() for b in bs
            if a != "ragray" and layer_of(a) is not None and layer_of(b) is not None and layer_of(a) != layer_of(b)}
    both = sorted({tuple(sorted((ROWS[x], ROWS[y]))) for x, y in ties if (y, x) in ties})
    assert not both, f"packages importing each other: {both}"


def test_the_python_api_does_not_import_the_cli():
    graph = import_graph()
    api = {m for m in graph if m in ("ragray.api", "ragray.api_inputs", "ragray.api_tables", "ragray.attributor")}
    reached = {b for a in api for b in graph[a]}
    assert not {b for b in reached if b.startswith(("ragray.adapters.cli", "ragray.adapters.commands"))}
