"""What ``ragray --help`` and ``ragray COMMAND --help`` say: per command a one-line summary (the
command list), a paragraph (its page) and examples that run as written."""

from __future__ import annotations

import textwrap
from typing import NamedTuple

__all__ = ["HELP", "WIDTH", "Help", "description", "epilog"]

#: description paragraphs are wrapped here (argparse keeps raw descriptions as they are)
WIDTH = 80


class Help(NamedTuple):
    summary: str  #: one line in the parent's command list
    text: str  #: the paragraph at the top of the command's own page
    examples: tuple[str, ...]  #: command lines; a "# ..." tail explains the line


HELP: dict[str, Help] = {
    "ragray": Help(
        "",
        "Influence-aware RAG diagnostics on Ray: which retrieved passages does an answer really use, "
        "is the retrieval sound, and do explanations of the answer hold up? Every command writes a run "
        "directory (tables, summary, report) that the dashboard and the run history read.",
        ("ragray run --dataset demo --limit 5", "ragray COMMAND --help   # what a command does, with examples"),
    ),
    "retrieve": Help(
        "retrieval only: top-k passages, hit@k, MRR, nDCG",
        "Retrieve the top-k passages of every question and score them against the gold passage ids: "
        "hit@1/5/k, MRR and nDCG@10. No answer is generated. The run directory holds the hits (Parquet and "
        "CSV), per-question metrics and the resolved config.yaml, which reruns to the same hits.",
        ("ragray retrieve --dataset demo --top-k 5",
         "ragray retrieve --dataset demo --retriever dense --diversity"),
    ),
    "run": Help(
        "influence: which retrieved passages the answer used",
        "The influence loop: per question, answer from the top-k passages, then measure how much each "
        "passage changes that answer when it is left out (or scored away, --mode). Compares the "
        "influence order with the retrieval order (usage nDCG, Spearman rho) and flags questions whose "
        "answer relies on low-ranked passages, on one passage, or on none. Writes tables, summary.json "
        "and report.html; --resume continues an interrupted run.",
        ("ragray run --dataset demo --limit 5",
         "ragray run --dataset demo --limit 20 --mode logprob_share --position-control reversed --dtype float32"),
    ),
    "interpret": Help(
        "faithfulness: test explanations by deleting what they rank",
        "Is the explanation of an answer true? Per question the context is split into units "
        "(passages, sentences or tokens), an explainer ranks them, and the most and least important "
        "ones are deleted and compared with random deletions of the same size (--delete-k). Each "
        "question is classed A (explanation faithful), B (uninformative), C (redundant evidence) or "
        "inconclusive, with statistics across questions.",
        ("ragray interpret --dataset demo --limit 5",
         "ragray interpret --dataset demo --level sentence --delete-k top-1 --delete-k top-3 --mode logprob"),
    ),
    "audit": Help(
        "retrieval integrity: PASS/FAIL per query (exit 1 on a FAIL)",
        "Audit the retrieval of every query over its top retrieved documents (--top-docs; chunk hits "
        "count as their document): coverage of the relevant documents, noise, a score and PASS/FAIL. "
        "Exits 1 when any scored query fails, so it can gate CI. --llm adds the question's aspects and "
        "a plain-language explanation from the generator; they never change the score.",
        ("ragray audit --dataset demo --top-docs 3",
         "ragray audit --pdfs papers --queries queries.json --ground-truth ground_truth.json"),
    ),
    "score": Help(
        "score your own pipeline's outputs, nothing re-run",
        "Score the outputs of an existing RAG pipeline without running it again. Records (JSONL, CSV "
        "or Parquet) carry question, answer and the context (contexts or passages), optionally gold "
        "answers and passage ids, latency and tokens. Reports exact match and token F1, grounding, "
        "hallucination rate, relevance, label noise, latency and cost.",
        ("ragray score --records outputs.jsonl   # your pipeline's records",),
    ),
    "serve": Help(
        "the HTTP API (retrieve, generate, influence) on Ray Serve",
        "Serve the pipeline over HTTP on Ray Serve, the retriever, reranker and generator as separate "
        "deployments: /retrieve, /generate, /influence, /interpretation, /audit and /runs, with the API "
        "documentation at /docs. The corpus is the dataset's passages. --no-ray serves the same API "
        "from this process (uvicorn), without Ray.",
        ("ragray serve --dataset demo --port 8000",
         "ragray serve --dataset demo --no-ray --port 8000   # one process, no Ray"),
    ),
    "report": Help(
        "a run's report and summary again, an interrupted run's too",
        "Write RUN_DIR/report.html again and print the run's table and summary, as 'ragray run' printed "
        "them. A run stopped early is shown with the questions it finished, marked PARTIAL: after Ctrl-C "
        "or SIGTERM it wrote its tables then; a run whose process was killed gets them here, from its "
        "config.yaml and progress.jsonl. 'ragray run ... --out RUN_DIR --resume' continues it.",
        ("ragray report runs/run-default-20261202-101500",),
    ),
    "simulate": Help(
        "a run of known ground truth from a scenario, no model",
        "Write a run directory whose influence is known in advance: each question's passages get an "
        "influence drawn from a scenario (aligned, inverted, dominant, positional ...), a simulated model "
        "answers accordingly, and the ordinary influence loop measures it. No model is loaded. Use it "
        "to see what each flag and report section looks like, or to check a detector against the truth.",
        ("ragray simulate --scenario inverted --questions 20 --top-k 10",
         "ragray simulate --scenario positional --position-control reversed"),
    ),
    "dashboard": Help(
        "web page to browse, drill into and compare runs",
        "A local web page (no internet needed) over a folder of run directories: each run's report and "
        "flags, a drill-down per question, side-by-side comparison of runs, the run history, and CSV "
        "upload of your own records (saved under RUNS_DIR/uploads: a file of at most 20 MiB, "
        "dashboard.max_upload_bytes, else 413; at most 50 uploaded runs, dashboard.max_uploads, else 409). "
        "On a --host "
        "beyond loopback it starts only with $RAGRAY_API_KEY set (serve.api_key_env, the key of "
        "'ragray serve'), and then every page and file needs it: 'Authorization: Bearer <key>', or a "
        "browser enters it once in the page's form; --insecure serves without a key, with a warning.",
        ("ragray dashboard runs --port 8267",
         "ragray dashboard runs --host 0.0.0.0   # with $RAGRAY_API_KEY set: every page needs the key"),
    ),
    "sweep": Help(
        "configuration sweep on Ray Tune, with a leaderboard",
        "Run one trial per configuration of a sweep spec (a grid over chunking, retrieval, reranking "
        "and generation settings, or named variants) on Ray Tune. Each trial is an ordinary influence "
        "run; the leaderboard ranks them by the spec's objective. --resume continues an interrupted "
        "sweep.",
        ("ragray sweep configs/sweeps/versions.yaml --set data.limit=3",),
    ),
    "runs": Help(
        "the run history: list recorded runs, show one",
        "The run history in the database named by history.url (by default history.sqlite in ragray's data "
        "folder, $RAGRAY_HOME or ~/.local/share/ragray; never the working directory): every "
        "run, interpret, audit, score and sweep records its config, status, timings and summary there.",
        ("ragray runs list", "ragray runs show run-20250101-120000-1a2b3c"),
    ),
    "runs list": Help(
        "recorded runs, newest first, as a table",
        "List recorded runs, newest first: id, kind, name, status, start time, duration and run "
        "directory. Filter by kind or status; page with --limit and --offset. A run stopped by Ctrl-C or "
        "SIGTERM is interrupted (--resume continues it), and so is one whose process is gone without "
        "ending its record (killed, its machine lost).",
        ("ragray runs list --kind run --status failed --limit 20",),
    ),
    "runs show": Help(
        "one run as JSON: config, status, timings, summary",
        "Print one recorded run as JSON: its config, status, timings, summary, result files and error, "
        "if any. Take the ID from 'ragray runs list'.",
        ("ragray runs show run-20250101-120000-1a2b3c",),
    ),
    "presets": Help(
        "named configs saved in the history database",
        "Named configs kept in the database named by history.url: save a config (with its --set "
        "overrides) under a name, print it back as YAML for any command, list or delete presets. "
        "'ragray serve' offers them too.",
        ("ragray presets save fast --set retrieval.top_k=3 --description 'BM25 top 3'",
         "ragray presets get fast > fast.yaml && ragray retrieve fast.yaml --limit 2"),
    ),
    "presets save": Help(
        "save a config as preset NAME, or update it",
        "Save CONFIG (or the built-in defaults) with its --set overrides as preset NAME, replacing a "
        "preset of that name.",
        ("ragray presets save fast --set retrieval.top_k=3 --description 'BM25 top 3'",),
    ),
    "presets get": Help(
        "print preset NAME as YAML",
        "Print preset NAME as YAML: a config file for any command.",
        ("ragray presets get fast > fast.yaml && ragray run fast.yaml --limit 2",),
    ),
    "presets delete": Help(
        "delete preset NAME",
        "Delete preset NAME from the history database.",
        ("ragray presets delete fast",),
    ),
    "presets list": Help(
        "saved presets by name, as a table",
        "List the saved presets by name, with their descriptions.",
        ("ragray presets list",),
    ),
    "cleanup": Help(
        "delete expired ephemeral indexes",
        "Delete the ephemeral indexes (kept per sweep trial) whose time to live has passed, and "
        "print how many expired, were deleted, or could not be deleted.",
        ("ragray cleanup",),
    ),
}


def description(name: str) -> str:
    """The command's paragraph, wrapped to :data:`WIDTH`."""
    return textwrap.fill(HELP[name].text, WIDTH)


def epilog(name: str) -> str:
    """``example:`` (or ``examples:``) and the command lines, indented."""
    examples = HELP[name].examples
    return ("examples:" if len(examples) > 1 else "example:") + "".join(f"\n  {e}" for e in examples)
