"""The ``ragray`` command line.

Precedence of settings: built-in defaults < CONFIG file < ``--set key=value`` < explicit flags
(``--dataset``, ``--top-k`` ...). Errors in user input exit with status 2 and one message that
says what and where; backend failures exit with status 1, and so does a result that cannot be
written (a full disk, a quota): one line naming the file and, for a resumable command, the
command that resumes it. Ctrl-C and SIGTERM exit with 130, saying how to resume.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragray.adapters.commands.parser import build_parser
from ragray.adapters.commands.parser import flag_values as _flag_values
from ragray.adapters.commands.stopped import interrupted as _interrupted
from ragray.adapters.commands.stopped import on_sigterm as _on_sigterm
from ragray.adapters.commands.stopped import resume_command, write_failed
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

__all__ = ["main", "build_parser", "resume_command"]

log = logging.getLogger("ragray")


def _cmd_retrieve(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_retrieve
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    config = load_config(args.config, args.overrides, _flag_values(args))
    out = args.out or default_run_dir("retrieve", config.name)
    result = run_retrieve(config, out, progress=not args.no_progress)
    m = result.metrics
    print(f"ragray retrieve: {result.n_questions} questions, {result.sources}, "
          f"{result.seconds:.1f}s -> {result.out}")
    if result.n_skipped_rows:
        print(f"  skipped {result.n_skipped_rows} bad rows (listed in metrics.json)")
    if m.get("n_scored"):
        k = m["k"]
        cuts = [c for c in (1, 5) if c < k]  # hit@5 of a top-3 retrieval is its hit@3: shown once
        heads = [*(f"hit@{c}" for c in cuts), f"hit@{k}", "MRR", "nDCG@10", "n"]
        print_table(heads, [[*(f"{m[f'hit_at_{c}']:.3f}" for c in cuts), f"{m['hit_at_k']:.3f}", f"{m['mrr']:.3f}",
                             f"{m['ndcg_at_10']:.3f}", m["n_scored"]]], numeric=range(len(heads)))
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
    from ragray import api

    config, out = _resumable_run(args, "run")
    from ragray.report.run_console import short_of_top_k_line

    live = _LiveRun()
    result = api.run(config=config, out=out, resume=args.resume, progress=not args.no_progress,
                     on_start=live.start, on_question=live.question).result
    s = result.summary
    short = short_of_top_k_line(s, config.retrieval.top_k)
    if short:
        print(f"  {short}")
    _print_influence_summary(s, result.records, table=not live.table)
    _print_where(s)
    _print_next(result.out)
    return 0


def _print_where(s: Any) -> None:
    """What the backend's ``auto`` settings became and, on Ray, where each actor ran."""
    from ragray.rows.placement import placement_lines

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
    print(f"next: open {report} in a browser (each question with its passages first), or `ragray dashboard "
          f"{Path(out).parent}` to browse and compare runs")


def _cmd_simulate(args: argparse.Namespace) -> int:
    from ragray.config import load_config
    from ragray.simulate import simulate
    from ragray.store.rundir import default_run_dir

    # every simulated passage is retrieved: the given retriever keeps the first retrieval.top_k
    base = load_config(args.config, args.overrides, {**_flag_values(args), "retrieval.top_k": args.k})
    out = args.out or default_run_dir("simulate", args.scenario)
    result = simulate(out, n_questions=args.questions, k=args.k, scenario=args.scenario, seed=args.seed,
                      base=base, progress=not args.no_progress)
    s = result.summary
    mix = ", ".join(f"{k} {v}" for k, v in s.simulated["questions_per_scenario"].items())
    print(f"ragray simulate: {s.n_questions} simulated questions ({mix}), k={args.k}, seed {args.seed}, "
          f"no model -> {result.out}")
    _print_influence_summary(s, result.records)
    return 0


def _mode_text(s: RunSummary) -> str:
    from ragray.metrics.summary import describe_mode
    label, note = describe_mode(s)
    return f"{label} ({note})" if note else label


def _print_influence_summary(s: RunSummary, records: Any = (), *, table: bool = True) -> None:
    from ragray.report.run_console import print_run

    print_run(s, [r.question.as_dict() for r in records], [p.as_dict() for r in records for p in r.passages],
              _mode_text(s), table=table)


class _LiveRun:
    """``ragray run``'s output as the run goes: the run line before the model loads, the table's
    header, then each question's line as it finishes."""

    def __init__(self) -> None:
        self.table: Any = None

    def start(self, info: Any) -> None:
        from ragray.console import print_line
        from ragray.report.run_console import LiveTable

        print_line(f"ragray run: {info.n_questions} question{'s' * (info.n_questions != 1)} ({info.n_resumed} resumed), "
                   f"{info.model} via "
                   f"{info.backend}, {info.passages_from} -> {info.out}")
        self.table = LiveTable(info.question_ids)
        print_line(self.table.header())

    def question(self, rows: dict[str, Any]) -> None:
        from ragray.console import print_line

        if self.table is not None:
            print_line(self.table.line(rows["question"], rows["passages"]))


def _cmd_interpret(args: argparse.Namespace) -> int:
    from ragray import api

    from ragray.report.interpret_console import print_interpret
    from ragray.report.run_console import sources_words

    config, out = _resumable_run(args, "interpret")

    result = api.interpret(config=config, out=out, resume=args.resume, progress=not args.no_progress).result
    s = result.summary
    print(f"ragray interpret: {s.n_questions} questions ({result.n_resumed} resumed, {s.n_failed} failed), "
          f"{s.model}, {s.level} level{' (hierarchical)' if s.hierarchical else ''}, "
          f"explainer {s.explainer}, {s.mode} mode, R={s.random_repeats}, {sources_words(s)} -> {result.out}")
    print_interpret(s)
    _print_where(s)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from ragray import api
    from ragray.report.audit_console import print_audit
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    if args.pdfs and args.dataset:
        raise InputError("give either --dataset or --pdfs, not both")
    values = _flag_values(args)
    if args.pdfs:
        values.update({"data.path": args.pdfs, "data.format": "pdf"})
    config = load_config(args.config, args.overrides, values)
    out = args.out or default_run_dir("audit", config.name)
    result = api.audit_retrieval(config=config, out=out, progress=not args.no_progress).result
    print_audit(result.summary, result.entries, config.retrieval.retriever, result.out)
    return result.exit_code


def _cmd_score(args: argparse.Namespace) -> int:
    from ragray.pipeline import run_score
    from ragray.report.run_console import score_headline
    from ragray.config import load_config
    from ragray.store.rundir import default_run_dir

    config = load_config(args.config, args.overrides, _flag_values(args))
    out = args.out or default_run_dir("score", config.name)
    result = run_score(config, args.records, out)
    s = result.summary
    print(f"ragray score: {s.n} records ({s.n_with_gold} with gold answers, "
          f"{s.skipped_rows} skipped) -> {result.out}")
    if s.n_with_gold:
        print(score_headline(s))
    rows = [
        ("exact match / token F1", f"{_fmt(s.em)} / {_fmt(s.f1)}"),
        ("gold answer in a context (words)", f"{s.n_gold_in_context} of {s.n_with_gold}" if s.n_with_gold else "-"),
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
    from ragray.adapters.serving.exposure import check_exposure

    warning = check_exposure(sc)  # before anything loads; start_server says it again on Ray
    if warning and args.no_ray:
        print(warning, file=sys.stderr, flush=True)
    auth = "on" if os.environ.get(sc.api_key_env) else f"off (set ${sc.api_key_env} to require a bearer token)"
    print(f"ragray serve: http://{sc.host}:{sc.port}  corpus {config.data.path}, "
          f"{config.generation.backend}:{config.generation.model}, auth {auth}; docs at /docs", flush=True)
    if args.no_ray:
        from ragray.adapters.serving.local import serve_local

        serve_local(config)
        return 0
    from ragray.adapters.serving.app import start_server

    start_server(config, blocking=True)
    return 0


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from ragray.adapters.commands.dashboard import dashboard_command

    return dashboard_command(args)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from ragray.adapters.commands.sweep import sweep_command

    if args.resume and not args.out:
        raise InputError("--resume needs --out: the sweep directory to continue")
    if args.out is None:  # named here, so an interrupted sweep can say where to resume
        from ragray.store.rundir import default_run_dir
        from ragray.adapters.sweep.spec import load_spec
        args.out = str(default_run_dir("sweep", load_spec(args.spec, args.overrides)[0].name))
    args.resume_dir = args.out
    result = sweep_command(args.spec, args.out, address=args.address, resume=args.resume, overrides=args.overrides)
    return 0 if result.best is not None else 1


def _cmd_history(args: argparse.Namespace) -> int:
    from ragray.adapters.commands.history import HISTORY_COMMANDS

    return HISTORY_COMMANDS[args.command](args)


def _cmd_report(args: argparse.Namespace) -> int:
    """A run directory's report written again and its console summary printed (an interrupted run's
    finished questions first made readable from its progress log)."""
    from ragray import api
    from ragray.report.report import write_report
    from ragray.report.run_console import sources_words
    from ragray.rows.summaries import FaithfulnessSummary, RunSummary

    run = api.load_run(args.run_dir)
    if run.kind not in ("run", "interpret"):
        raise InputError(f"{args.run_dir}: a {run.kind} directory; 'ragray report' shows run and interpret runs")
    path = write_report(Path(args.run_dir))
    if run.kind == "run":
        s = RunSummary.from_dict(run.summary)
        print(f"ragray report: {s.n_questions} questions, {s.model} via {s.backend}, {sources_words(s)} "
              f"-> {args.run_dir}")
        from ragray.report.run_console import print_run

        print_run(s, run.questions.to_pylist(), run.passages.to_pylist(), _mode_text(s))
    else:
        from ragray.report.interpret_console import print_interpret

        print_interpret(FaithfulnessSummary.from_dict(run.summary))
    print(f"\nreport: {path}")
    return 0


COMMANDS = {"retrieve": _cmd_retrieve, "run": _cmd_run, "interpret": _cmd_interpret, "audit": _cmd_audit,
            "score": _cmd_score, "serve": _cmd_serve, "runs": _cmd_history, "presets": _cmd_history,
            "cleanup": _cmd_history, "sweep": _cmd_sweep, "simulate": _cmd_simulate,
            "dashboard": _cmd_dashboard, "report": _cmd_report}


RESUMABLE = ("run", "interpret", "sweep")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    # resumable commands: SIGTERM stops them like Ctrl-C, saying how to resume (servers keep their own)
    handle = args.command in RESUMABLE and threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if handle else None
    bars = os.environ.get("TQDM_DISABLE")
    if getattr(args, "no_progress", False):
        os.environ["TQDM_DISABLE"] = "1"  # also silences bars inside libraries (embedding, reranking)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line
            return _dispatch(args, argv)
    finally:
        if handle:
            signal.signal(signal.SIGTERM, previous)
        # for this command only: a later command in the same process (a notebook, a test) has its bars
        if bars is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = bars


def _one_line(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
              line: str | None = None) -> None:
    """A warning meant for the user (a setting's old name: FutureWarning) as one line on stderr,
    not Python's file-and-source form; every other warning as Python shows it."""
    text = (f"ragray: warning: {message}\n" if issubclass(category, FutureWarning)
            else warnings.formatwarning(message, category, filename, lineno, line))
    (file or sys.stderr).write(text)


#: arguments that name local files or directories
_PATH_ARGS = ("config", "dataset", "corpus", "queries", "ground_truth", "pdfs", "out", "spec", "records", "runs_dir")


def _anchor_path_args(args: argparse.Namespace) -> None:
    """Relative path arguments made absolute now, when the command will join a Ray cluster: a job
    driver's working directory can be deleted and unpacked again while it runs (see
    :mod:`ragray.adapters.execution.ray_runtime`), and a path resolved in that window would fail."""
    if not (os.environ.get("RAY_ADDRESS") or getattr(args, "address", None)):
        return
    for name in _PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value and not is_path_keyword(value):
            setattr(args, name, os.path.abspath(value))


def quiet_third_party_bars(verbose: int) -> None:
    """Without ``-v``, the model libraries' own load bars (transformers' "Loading weights 0/272",
    huggingface_hub's downloads) stay off, so ragray's bars are the only ones; a user's own setting
    of ``HF_HUB_DISABLE_PROGRESS_BARS`` wins. Set before the libraries are imported (they read it then)."""
    if not verbose:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _dispatch(args: argparse.Namespace, argv: Sequence[str]) -> int:
    _anchor_path_args(args)
    quiet_third_party_bars(args.verbose)
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "no_progress", False):
        from ragray.console import show_loads

        show_loads()  # "ragray: loading the generator smollm2 from ... on cpu (float32)"
    try:
        return COMMANDS[args.command](args)
    except (ConfigError, InputError) as exc:
        print(f"ragray {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MissingDependencyError as exc:
        print(f"ragray {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # WriteError too: before RagrayError, so it says how to resume
        code = write_failed(args, argv, exc)
        if code is None:
            raise
        return code
    except (BackendError, RagrayError) as exc:
        print(f"ragray {args.command}: failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        return _interrupted(args, argv, exc)


if __name__ == "__main__":
    raise SystemExit(main())
