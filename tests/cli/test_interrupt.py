"""Ctrl-C, SIGTERM and SIGKILL: a real `ragray run` stopped mid-question says how to resume (a
killed one cannot), and resumes to the same tables as a run that was never stopped, losing and
duplicating nothing."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ragray.generation.engine_counts import ENGINE_COUNTS
from ragray.adapters.cli import resume_command

# the packaged SmolLM2 on the demo set, 2 passages per question, 8-token answers: a few seconds a question
# the call cache off: the reference run would otherwise answer the interrupted run's calls at once
ARGS = ["run", "--limit", "4", "--set", "retrieval.top_k=2", "--set", "generation.max_tokens=8",
        "--set", "metrics.embedding=false", "--set", "history.record=false", "--set", "cache.calls=false",
        "--no-progress"]
VOLATILE = {"seconds", "latency_s", *ENGINE_COUNTS}  # timings; work done (the call cache changes it)


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _default_sigint() -> None:
    """A shell that starts jobs in the background (``nohup pytest &``, some CI runners) hands them
    SIGINT ignored, and Python then leaves it ignored: give the run the default, as in a terminal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ragray(argv: list[str], cwd: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ragray.adapters.cli", *argv], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint, **kw)


def _stop_after(proc: subprocess.Popen, progress: Path, n_done: int, sig: int) -> tuple[int, str]:
    """Send ``sig`` once ``n_done`` questions are on disk (the next one is then under way)."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.is_file() and len(progress.read_text().splitlines()) >= n_done:
            proc.send_signal(sig)
            break
        time.sleep(0.2)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def _tables(out: Path) -> dict[str, list[dict]]:
    return {name: [{k: v for k, v in row.items() if k not in VOLATILE}
                   for row in pq.read_table(out / f"{name}.parquet").to_pylist()]
            for name in ("questions", "passages", "calls")}


def test_resume_command_keeps_the_arguments_and_names_the_run_directory():
    line = resume_command("run", ["run", "--limit", "3", "--out", "old", "--set", "a=b c"], "runs/x y")
    assert line == "ragray run --limit 3 --set 'a=b c' --out 'runs/x y' --resume"
    assert shlex.split(line)[-3:] == ["--out", "runs/x y", "--resume"]
    assert resume_command("run", ["run", "--out=o", "--resume"], "o") == "ragray run --out o --resume"


@pytest.mark.slow
def test_sigint_sigterm_and_sigkill_mid_question_resume_to_the_same_tables(tmp_path):
    ref = _ragray([*ARGS, "--out", str(tmp_path / "ref")], tmp_path)
    _, err = ref.communicate(timeout=900)
    assert ref.returncode == 0, err
    out = tmp_path / "cut"
    progress = out / "progress.jsonl"
    code, err = _stop_after(_ragray([*ARGS, "--out", str(out)], tmp_path), progress, 1, signal.SIGINT)
    assert code == 130 and "interrupted; every finished question is kept in" in err, err
    resume = err.strip().splitlines()[-1].strip()
    assert resume == resume_command("run", [*ARGS, "--out", str(out)], str(out))
    assert len(progress.read_text().splitlines()) == 1
    # resume as printed, and stop that one (SIGTERM) after its next question
    code, err = _stop_after(_ragray(shlex.split(resume)[1:], tmp_path), progress, 2, signal.SIGTERM)
    assert code == 130 and "terminated (SIGTERM); every finished question is kept" in err, err
    assert len(progress.read_text().splitlines()) == 2
    # and that one killed (SIGKILL: no chance to clean up, like the OOM killer) after its next
    code, _ = _stop_after(_ragray(shlex.split(err.strip().splitlines()[-1])[1:], tmp_path), progress, 3,
                          signal.SIGKILL)
    assert code == -signal.SIGKILL and len(progress.read_text().splitlines()) == 3
    last = _ragray(shlex.split(resume)[1:], tmp_path)
    stdout, err = last.communicate(timeout=900)
    assert last.returncode == 0, err
    assert "4 questions (3 resumed)" in stdout
    assert _tables(out) == _tables(tmp_path / "ref")
    ids = [q["question_id"] for q in _tables(out)["questions"]]
    assert len(ids) == len(set(ids)) == 4
