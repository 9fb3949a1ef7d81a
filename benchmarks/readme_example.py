"""README's "Reading the result" transcript: a real run of the first 4 demo questions, kept as its
tables, and the console lines rendered from them by ragray's own console code.

    python benchmarks/readme_example.py run       # the model (ragray run --limit 4, fp32): the record
    python benchmarks/readme_example.py publish   # the README block, from the record

The record is the run's ``questions.parquet``, ``passages.parquet`` and ``summary.json`` (ragray's
own demo set, so its text may live in the repo) under ``benchmarks/results/records/readme_example/``;
``benchmarks/verify.py`` re-renders the block from it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.machine import REPO, machine_info, write_block  # noqa: E402

RECORD = REPO / "benchmarks" / "results" / "records" / "readme_example"
README = REPO / "README.md"
BEGIN = "<!-- readme-example:begin (written by: python benchmarks/readme_example.py publish) -->"
END = "<!-- readme-example:end -->"
FILES = ("questions.parquet", "passages.parquet", "summary.json")


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        subprocess.run([shutil.which("ragray") or "ragray", "run", "--limit", "4", "--set", "generation.dtype=float32",
                        "--out", str(out)], check=True, cwd=tmp)
        RECORD.mkdir(parents=True, exist_ok=True)
        for name in FILES:
            shutil.copy(out / name, RECORD / name)
    (RECORD / "machine.json").write_text(json.dumps(machine_info(("torch", "transformers")), indent=1) + "\n")


def transcript() -> str:
    """The console's lines from the record: the table's header and each question's line as
    ``ragray run`` prints them when the question finishes (one question at a time on this CPU, so
    in the data set's order), the lines under them and the validity verdict."""
    import pyarrow.parquet as pq

    from ragray.metrics.panel import panel_lines
    from ragray.report.run_console import LiveTable, lead_lines
    from ragray.rows.summaries import RunSummary

    questions = pq.read_table(RECORD / "questions.parquet").to_pylist()
    passages = pq.read_table(RECORD / "passages.parquet").to_pylist()
    s = RunSummary.from_dict(json.loads((RECORD / "summary.json").read_text()))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        live = LiveTable([q["question_id"] for q in questions])
        print(live.header())
        for q in questions:
            print(live.line(q, [p for p in passages if p["question_id"] == q["question_id"]]))
        print()
        print("\n".join(lead_lines(s, questions)))
        print(panel_lines(s.panel)[0][0])
    return buf.getvalue().rstrip("\n")


def block() -> str:
    cpu = json.loads((RECORD / "machine.json").read_text())["cpu"]
    return (f"From a real run (`ragray run --limit 4`: 4 demo questions, SmolLM2 in fp32, which `auto` picks on every "
            f"CPU; {cpu}; its tables are kept in `benchmarks/results/records/readme_example/`):\n\n"
            f"```text\n{transcript()}\n```")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["run", "publish"])
    args = ap.parse_args()
    if args.action == "run":
        run()
    print(block())
    write_block(README, BEGIN, END, block())


if __name__ == "__main__":
    main()
