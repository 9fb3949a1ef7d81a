"""The layers of ragray, bottom to top, and the rule that an import runs down (or sideways) only.

Run with ``-s`` to see the order: ``pytest tests/architecture/test_layers.py -s``. A module belongs
to the layer of its longest listed prefix; a new top-level module must be placed here.
"""

from tests.architecture.imports import import_graph

#: bottom to top: each layer may import its own and the ones below it
LAYERS: list[tuple[str, str, tuple[str, ...]]] = [
    ("foundation", "errors, plain types, paths, registries, the console and progress, text helpers",
     ("ragray._imports", "ragray._moved", "ragray.errors", "ragray.types", "ragray.paths", "ragray.registry", "ragray.catalog",
      "ragray.model_loads", "ragray.console", "ragray.progress", "ragray.text", "ragray.worker", "ragray.demo",
      "ragray.cancel")),
    ("config", "the validated config, its paths, who may set what, the short names of settings",
     ("ragray.config", "ragray.config_paths", "ragray.config_access", "ragray.shortcuts")),
    ("records", "typed rows and summaries, data sets, run directories and the history, sentence encoders",
     ("ragray.rows", "ragray.data", "ragray.store", "ragray.encoders")),
    ("models", "generators, retrievers, rerankers and the caches of their work",
     ("ragray.generation", "ragray.retrieval", "ragray.rerank", "ragray.cache", "ragray.loopback")),
    ("measures", "answer metrics, attributions, the ablation engine, faithfulness, the retrieval audit",
     ("ragray.metrics", "ragray.attribution", "ragray.ablation", "ragray.faithfulness", "ragray.audit")),
    ("outputs", "report.html and its charts", ("ragray.report",)),
    ("pipeline", "what every command does, whoever calls it", ("ragray.pipeline", "ragray.simulate")),
    ("api", "the Python API", ("ragray.api", "ragray.api_inputs")),
    ("adapters", "the CLI, HTTP (Serve), Tune, Ray Data and the dashboard: they call the pipeline or the API",
     ("ragray.adapters",)),
]

#: imports that run up a layer, each with why (none today; at most 4 may ever be allowed)
ALLOWED_UP: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for i, (_, _, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


def test_every_module_has_a_layer_and_imports_run_down():
    graph = import_graph()
    print("\nragray's layers, bottom to top:")
    for i, (name, what, prefixes) in enumerate(LAYERS):
        print(f"  {i} {name:<11} {what}: {', '.join(p.removeprefix('ragray.') for p in prefixes)}")
    unplaced = sorted(m for m in graph if m != "ragray" and layer_of(m) is None)
    assert not unplaced, f"place these modules in a layer: {unplaced}"
    up = sorted((a, b) for a, bs in graph.items() for b in bs
                if a != "ragray" and layer_of(b) is not None and layer_of(b) > layer_of(a))
    unexpected = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})" for a, b in up
                  if (a, b) not in ALLOWED_UP]
    assert not unexpected, "imports running up a layer:\n" + "\n".join(unexpected)
    assert len(ALLOWED_UP) <= 4


def test_the_python_api_does_not_import_the_cli():
    graph = import_graph()
    api = {m for m in graph if m in ("ragray.api", "ragray.api_inputs")}
    reached = {b for a in api for b in graph[a]}
    assert not {b for b in reached if b.startswith(("ragray.adapters.cli", "ragray.adapters.commands"))}
