"""The ``ragray`` argument parser: its flags, the config setting each one sets, and the old
spellings that still work.

A flag that stands for a setting names it in its help (``(retrieval.top_k)``) and is listed in
:data:`FLAG_SETTINGS`; its ``choices`` come from :mod:`ragray.config`, which validates the value.
One flag name means one thing in every command: ``--top-k`` is always passages per question.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from ragray import __version__
from ragray.config.renamed import OLD_NAMES
from ragray.shortcuts import FLAG_SETTINGS
from ragray.adapters.commands.help_text import HELP, description, epilog
from ragray.config import (
    DTYPES,
    EXECUTORS,
    EXPLAINERS,
    FAITHFULNESS_MODES,
    INFLUENCE_MODES,
    LEVELS,
    POSITION_CONTROLS,
    SCOPES,
)

__all__ = ["FLAG_SETTINGS", "build_parser", "flag_values"]


class _Choices(tuple):
    """A flag's choices: the current names, which usage and errors list, and the old names of
    :mod:`ragray.config.renamed`, which still pass (the config reads them as the new, warning)."""

    old: frozenset[str]

    def __new__(cls, current: tuple[str, ...], setting: str) -> _Choices:
        choices = super().__new__(cls, current)
        choices.old = frozenset(OLD_NAMES[setting])
        return choices

    def __contains__(self, value: object) -> bool:
        return tuple.__contains__(self, value) or value in self.old


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


def _column_map(text: str) -> dict[str, str]:
    """An argparse type: ``question=query,passages=docs`` -> ``{"question": "query", ...}``
    (the field names are checked by the config, whose error lists the valid ones)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        field, sep, column = (part.strip() for part in item.partition("="))
        if not (sep and field and column):
            raise argparse.ArgumentTypeError(
                f"expected FIELD=COLUMN pairs separated by commas (question=query,passages=docs), got {item!r}")
        if field in out:
            raise argparse.ArgumentTypeError(f"field {field!r} is mapped twice")
        out[field] = column
    return out


def _add_columns(p: argparse.ArgumentParser) -> None:
    p.add_argument("--columns", type=_column_map, metavar="FIELD=COLUMN,...",
                   help="read these columns of a records file as ragray's fields, e.g. "
                        "question=query,passages=docs (data.columns); RAGAS files need none")


class _OldSpelling(argparse.Action):
    """A renamed flag's old spelling: hidden from ``--help``, says its new name on stderr (one line)
    and then stores (or, with ``append``, appends) like the new flag, into the same ``dest``."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, append: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.new, self.append = new, append

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog}: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        if self.append:
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)


def _old_spelling(p: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs: Any) -> None:
    p.add_argument(old, dest=dest, action=_OldSpelling, new=new, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                   **kwargs)


def _command(sub: Any, name: str, path: str | None = None) -> argparse.ArgumentParser:
    """A subcommand with its summary (in the parent's list), paragraph and examples (its page)."""
    key = path or name
    return sub.add_parser(name, help=HELP[key].summary, description=description(key), epilog=epilog(key),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _add_config(p: argparse.ArgumentParser, config_help: str, example: str) -> None:
    p.add_argument("config", nargs="?", help=config_help)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help=f"override a config value, e.g. --set {example} (repeatable)")


def _add_common(p: argparse.ArgumentParser, *, top_k: bool = True) -> None:
    _add_config(p, "experiment YAML (default: built-in defaults)", "retrieval.bm25.k1=0.9")
    p.add_argument("--dataset", help="dataset file or folder, or a name: demo, squad, squad2, hotpotqa, pubmedqa, "
                                     "scifact, nq (data.path)")
    p.add_argument("--corpus", help="corpus file to retrieve from (data.corpus; default: <name>.corpus.jsonl "
                                    "beside the dataset, when there is one)")
    _add_columns(p)
    p.add_argument("--limit", type=_positive_int, help="use the first N questions (data.limit)")
    p.add_argument("--skip-bad-rows", action="store_true",
                   help="skip and count bad dataset rows instead of failing (data.on_bad_row=skip)")
    if top_k:
        p.add_argument("--top-k", type=_positive_int, help="passages per question (retrieval.top_k)")
    p.add_argument("--retriever", help="bm25, dense or hybrid (retrieval.retriever)")
    p.add_argument("--scope", choices=SCOPES, help="retrieval.scope: auto (default) searches the set's corpus "
                                                   "when it has one, else each question's own passages; "
                                                   "per_question or global to choose")
    p.add_argument("--out", help="run directory (default: runs/<command>-<name>-<time>)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _add_dtype(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", choices=DTYPES,
                   help="model weights and compute (generation.dtype; auto: bfloat16 on GPUs, float32 on CPUs; "
                        "bfloat16 on a CPU is faster on some, but its verdicts can come from rounding)")


def _add_influence(p: argparse.ArgumentParser, note: str = "") -> None:
    """``--mode`` and ``--position-control``: how influence is measured (``influence.*``)."""
    p.add_argument("--mode", dest="influence_mode", choices=_Choices(INFLUENCE_MODES, "influence.mode"),
                   help="how influence is measured: interactions (score the answer without each passage and "
                        "with each alone; sees copies and tells use from jitter), loo (regenerate without "
                        "each passage), logprob_share (score the answer without it), jsd, surrogate, or auto "
                        f"(interactions where the backend scores) (influence.mode{note})")
    p.add_argument("--position-control", choices=POSITION_CONTROLS,
                   help="also measure with the passages in this order, to tell a passage from its slot in "
                        f"the prompt (influence.position_control{note})")


def _add_generation(p: argparse.ArgumentParser) -> None:
    """What ``run`` and ``interpret`` share: the model and where the questions run."""
    p.add_argument("--backend", help="transformers, vllm or openai (generation.backend)")
    p.add_argument("--model", help="'smollm2' (packaged), a path or a hub id (generation.model)")
    _add_dtype(p)
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out, skipping questions already finished")
    p.add_argument("--executor", choices=EXECUTORS,
                   help="run questions here or over Ray Data generator actors (execution.executor)")
    p.add_argument("--address", help="Ray cluster address for --executor ray (execution.address; default: "
                                      "RAY_ADDRESS, else an in-process Ray on loopback only)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragray", description=description("ragray"), epilog=epilog("ragray"),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ragray {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True
    for add in (_add_retrieve, _add_run, _add_interpret, _add_audit, _add_score, _add_serve, _add_simulate,
                _add_dashboard, _add_sweep, _add_history_commands, _add_report):
        add(sub)
    return parser


def _add_retrieve(sub: Any) -> None:
    p = _command(sub, "retrieve")
    _add_common(p)
    p.add_argument("--diversity", action="store_true", default=None,
                   help="1 - mean pairwise cosine of each question's hits (metrics.diversity)")
    p.add_argument("--chunk-metrics", dest="chunk_metrics", action="store_true", default=None,
                   help="chunk lengths, cohesion vs separation, answer coverage (metrics.chunking)")


def _add_run(sub: Any) -> None:
    p = _command(sub, "run")
    _add_common(p)
    _add_generation(p)
    _add_influence(p)


def _add_interpret(sub: Any) -> None:
    p = _command(sub, "interpret")
    _add_common(p)
    p.add_argument("--level", choices=LEVELS, help="explanation units (faithfulness.level)")
    p.add_argument("--hierarchical", action="store_true", default=None,
                   help="explain passages first, then units inside the top ones (faithfulness.hierarchical)")
    p.add_argument("--repeats", type=_positive_int,
                   help="R: random deletions drawn per --delete-k value (faithfulness.random_repeats)")
    p.add_argument("--delete-k", dest="k_values", action="append", metavar="K",
                   help="how much each deletion removes: top-N units, top-P%% of them, or cumulative "
                        "(repeatable; faithfulness.k_values)")
    _old_spelling(p, "--k", "--delete-k", "k_values", append=True, metavar="K")
    p.add_argument("--mode", dest="faithfulness_mode", choices=FAITHFULNESS_MODES,
                   help="regenerate and compare, or score the baseline answer (faithfulness.mode)")
    p.add_argument("--explainer", choices=_Choices(EXPLAINERS, "faithfulness.explainer"),
                   help="ranks the units whose deletion is compared with random deletions (faithfulness.explainer)")
    _add_generation(p)


def _add_audit(sub: Any) -> None:
    p = _command(sub, "audit")
    _add_common(p, top_k=False)
    p.add_argument("--top-docs", dest="audit_k", type=_positive_int, metavar="N",
                   help="documents audited per query: the top N retrieved (audit.k)")
    _old_spelling(p, "--top-k", "--top-docs", "audit_k", type=_positive_int)
    p.add_argument("--pdfs", help="folder of PDFs (data.path with data.format=pdf)")
    p.add_argument("--queries", help="queries.json for --pdfs (data.queries)")
    p.add_argument("--ground-truth", help="ground_truth.json for --pdfs (data.ground_truth)")
    p.add_argument("--llm", action="store_true", default=None,
                   help="add aspects and a plain-language explanation from the generator (audit.llm)")
    p.add_argument("--backend", help="generator for --llm (generation.backend)")
    p.add_argument("--model", help="generator model for --llm (generation.model)")
    _add_dtype(p)


def _add_score(sub: Any) -> None:
    p = _command(sub, "score")
    _add_config(p, "experiment YAML (metrics.* settings)", "metrics.tau_h=0.4")
    p.add_argument("--records", required=True,
                   help="JSONL/CSV/Parquet records of your pipeline (ragray's or RAGAS' field names)")
    _add_columns(p)
    p.add_argument("--skip-bad-rows", action="store_true", help="skip and count bad records")
    p.add_argument("--out", help="run directory (default: runs/score-<name>-<time>)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _add_serve(sub: Any) -> None:
    p = _command(sub, "serve")
    _add_config(p, "experiment YAML: the corpus (data.*), models and serve.* options",
                "serve.generator.num_replicas=2")
    p.add_argument("--dataset", help="corpus to serve: a dataset file or folder, or a name such as "
                                     "'demo' or 'scifact' (data.path)")
    _add_columns(p)
    p.add_argument("--host", help="bind address (serve.host; beyond loopback it needs $RAGRAY_API_KEY or --insecure)")
    p.add_argument("--insecure", action="store_true", default=None,
                   help="serve on a non-loopback --host without an API key, with a warning (serve.insecure)")
    p.add_argument("--port", type=_positive_int, help="HTTP port (serve.port)")
    p.add_argument("--address", help="Ray cluster to deploy on (execution.address; default: RAY_ADDRESS, "
                                      "else an in-process Ray on loopback only)")
    p.add_argument("--no-ray", action="store_true",
                   help="serve the same API from this process with uvicorn, without Ray (for a quick look)")
    _add_dtype(p)
    _add_influence(p, "; the default of /influence requests")


def _add_simulate(sub: Any) -> None:
    p = _command(sub, "simulate")
    _add_config(p, "experiment YAML for the flag thresholds and metrics (default: built-in defaults)",
                "influence.divergence_threshold=0.5")
    p.add_argument("--questions", type=_positive_int, default=50, help="simulated questions (default 50)")
    p.add_argument("--top-k", dest="k", type=_int_at_least(2), default=10, metavar="K",
                   help="passages per question (default 10)")
    _old_spelling(p, "--k", "--top-k", "k", type=_int_at_least(2))
    p.add_argument("--scenario", default="mixed",
                   choices=["aligned", "random", "inverted", "dominant", "ignored", "aligned_sparse",
                            "buried_sparse", "positional", "mixed"],
                   help="how influence relates to the retrieval rank (default mixed: one per question)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    _add_influence(p)
    p.add_argument("--out", help="run directory (default: runs/simulate-<scenario>-<time>)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _add_report(sub: Any) -> None:
    p = _command(sub, "report")
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run directory of 'ragray run' or 'ragray interpret'")


def _add_dashboard(sub: Any) -> None:
    p = _command(sub, "dashboard")
    p.add_argument("runs_dir", nargs="?", default="runs", metavar="RUNS_DIR",
                   help="folder of run directories to show (default: runs); uploads go to RUNS_DIR/uploads")
    p.add_argument("--history", metavar="URL",
                   help="run history database (default: history.url, else history.sqlite in ragray's data folder: "
                        "$RAGRAY_HOME or ~/.local/share/ragray)")
    p.add_argument("--host", default="127.0.0.1",
                   help="bind address (default 127.0.0.1); beyond loopback every page needs the API key "
                        "$RAGRAY_API_KEY (serve.api_key_env), or --insecure")
    p.add_argument("--insecure", action="store_true",
                   help="serve on a non-loopback --host without an API key, with a warning")
    p.add_argument("--port", type=_positive_int, default=8265 + 2, help="port (default 8267)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set dashboard.max_uploads=20 (repeatable; "
                        "dashboard.*, serve.api_key_env, history.url)")


def _add_sweep(sub: Any) -> None:
    p = _command(sub, "sweep")
    p.add_argument("spec", help="sweep spec YAML (groups chunking/retrieval/rerank/generation, variants, search)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a base config value for every trial, e.g. --set data.limit=20 (repeatable)")
    p.add_argument("--out", help="sweep directory (default: runs/sweep-<name>-<time>)")
    p.add_argument("--address", help="Ray cluster for the trials (default: RAY_ADDRESS, else an in-process Ray "
                                      "on loopback only)")
    p.add_argument("--resume", action="store_true", help="continue the interrupted sweep in --out")


def _add_history_config(p: argparse.ArgumentParser) -> None:
    _add_config(p, "experiment YAML whose history.url names the database (default: built-in defaults)",
                "history.url=sqlite:////abs/ragray.sqlite")


def _add_page(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=_positive_int, default=50, help="show at most N (default 50)")
    p.add_argument("--offset", type=_non_negative_int, default=0, help="skip the first N (default 0)")


def _actions(p: argparse.ArgumentParser) -> Any:
    actions = p.add_subparsers(dest="action", metavar="ACTION", title="actions")
    actions.required = True
    return actions


def _add_history_commands(sub: Any) -> None:
    """``ragray runs``, ``ragray presets`` and ``ragray cleanup``: the history database (history.url)."""
    actions = _actions(_command(sub, "runs"))
    listing = _command(actions, "list", "runs list")
    _add_history_config(listing)
    listing.add_argument("--kind", help="only this kind: run, interpret, audit, score, sweep or trial")
    listing.add_argument("--status", help="only this status: running, done, failed or interrupted "
                                                 "(stopped by Ctrl-C or SIGTERM, or its process gone)")
    _add_page(listing)
    show = _command(actions, "show", "runs show")
    show.add_argument("run_id", metavar="ID", help="a run id from 'ragray runs list'")
    _add_history_config(show)

    actions = _actions(_command(sub, "presets"))
    save = _command(actions, "save", "presets save")
    save.add_argument("name", metavar="NAME", help="letters, digits, '.', '_', '-'")
    _add_config(save, "experiment YAML to save; its history.url names the database", "retrieval.top_k=5")
    save.add_argument("--description", help="a line saying what the preset is for")
    for action in ("get", "delete"):
        p = _command(actions, action, f"presets {action}")
        p.add_argument("name", metavar="NAME")
        _add_history_config(p)
    listing = _command(actions, "list", "presets list")
    _add_history_config(listing)
    _add_page(listing)

    _add_history_config(_command(sub, "cleanup"))




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
