"""Faults an attacker (or a bad day) throws at a running `ragray run`: a SIGTERM or Ctrl-C is
recorded ``interrupted`` in the run history, not ``failed``; a disk that fills mid-run is ONE error
line naming the file and the command that resumes, and that command finishes the run with the
tables of a run that never failed."""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import ragray
from ragray.adapters.cli import main
from ragray.generation.engine_counts import ENGINE_COUNTS
from ragray.generation.scripted import ScriptedGenerator
from ragray.store import progress
from ragray.store.history import History

VOLATILE = {"seconds", "latency_s", *ENGINE_COUNTS}  # timings; work done

# `ragray run` itself in a process of its own, the scripted generator held at its first call, so the
# run is surely under way (recorded, writing its folder) when the signal comes
HELD_RUN = ("import sys, time\n"
            "from ragray.generation.scripted import ScriptedGenerator\n"
            "ScriptedGenerator.generate = lambda self, prompts: time.sleep(600)\n"
            "from ragray.adapters.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


@pytest.fixture()
def island(tmp_path):
    rows = [{"id": f"q{i}", "question": f"Which ferry goes to Corran {i}?", "answers": ["tern"],
             "passages": [{"id": f"ferry{i}", "text": f"The night ferry {i} to Corran leaves from pier nine. ANSWER=tern"},
                          {"id": "birds", "text": "Arctic terns nest on the northern cliffs every summer."},
                          {"id": f"market{i}", "text": f"The fish market {i} opens at dawn. ANSWER=cod{i}"}],
             "gold_passage_ids": [f"ferry{i}"]} for i in range(4)]
    path = tmp_path / "island.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _argv(island, db, out):
    return ["run", "--backend", "scripted", "--dataset", str(island), "--set", "metrics.embedding=false",
            "--set", "cache.calls=false", *db[0], "--no-progress", "--out", str(out)]


def _tables(out: Path) -> dict[str, list[dict]]:
    return {name: [{k: v for k, v in row.items() if k not in VOLATILE}
                   for row in pq.read_table(out / f"{name}.parquet").to_pylist()]
            for name in ("questions", "passages", "calls")}


# -- SIGTERM and Ctrl-C: interrupted, not failed ----------------------------------------------------


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
@pytest.mark.timeout(180)
def test_a_sigtermed_run_is_recorded_interrupted_not_failed(tmp_path, island, db):
    out = tmp_path / "runs" / "stopped"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(ragray.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", HELD_RUN, *_argv(island, db, out)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    history, deadline = None, time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if Path(db[1].removeprefix("sqlite:///")).is_file():
                history = history or History(db[1])
                if history.list_runs() and (out / "config.yaml").is_file():
                    break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "ragray run: terminated (SIGTERM); every finished question is kept" in err, err
    (record,) = history.list_runs()
    assert (record.status, record.error) == ("interrupted", "Terminated")
    assert record.finished_at is not None  # ended by the run itself, not guessed from a dead process
    assert [r.id for r in history.list_runs(status="interrupted")] == [record.id]
    assert history.list_runs(status="failed") == [] and history.list_runs(status="running") == []


def test_a_ctrl_c_run_is_recorded_interrupted(tmp_path, island, db, capsys, monkeypatch):
    def stopped(self, prompts):
        raise KeyboardInterrupt

    monkeypatch.setattr(ScriptedGenerator, "generate", stopped)
    assert main(_argv(island, db, tmp_path / "cut")) == 130
    assert "ragray run: interrupted; every finished question is kept" in capsys.readouterr().err
    (record,) = History(db[1]).list_runs()
    assert (record.status, record.error) == ("interrupted", "KeyboardInterrupt")
    assert main(["runs", "list", "--status", "interrupted", *db[0]]) == 0
    assert record.id in capsys.readouterr().out


# -- a full disk: one line, nothing finished lost, --resume finishes the run ---------------------------


class _Filling:
    """A file on a disk that fills up: the ``n``-th write of the whole test (``count``) puts half its
    bytes down, then fails with ENOSPC, as a real full disk does."""

    def __init__(self, fh, count: list[int], n: int) -> None:
        self._fh, self._count, self._n = fh, count, n

    def write(self, data):
        self._count[0] += 1
        if self._count[0] == self._n:
            self._fh.write(data[: len(data) // 2])
            self._fh.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self._fh.write(data)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._fh.__exit__(*exc)


def _disk_fills_at_progress_line(monkeypatch, n: int) -> None:
    """The run's progress log (``progress.jsonl``, one line per finished question) hits a full disk
    on its ``n``-th line."""
    count = [0]
    monkeypatch.setattr(progress, "open", lambda *a, **kw: _Filling(open(*a, **kw), count, n), raising=False)


def _disk_fills_at_file(monkeypatch, out: Path, name: str) -> None:
    """Writing the result file ``name`` of ``out`` (its temporary copy) hits a full disk halfway."""
    write_bytes = Path.write_bytes

    def filling(self, data):
        if self.parent == out and name in self.name:
            write_bytes(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", filling)


@pytest.mark.parametrize("where", ["progress.jsonl", "passages.parquet"])
def test_a_full_disk_is_one_line_with_the_resume_command_and_the_resume_finishes_the_run(
        where, tmp_path, island, db, capsys):
    ref = tmp_path / "ref"
    assert main(_argv(island, db, ref)) == 0
    capsys.readouterr()
    out = tmp_path / "full"
    with pytest.MonkeyPatch.context() as mp:
        if where == "progress.jsonl":
            _disk_fills_at_progress_line(mp, 3)  # two questions are done, the third one's line fails
        else:
            _disk_fills_at_file(mp, out, "passages.parquet")  # every question done, the tables fail
        code = main(_argv(island, db, out))
    _, err = capsys.readouterr()
    argv = _argv(island, db, out)
    resume = shlex.join(["ragray", *argv[:-2], "--out", str(out), "--resume"])
    assert code == 1
    assert err == (f"ragray run: error: cannot write {out / where}: No space left on device; every finished "
                   f"question is kept in {out}; once it can be written, resume with: {resume}\n")
    # nothing finished is lost: every line of the log is a whole finished question, no half-written file
    lines = (out / "progress.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["question"]["question_id"] for line in lines] == (
        ["q0", "q1"] if where == "progress.jsonl" else ["q0", "q1", "q2", "q3"])
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
    assert not (out / "passages.parquet").exists()
    (failed,) = History(db[1]).list_runs(status="failed")
    assert failed.error == f"WriteError: cannot write {out / where}: No space left on device"

    assert main(shlex.split(resume)[1:]) == 0
    assert f"4 questions ({len(lines)} resumed)" in capsys.readouterr().out
    assert _tables(out) == _tables(ref)
