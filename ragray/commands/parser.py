"""The ``ragray`` argument parser: its flags and the config setting each one sets."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ragray import __version__

__all__ = ["FLAG_SETTINGS", "build_parser", "flag_values"]


def _int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low`` (the message says which bound failed)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _add_config(p: argparse.ArgumentParser, config_help: str, example: str) -> None:
    p.add_argument("config", nargs="?", help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override a config value, e.g. --set {example} (repeatable)")


def _add_common(p: argparse.ArgumentParser) -> None:
    _add_config(p, "experiment YAML (default: built-in defaults)", "retrieval.bm25.k1=0.9")
    p.add_argument("--dataset", help="dataset file or folder, or 'demo' (data.path)")
    p.add_argument("--corpus", help="corpus file for global scope (data.corpus)")
    p.add_argument("--limit", type=_positive_int, help="use the first N questions (data.limit)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip and count bad dataset rows instead of failing (data.on_bad_row=skip)")
    p.add_argument("--top-k", type=_positive_int, help="passages per question (retrieval.top_k)")
    p.add_argument("--retriever", help="bm25, dense or hybrid (retrieval.retriever)")
    p.add_argument("--scope", choices=["per_question", "global"], help="retrieval.scope")
    p.add_argument("--out", help="run directory (default: runs/<command>-<name>-<time>)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragray", description="Influence-aware RAG diagnostics on Ray."
    )
    parser.add_argument("--version", action="version", version=f"ragray {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    retrieve = sub.add_parser(
        "retrieve", help="retrieve top-k passages per question and score them against gold ids"
    )
    _add_common(retrieve)
    retrieve.add_argument("--diversity", action="store_true", default=None,
                          help="1 - mean pairwise cosine of each question's hits (metrics.diversity)")
    retrieve.add_argument("--chunk-metrics", dest="chunk_metrics", action="store_true", default=None,
                          help="chunk lengths, cohesion vs separation, answer coverage (metrics.chunking)")
    run = sub.add_parser(
        "run", help="the influence loop: baseline + drop-one ablations, Spearman rho, flags"
    )
    _add_common(run)
    interpret = sub.add_parser(
        "interpret",
        help="faithfulness: importance, deletion arms (most/least/random/question), Case A/B/C with statistics",
    )
    _add_common(interpret)
    interpret.add_argument("--level", choices=["passage", "sentence", "token"],
                           help="explanation units (faithfulness.level)")
    interpret.add_argument("--hierarchical", action="store_true", default=None,
                           help="explain passages first, then units inside the top ones (faithfulness.hierarchical)")
    interpret.add_argument("--repeats", type=_positive_int,
                           help="R: random-deletion draws per K (faithfulness.random_repeats)")
    interpret.add_argument("--k", dest="k_values", action="append", metavar="K",
                           help="top-N, top-P%% or cumulative (repeatable; faithfulness.k_values)")
    interpret.add_argument("--mode", choices=["generate", "logprob"],
                           help="regenerate and compare, or score the baseline answer (faithfulness.mode)")
    interpret.add_argument("--explainer", choices=["loo", "logprob", "surrogate"],
                           help="ranks units for DEL_MOST/DEL_LEAST (faithfulness.explainer)")
    audit = sub.add_parser(
        "audit", help="retrieval integrity: coverage, noise, score and PASS/FAIL per query (exit 1 on any FAIL)"
    )
    _add_common(audit)
    audit.add_argument("--pdfs", help="folder of PDFs (the auditor layout; data.path with data.format=pdf)")
    audit.add_argument("--queries", help="queries.json for --pdfs (data.queries)")
    audit.add_argument("--ground-truth", help="ground_truth.json for --pdfs (data.ground_truth)")
    audit.add_argument("--llm", action="store_true", default=None,
                       help="add aspects and a plain-language explanation from the generator (audit.llm)")
    audit.add_argument("--backend", help="generator for --llm (generation.backend)")
    audit.add_argument("--model", help="generator model for --llm (generation.model)")
    score = sub.add_parser(
        "score", help="score an existing pipeline's outputs (question, passages, answer, gold) without re-running it"
    )
    _add_config(score, "experiment YAML (metrics.* settings)", "metrics.tau_h=0.4")
    score.add_argument("--records", required=True, help="JSONL/CSV/Parquet records of your pipeline")
    score.add_argument("--skip-bad-rows", action="store_true", help="skip and count bad records")
    score.add_argument("--out", help="run directory (default: runs/score-<name>-<time>)")
    score.add_argument("--no-progress", action="store_true", help="hide progress bars")
    for p in (run, interpret):
        p.add_argument("--backend", help="transformers, vllm or openai (generation.backend)")
        p.add_argument("--model", help="'smollm2' (packaged), a path or a hub id (generation.model)")
        p.add_argument("--resume", action="store_true",
                       help="continue the run in --out, skipping questions already finished")
        p.add_argument("--executor", choices=["local", "ray"],
                       help="run questions here or over Ray Data generator actors (execution.executor)")
        p.add_argument("--address", help="Ray cluster address for --executor ray (execution.address)")
    srv = sub.add_parser(
        "serve", help="the HTTP API on Ray Serve: retriever, reranker and generator deployments (serve.*)"
    )
    _add_config(srv, "experiment YAML: the corpus (data.*), models and serve.* options",
                "serve.generator.num_replicas=2")
    srv.add_argument("--dataset", help="corpus to serve: a dataset file or folder, or 'demo' (data.path)")
    srv.add_argument("--host", help="bind address (serve.host)")
    srv.add_argument("--port", type=_positive_int, help="HTTP port (serve.port)")
    srv.add_argument("--address", help="Ray cluster to deploy on (execution.address; default: in-process Ray)")
    srv.add_argument("--no-ray", action="store_true",
                     help="serve the same API from this process with uvicorn, without Ray (for a quick look)")
    sim = sub.add_parser(
        "simulate", help="a run directory of known ground truth from a seeded scenario, no model (simulation mode)"
    )
    _add_config(sim, "experiment YAML for the flag thresholds and metrics (default: built-in defaults)",
                "influence.divergence_threshold=0.5")
    sim.add_argument("--questions", type=_positive_int, default=50, help="simulated questions (default 50)")
    sim.add_argument("--k", type=_int_at_least(2), default=10, help="passages per question (default 10)")
    sim.add_argument("--scenario", default="mixed",
                     choices=["aligned", "random", "inverted", "dominant", "ignored", "aligned_sparse",
                              "buried_sparse", "positional", "mixed"],
                     help="how influence relates to the retrieval rank (default mixed: one per question)")
    sim.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    sim.add_argument("--out", help="run directory (default: runs/simulate-<scenario>-<time>)")
    sim.add_argument("--no-progress", action="store_true", help="hide progress bars")
    dash = sub.add_parser(
        "dashboard", help="web page of runs: reports, flags, question drill-down, compare, CSV upload (no internet)"
    )
    dash.add_argument("runs_dir", nargs="?", default="runs", metavar="RUNS_DIR",
                      help="folder of run directories to show (default: runs); uploads go to RUNS_DIR/uploads")
    dash.add_argument("--history", metavar="URL",
                      help="run history database (default: history.url of the built-in config, runs/ragray.sqlite)")
    dash.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    dash.add_argument("--port", type=_positive_int, default=8265 + 2, help="port (default 8267)")
    sweep = sub.add_parser(
        "sweep", help="configuration sweep on Ray Tune: one trial per configuration, a scored leaderboard"
    )
    sweep.add_argument("spec", help="sweep spec YAML (groups chunking/retrieval/rerank/generation, variants, search)")
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a base config value for every trial, e.g. --set data.limit=20 (repeatable)")
    sweep.add_argument("--out", help="sweep directory (default: runs/sweep-<name>-<time>)")
    sweep.add_argument("--address", help="Ray cluster for the trials (default: in-process Ray, or RAY_ADDRESS)")
    sweep.add_argument("--resume", action="store_true", help="continue the interrupted sweep in --out")
    _add_history_commands(sub)
    return parser


def _add_history_config(p: argparse.ArgumentParser) -> None:
    _add_config(p, "experiment YAML whose history.url names the database (default: built-in defaults)",
                "history.url=sqlite:////abs/ragray.sqlite")


def _add_page(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=_positive_int, default=50, help="show at most N (default 50)")
    p.add_argument("--offset", type=_non_negative_int, default=0, help="skip the first N (default 0)")


def _add_history_commands(sub: Any) -> None:
    """``ragray runs``, ``ragray presets`` and ``ragray cleanup``: the history database (history.url)."""
    runs = sub.add_parser("runs", help="the run history: recorded run/interpret/audit/score/sweep runs (history.url)")
    actions = runs.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    listing = actions.add_parser("list", help="recorded runs, newest first, as a table")
    _add_history_config(listing)
    listing.add_argument("--kind", help="only this kind: run, interpret, audit, score, sweep or trial")
    listing.add_argument("--status", help="only this status: running, done or failed")
    _add_page(listing)
    show = actions.add_parser("show", help="one run as JSON: config, status, timings, summary, result files")
    show.add_argument("run_id", metavar="ID", help="a run id from 'ragray runs list'")
    _add_history_config(show)

    presets = sub.add_parser("presets", help="named configs saved in the history database (history.url)")
    actions = presets.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    save = actions.add_parser("save", help="save CONFIG (with its --set overrides) as preset NAME, or update it")
    save.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'")
    _add_config(save, "experiment YAML to save; its history.url names the database", "retrieval.top_k=5")
    save.add_argument("--description", help="a line saying what the preset is for")
    for action, text in (("get", "print preset NAME as YAML (a config file for any command)"),
                         ("delete", "delete preset NAME")):
        p = actions.add_parser(action, help=text)
        p.add_argument("name", metavar="NAME")
        _add_history_config(p)
    listing = actions.add_parser("list", help="saved presets by name, as a table")
    _add_history_config(listing)
    _add_page(listing)

    cleanup = sub.add_parser("cleanup", help="delete expired ephemeral indexes and print the counts (history.url)")
    _add_history_config(cleanup)


FLAG_SETTINGS = {
    "dataset": "data.path", "corpus": "data.corpus", "limit": "data.limit",
    "top_k": "retrieval.top_k", "retriever": "retrieval.retriever", "scope": "retrieval.scope",
    "backend": "generation.backend", "model": "generation.model",
    "level": "faithfulness.level", "hierarchical": "faithfulness.hierarchical",
    "repeats": "faithfulness.random_repeats", "explainer": "faithfulness.explainer",
    "mode": "faithfulness.mode",
    "executor": "execution.executor", "address": "execution.address",
    "diversity": "metrics.diversity", "chunk_metrics": "metrics.chunking",
    "host": "serve.host", "port": "serve.port",
    "queries": "data.queries", "ground_truth": "data.ground_truth", "llm": "audit.llm",
}


def flag_values(args: argparse.Namespace) -> dict[str, object]:
    """Explicit flags as typed config values (not YAML-parsed: a path "1e5" stays a string)."""
    out: dict[str, object] = {
        key: getattr(args, flag) for flag, key in FLAG_SETTINGS.items()
        if getattr(args, flag, None) is not None
    }
    if getattr(args, "skip_bad_rows", False):
        out["data.on_bad_row"] = "skip"
    if getattr(args, "k_values", None):
        out["faithfulness.k_values"] = list(args.k_values)
    return out
