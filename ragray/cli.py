"""The ``ragray`` command line.

Precedence of settings: built-in defaults < CONFIG file < ``--set key=value`` < explicit flags
(``--dataset``, ``--top-k`` ...). Errors in user input exit with status 2 and one message that
says what and where; backend failures exit with status 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragray import __version__
from ragray.config_paths import is_path_keyword
from ragray.console import print_pairs, print_table
from ragray.errors import (
    BackendError,
    ConfigError,
    InputError,
    MissingDependencyError,
    RagrayError,
)

if TYPE_CHECKING:
    from ragray.rows.summaries import RunSummary

__all__ = ["main", "build_parser"]

log = logging.getLogger("ragray")


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
    p.add_argument("--dataset", help="dataset file or folder, or a name: demo, squad, hotpotqa, pubmedqa, "
                                     "scifact, nq (data.path)")
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
    srv.add_argument("--dataset", help="corpus to serve: a dataset file or folder, or a name such as "
                                       "'demo' or 'scifact' (data.path)")
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


_FLAG_KEYS = {
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


def _flag_values(args: argparse.Namespace) -> dict[str, object]:
    """Explicit flags as typed config values (not YAML-parsed: a path "1e5" stays a string)."""
    out: dict[str, object] = {
        key: getattr(args, flag) for flag, key in _FLAG_KEYS.items()
        if getattr(args, flag, None) is not None
    }
    if getattr(args, "skip_bad_rows", False):
        out["data.on_bad_row"] = "skip"
    if getattr(args, "k_values", None):
        out["faithfulness.k_values"] = list(args.k_values)
    return out


def _cmd_retrieve(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_retrieve
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    config = load_config(args.config, args.overrides, _flag_values(args))
    out = args.out or default_run_dir("retrieve", config.name)
    result = run_retrieve(config, out, progress=not args.no_progress)
    m = result.metrics
    print(f"ragray retrieve: {result.n_questions} questions, {config.retrieval.retriever} "
          f"top-{config.retrieval.top_k}, scope {config.retrieval.scope}, "
          f"{result.seconds:.1f}s -> {result.out}")
    if result.n_skipped_rows:
        print(f"  skipped {result.n_skipped_rows} bad rows (listed in metrics.json)")
    if m.get("n_scored"):
        k = m["k"]
        print_table(["hit@1", "hit@5", f"hit@{k}", "MRR", "nDCG@10", "n"],
                    [[f"{m['hit_at_1']:.3f}", f"{m['hit_at_5']:.3f}", f"{m['hit_at_k']:.3f}", f"{m['mrr']:.3f}",
                      f"{m['ndcg_at_10']:.3f}", m["n_scored"]]], numeric=range(6))
    else:
        print("  no gold passage ids: retrieval metrics not computed")
    if m.get("diversity") is not None:
        print(f"  diversity (1 - mean pairwise cosine of the hits): {m['diversity']:.3f}")
    if m.get("chunking"):
        c = m["chunking"]
        print(f"  chunks: {c['n_chunks']}, tokens {_fmt(c['tokens_mean'], '.1f')} ± {_fmt(c['tokens_std'], '.1f')}, "
              f"cohesion {_fmt(c['cohesion'])} vs separation {_fmt(c['separation'])}, "
              f"answer coverage {_fmt(c['coverage'])}")
    return 0


def _fmt(value: object, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _resumable_run(args: argparse.Namespace, command: str) -> tuple[Any, str]:
    """The config and run directory of a resumable command (``--resume`` needs ``--out``)."""
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    config = load_config(args.config, args.overrides, _flag_values(args))
    if args.resume and not args.out:
        raise InputError("--resume needs --out DIR (the run directory to continue)")
    args.resume_dir = str(args.out or default_run_dir(command, config.name))
    return config, args.resume_dir


def _cmd_run(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_influence
    config, out = _resumable_run(args, "run")
    result = run_influence(config, out, resume=args.resume, progress=not args.no_progress)
    s = result.summary
    print(f"ragray run: {s.n_questions} questions ({result.n_resumed} resumed), "
          f"{s.model} via {s.backend}, {s.retriever} top-{s.top_k} -> {result.out}")
    _print_influence_summary(s)
    _print_where(s)
    _print_next(result.out)
    return 0


def _print_where(s: Any) -> None:
    """What the backend's ``auto`` settings became and, on Ray, where each actor ran."""
    from ragray.execution.placement import placement_lines

    if s.backend_settings:
        print("  backend: " + ", ".join(f"{k} {v}" for k, v in s.backend_settings.items()))
    if s.resources:
        r = s.resources
        print(f"  Ray actors: {r['count']}, {r['cpus']:g} CPU and {r['gpus']:g} GPU each")
    if s.placement:
        print(f"  placement (actors that made records: {len(s.placement)}):")
        print("\n".join(placement_lines(s.placement)))


def _print_next(out: Path | str) -> None:
    """Where the report is, and what to open next."""
    report = Path(out) / "report.html"
    print(f"\nreport: {report}")
    print(f"next: open {report} in a browser (alignment and validity first), or `ragray dashboard "
          f"{Path(out).parent}` to browse and compare runs")


def _cmd_simulate(args: argparse.Namespace) -> int:
    from ragray.config import load_config
    from ragray.simulate import simulate
    from ragray.store.rundir import default_run_dir

    base = load_config(args.config, args.overrides)
    out = args.out or default_run_dir("simulate", args.scenario)
    result = simulate(out, n_questions=args.questions, k=args.k, scenario=args.scenario, seed=args.seed,
                      base=base, progress=not args.no_progress)
    s = result.summary
    mix = ", ".join(f"{k} {v}" for k, v in s.simulated["questions_per_scenario"].items())
    print(f"ragray simulate: {s.n_questions} simulated questions ({mix}), k={args.k}, seed {args.seed}, "
          f"no model -> {result.out}")
    _print_influence_summary(s)
    return 0


def _alignment_rows(s: RunSummary) -> list[tuple[str, str]]:
    """The tie-robust verdict first (absent from runs written before it existed)."""
    a = s.alignment
    if not a:
        return [("misaligned rate", "not measured (run written before the tie-robust measures)")]
    nd, rbo = a.usage_ndcg, a.rbo_alignment
    rows = [
        (f"misaligned rate (usage nDCG < {a.misalignment_threshold})",
         f"{_fmt(a.misaligned_rate)}  over {a.n_scored} questions with some influence"),
        ("usage nDCG / RBO (p=%g)" % a.rbo_p,
         f"{_fmt(nd.mean)} (95% CI {_fmt(nd.low)} .. {_fmt(nd.high)}) / {_fmt(rbo.mean)}"),
        ("top-1 used / relies on lower rank",
         f"{_fmt(a.top1_used_rate)} / {_fmt(a.relies_on_lower_rank_rate)}"),
    ]
    if a.divergent_not_misaligned:
        rows.append(("divergent but not misaligned",
                     f"{a.divergent_not_misaligned} questions: the seed's rho rule fires, yet the retriever's "
                     f"order matches use (mean rho ceiling {_fmt(a.divergent_not_misaligned_mean_rho_ceiling)})"))
    pos = s.position
    if pos is None or pos.control == "none":
        rows.append(("position control", "none: influence may follow the slot, not the passage "
                     "(influence.position_control: reversed)"))
    else:
        rows.append((f"position-driven rate ({pos.control} order)",
                     f"{_fmt(pos.position_driven_rate)}, mean sensitivity {_fmt(pos.position_sensitivity.mean)}"
                     f", {pos.control_calls} extra calls ({_fmt(pos.control_call_share, '.0%')})"))
    return rows


def _validity_lines(s: RunSummary) -> list[str]:
    v = s.validity or {}
    if not v.get("available"):
        return [f"  validity: not measured ({v.get('reason') or 'run written before the validity panel'})"]
    out = ["  validity against gold passages (recovery@1 / AUC, 95% bootstrap CI):"]
    for name, sub in v["subsets"].items():
        out.append(f"    {name} ({sub['n']} questions)")
        for m in sub["measures"].values():
            r, auc = m["recovery_at_1"], m["auc"]
            out.append(f"      {m['label']:<48} {_fmt(r['mean'])} [{_fmt(r['low'])}, {_fmt(r['high'])}]"
                       f"  {_fmt(auc['mean'])} [{_fmt(auc['low'])}, {_fmt(auc['high'])}]")
    out += [f"  {line}" for line in v["verdicts"]]
    return out


def _mode_text(s: RunSummary) -> str:
    from ragray.metrics.summary import describe_mode
    label, note = describe_mode(s)
    return f"{label} ({note})" if note else label


def _print_influence_summary(s: RunSummary) -> None:
    lo, hi = s.mean_spearman_ci95
    rows = [
        ("measured questions", f"{s.n_measured} / {s.n_questions}  {s.states}"),
        ("influence measured by", _mode_text(s)),
        *_alignment_rows(s),
        ("mean Spearman rho (seed)", f"{_fmt(s.mean_spearman)}  (95% CI {_fmt(lo)} .. {_fmt(hi)})"),
        (f"divergent rate (seed's rule, rho < {s.divergence_threshold})", _fmt(s.divergent_rate)),
        ("mean dominance", _fmt(s.mean_dominance)),
        ("baseline exact match / F1", f"{_fmt(s.baseline_exact_match)} / {_fmt(s.quality.f1)}"),
        ("grounding / hallucination rate",
         f"{_fmt(s.quality.grounding)} / {_fmt(s.quality.hallucination_rate)}"),
        ("noise ratio: labels / causal",
         f"{_fmt(s.quality.label_noise_ratio)} / {_fmt(s.quality.causal_noise_ratio)}"),
        ("flags", ", ".join(f"{k} {v}" for k, v in s.flag_counts.items() if v) or "none"),
        ("calls", f"{s.n_calls} ({s.n_failed_calls} failed), {_fmt(s.calls_per_second, '.2f')} calls/s"),
        ("errors", str(s.errors)),
    ]
    print_pairs(rows)
    print("\n".join(_validity_lines(s)))
    if s.evidence:
        from ragray.metrics.evidence import evidence_lines

        print("  evidence (validity panel v2: measures vs every free control, paired bootstrap, Holm):")
        print("\n".join(f"    {line}" for line in evidence_lines(s.evidence)))


def _p(value: object) -> str:
    return "-" if value is None else f"{value:.3g}"


def _cmd_interpret(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_interpret
    config, out = _resumable_run(args, "interpret")
    result = run_interpret(config, out, resume=args.resume, progress=not args.no_progress)
    s = result.summary
    print(f"ragray interpret: {s.n_questions} questions ({result.n_resumed} resumed, {s.n_failed} failed), "
          f"{s.model}, {s.level} level{' (hierarchical)' if s.hierarchical else ''}, "
          f"explainer {s.explainer}, {s.mode} mode, R={s.random_repeats} -> {result.out}")
    rows = []
    for label, k in s.per_k.items():
        c = {name: v["count"] for name, v in k["cases"].items()}
        mv = k["most_vs_random"]
        rows.append([label, c["A"], c["B"], c["C"], c["inconclusive"], _fmt(k["sim_most_mean"]),
                     _fmt((k["random_mean"] or {}).get("mean")), _fmt(k["sim_least_mean"]),
                     _p(mv["paired"]["wilcoxon"]["p_value"]), _p(mv["mcnemar"]["p_value"])])
    print_table(["K", "A", "B", "C", "inc.", "sim most", "random", "least", "Wilcoxon p", "McNemar p"], rows,
                numeric=range(1, 10))
    ctl, cost = s.controls, s.cost
    print(f"  controls: parametric {_fmt(ctl.parametric_rate)}, position-sensitive "
          f"{_fmt(ctl.position_sensitive_rate)}, sim without question {_fmt(ctl.del_q_sim_mean)}")
    for pair, v in s.agreement.items():
        print(f"  agreement {pair}: Spearman {_fmt(v['mean_spearman'])}, top-1 {_fmt(v['top1_agreement'])}")
    print(f"  cost per question: {_fmt(cost.calls_generated_per_question, '.1f')} model calls "
          f"({_fmt(cost.calls_requested_per_question, '.1f')} arm calls), "
          f"{_fmt(cost.score_passes_per_question, '.1f')} scoring passes, "
          f"{_fmt(cost.seconds_per_question, '.1f')} s")
    _print_where(s)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_audit
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    if args.pdfs and args.dataset:
        raise InputError("give either --dataset or --pdfs, not both")
    values = _flag_values(args)
    if "retrieval.top_k" in values:  # for the audit, --top-k is the number of documents audited
        values["audit.k"] = values.pop("retrieval.top_k")
    if args.pdfs:
        values.update({"data.path": args.pdfs, "data.format": "pdf"})
    config = load_config(args.config, args.overrides, values)
    out = args.out or default_run_dir("audit", config.name)
    result = run_audit(config, out, progress=not args.no_progress)
    s, queries = result.summary, result.entries
    print("=== RETRIEVAL INTEGRITY AUDIT ===")
    for e in queries if len(queries) <= 10 else [e for e in queries if e.status != "PASS"][:20]:
        print(f"query: {e.query}")
        for key in ("score", "coverage", "precision", "recall", "noise_ratio", "status"):
            print(f"{key}: {'-' if getattr(e, key) is None else getattr(e, key)}")
        if e.explanation:
            print(f"explanation: {e.explanation}")
        print()
    if len(queries) > 10:
        print(f"(showing the first {min(20, s.n_fail + s.n_unscored)} queries that did not pass; "
              "all are in audit_report.json)")
    print(f"ragray audit: {s.n_pass}/{s.n_scored} PASS (pass rate {_fmt(s.pass_rate)}), "
          f"{s.n_unscored} unscored, {config.retrieval.retriever} top-{s.k} documents -> {result.out}")
    print_pairs([("mean score", _fmt(s.mean_score, ".1f")), ("coverage %", _fmt(s.mean_coverage, ".1f")),
                 ("noise %", _fmt(s.mean_noise_ratio, ".1f")), ("precision", _fmt(s.mean_precision, ".2f")),
                 ("recall", _fmt(s.mean_recall, ".2f"))])
    return result.exit_code


def _cmd_score(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_score
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    config = load_config(args.config, args.overrides, _flag_values(args))
    out = args.out or default_run_dir("score", config.name)
    result = run_score(config, args.records, out)
    s = result.summary
    print(f"ragray score: {s.n} records ({s.n_with_gold} with gold answers, "
          f"{s.skipped_rows} skipped) -> {result.out}")
    rows = [
        ("exact match / token F1", f"{_fmt(s.em)} / {_fmt(s.f1)}"),
        ("recall@k (cosine >= tau)", _fmt(s.recall_at_k_cosine)),
        ("Sim(answer, gold)", _fmt(s.sim_answer_gold)),
        ("grounding Sim(answer, context)", _fmt(s.grounding)),
        (f"hallucination rate (tau_h {s.tau_h})", _fmt(s.hallucination_rate)),
        ("relevance Sim(answer, question)", _fmt(s.relevance)),
        ("label noise ratio", _fmt(s.label_noise_ratio)),
        ("latency s / cost USD", f"{_fmt(s.latency_s, '.2f')} / {_fmt(s.cost_usd_total, '.4f')}"),
    ]
    print_pairs(rows)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from ragray.config import load_config

    config = load_config(args.config, args.overrides, _flag_values(args))
    sc = config.serve
    auth = "on" if os.environ.get(sc.api_key_env) else f"off (set ${sc.api_key_env} to require a bearer token)"
    print(f"ragray serve: http://{sc.host}:{sc.port}  corpus {config.data.path}, "
          f"{config.generation.backend}:{config.generation.model}, auth {auth}; docs at /docs", flush=True)
    if args.no_ray:
        import uvicorn

        from ragray.serving.local import local_app

        uvicorn.run(local_app(config), host=sc.host, port=sc.port)
        return 0
    from ragray.serving.app import start_server

    start_server(config, blocking=True)
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from ragray._imports import require
    from ragray.config import ExperimentConfig

    uvicorn = require("uvicorn", extra="dashboard", feature="ragray dashboard")
    require("fastapi", extra="dashboard", feature="ragray dashboard")
    if not Path(args.runs_dir).is_dir():
        raise InputError(f"RUNS_DIR: no such folder: {args.runs_dir}")
    history = args.history or ExperimentConfig().history.url
    from ragray.dashboard.app import make_dashboard

    app = make_dashboard(args.runs_dir, history)
    print(f"ragray dashboard: {args.runs_dir} (history {history}) on http://{args.host}:{args.port}/  (Ctrl-C stops)")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ragray.commands.sweep import sweep_command

    if args.resume and not args.out:
        raise InputError("--resume needs --out: the sweep directory to continue")
    if args.out is None:  # named here, so an interrupted sweep can say where to resume
        from ragray.store.rundir import default_run_dir
        from ragray.sweep.spec import load_spec
        args.out = str(default_run_dir("sweep", load_spec(args.spec, args.overrides)[0].name))
    args.resume_dir = args.out
    result = sweep_command(args.spec, args.out, address=args.address, resume=args.resume, overrides=args.overrides)
    return 0 if result.best is not None else 1


def _cmd_history(args: argparse.Namespace) -> int:
    from ragray.commands.history import HISTORY_COMMANDS

    return HISTORY_COMMANDS[args.command](args)


COMMANDS = {"retrieve": _cmd_retrieve, "run": _cmd_run, "interpret": _cmd_interpret, "audit": _cmd_audit,
            "score": _cmd_score, "serve": _cmd_serve, "runs": _cmd_history, "presets": _cmd_history,
            "cleanup": _cmd_history, "sweep": _cmd_sweep, "simulate": _cmd_simulate,
            "dashboard": _cmd_dashboard}


RESUMABLE = ("run", "interpret", "sweep")


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's stop), handled like Ctrl-C: finished work is on disk."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def resume_command(command: str, argv: Sequence[str], out: str) -> str:
    """The command line that continues an interrupted run: the same arguments, ``--out`` the
    run directory it was writing, ``--resume``."""
    words, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        elif not word.startswith("--out=") and word != "--resume":
            words.append(word)
    return shlex.join(["ragray", *words, "--out", out, "--resume"])


def _interrupted(args: argparse.Namespace, argv: Sequence[str], exc: KeyboardInterrupt) -> int:
    how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
    out = getattr(args, "resume_dir", None)
    if out is None:
        print(f"ragray {args.command}: {how}", file=sys.stderr)
        return 130
    print(f"ragray {args.command}: {how}; every finished {'trial' if args.command == 'sweep' else 'question'} "
          f"is kept in {out}. Resume with:\n  {resume_command(args.command, argv, out)}", file=sys.stderr)
    return 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    # resumable commands: SIGTERM stops them like Ctrl-C, saying how to resume (servers keep their own)
    handle = args.command in RESUMABLE and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if handle else None
    try:
        return _dispatch(args, argv)
    finally:
        if handle:
            signal.signal(signal.SIGTERM, previous)


#: arguments that name local files or directories
_PATH_ARGS = ("config", "dataset", "corpus", "queries", "ground_truth", "pdfs", "out", "spec", "records", "runs_dir")


def _anchor_path_args(args: argparse.Namespace) -> None:
    """Relative path arguments made absolute now, when the command will join a Ray cluster: a job
    driver's working directory can be deleted and unpacked again while it runs (see
    :mod:`ragray.execution.ray_runtime`), and a path resolved in that window would fail."""
    if not (os.environ.get("RAY_ADDRESS") or getattr(args, "address", None)):
        return
    for name in _PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value and not is_path_keyword(value):
            setattr(args, name, os.path.abspath(value))


def _dispatch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    _anchor_path_args(args)
    if getattr(args, "no_progress", False):
        os.environ["TQDM_DISABLE"] = "1"  # also silences bars inside libraries (embedding, reranking)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except (ConfigError, InputError) as exc:
        print(f"ragray {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MissingDependencyError as exc:
        print(f"ragray {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (BackendError, RagrayError) as exc:
        print(f"ragray {args.command}: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        return _interrupted(args, argv, exc)


if __name__ == "__main__":
    raise SystemExit(main())
