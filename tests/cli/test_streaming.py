"""Results as they come: `ragray run` prints its run line and the table's header before the first
question, and each question's line the moment it finishes; a run stopped after two questions
(Ctrl-C, or killed) leaves a folder that `load_run`, `ragray report` and the dashboard open with
those two, marked partial; `--resume` may change `--limit`.

`ragray run` itself runs in a process of its own with the scripted generator, held at the last
question's generation until the test has read the first question's line (so the line cannot come
from the end of the run: the run is still waiting)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

import ragray
from ragray.adapters.cli import main
from ragray.errors import InputError

#: the scripted generator waits, at a prompt holding ``HOLD``, until the file ``GO`` exists
HELD_RUN = ("import os, sys, time\n"
            "from ragray.generation.scripted import ScriptedGenerator\n"
            "generate = ScriptedGenerator.generate\n"
            "def held(self, prompts):\n"
            "    while any(os.environ['HOLD'] in p[-1].content for p in prompts) and not os.path.exists(os.environ['GO']):\n"
            "        time.sleep(0.05)\n"
            "    return generate(self, prompts)\n"
            "ScriptedGenerator.generate = held\n"
            "from ragray.adapters.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


#: the scripted generator's construction (the model's load) waits until the file ``GO`` exists
HELD_LOAD = ("import os, sys, time\n"
             "from ragray.generation.scripted import ScriptedGenerator\n"
             "init = ScriptedGenerator.__init__\n"
             "def held(self, *args, **kwargs):\n"
             "    while not os.path.exists(os.environ['GO']):\n"
             "        time.sleep(0.05)\n"
             "    init(self, *args, **kwargs)\n"
             "ScriptedGenerator.__init__ = held\n"
             "from ragray.adapters.cli import main\n"
             "sys.exit(main(sys.argv[1:]))\n")


def _questions(tmp_path: Path, n: int = 6) -> Path:
    rows = [{"id": f"q{i}", "question": f"Which word does harbour {i} keep? (Q{i}MARK)", "answers": [f"word{i}"],
             "passages": [{"id": f"p{i}", "text": f"Harbour {i} keeps one word. ANSWER=word{i}"},
                          {"id": f"d{i}", "text": f"Gulls circle harbour {i} at dawn."}]}
            for i in range(1, n + 1)]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _argv(tmp_path: Path, out: Path, *extra: str) -> list[str]:
    return ["run", "--backend", "scripted", "--dataset", str(_questions(tmp_path)), "--set", "metrics.embedding=false",
            "--set", "history.record=false", "--out", str(out), "--no-progress", *extra]


def _held(argv: list[str], cwd: Path, hold: str, go: Path, script: str = HELD_RUN) -> subprocess.Popen:
    env = {**os.environ, "HOLD": hold, "GO": str(go), "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(ragray.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-c", script, *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for(proc: subprocess.Popen, done: callable, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no {what} within {seconds} s")


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_each_question_s_line_arrives_as_it_finishes_before_the_last_question_runs(tmp_path):
    go = tmp_path / "go"
    out = tmp_path / "run"
    proc = _held(_argv(tmp_path, out), tmp_path, "Q6MARK", go)
    lines: list[str] = []
    try:
        while not any(line.split()[:1] == ["1"] for line in lines):  # question 1's line, while question 6 waits
            line = proc.stdout.readline()
            assert line, f"the output ended before question 1's line: {lines} {proc.stderr.read()[-2000:]}"
            lines.append(line.rstrip("\n"))
        assert not go.exists() and proc.poll() is None  # the run is still held at question 6
        go.touch()
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    lines += rest.splitlines()
    assert lines[0].startswith("ragray run: 6 questions (0 resumed), ") and lines[0].endswith(f"-> {out}")
    assert " via scripted, " in lines[0]
    header = next(i for i, line in enumerate(lines) if line.startswith("#  question"))
    numbered = [line.split()[0] for line in lines[header + 1:header + 7]]
    assert numbered == ["1", "2", "3", "4", "5", "6"]
    assert all("|" in line for line in lines[header + 1:header + 7])
    # the table is not printed twice: the headline follows
    assert sum(line.startswith("#  question") for line in lines) == 1
    assert any(line.startswith("misaligned:") for line in lines)


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_the_run_line_and_the_table_header_print_while_the_model_is_still_loading(tmp_path):
    """What is searched, with which model, for how many questions: before the load, which on a GPU
    cluster or a cold cache takes minutes (here the generator's construction is held)."""
    go = tmp_path / "go"
    proc = _held(_argv(tmp_path, tmp_path / "run"), tmp_path, "", go, HELD_LOAD)
    try:
        first, second = proc.stdout.readline(), proc.stdout.readline()
        assert proc.poll() is None and not go.exists()  # still loading
        go.touch()
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert first.startswith("ragray run: 6 questions (0 resumed), ") and " via scripted, " in first, first
    assert second.startswith("#  question"), second
    assert rest.splitlines()[0].startswith("1  Which word")


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_ctrl_c_after_two_questions_leaves_a_readable_partial_run_that_resumes_with_another_limit(tmp_path):
    go = tmp_path / "go"
    out = tmp_path / "run"
    proc = _held(_argv(tmp_path, out), tmp_path, "Q3MARK", go)
    progress = out / "progress.jsonl"
    _wait_for(proc, lambda: progress.is_file() and len(progress.read_text().splitlines()) >= 2, "two questions")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted; every finished question is kept in" in err, err

    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"] == {"questions_done": 2, "questions": 6, "why": "interrupted"}
    assert summary["n_questions"] == 2 and pq.read_table(out / "questions.parquet").num_rows == 2
    run = ragray.load_run(out)
    assert list(run.questions["question_id"]) == ["q1", "q2"]
    assert "PARTIAL: 2 of 6 questions finished (interrupted)" in (out / "report.html").read_text()

    from ragray.adapters.dashboard.app import make_dashboard
    from ragray.adapters.dashboard.catalog import dir_id

    client = TestClient(make_dashboard(tmp_path))
    assert 'class="badge partial">partial' in client.get("/").text
    page = client.get(f"/runs/{dir_id(out)}")
    assert page.status_code == 200 and "PARTIAL: 2 of 6 questions finished" in page.text

    # --resume with fewer questions than the run was started with: the finished two stay, one more runs
    assert main(_argv(tmp_path, out, "--limit", "3", "--resume")) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "partial" not in summary and summary["n_questions"] == 3 and summary["resumed_questions"] == 2
    assert list(ragray.load_run(out).questions["question_id"]) == ["q1", "q2", "q3"]


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_killed_run_opens_from_its_progress_log(tmp_path, capsys):
    go = tmp_path / "go"
    out = tmp_path / "run"
    proc = _held(_argv(tmp_path, out), tmp_path, "Q3MARK", go)
    progress = out / "progress.jsonl"
    _wait_for(proc, lambda: progress.is_file() and len(progress.read_text().splitlines()) >= 2, "two questions")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert not (out / "summary.json").exists()  # killed: nothing was written at the end

    from ragray.adapters.dashboard.app import make_dashboard
    from ragray.adapters.dashboard.catalog import dir_id

    client = TestClient(make_dashboard(tmp_path))
    # its log moved a moment ago: it may still be running (its own process writes its tables)
    assert 'class="badge running">running' in client.get("/").text
    assert client.get(f"/runs/{dir_id(out)}").status_code == 404
    assert not (out / "summary.json").exists()
    stale = time.time() - 600
    os.utime(progress, (stale, stale))
    assert 'class="badge stopped">stopped' in client.get("/").text
    page = client.get(f"/runs/{dir_id(out)}")
    assert page.status_code == 200 and "PARTIAL: 2 of 6 questions finished (stopped" in page.text, page.text[:2000]
    assert 'class="badge partial">partial' in client.get("/").text

    assert main(["report", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "PARTIAL: 2 of 6 questions finished (stopped before it could finish)" in shown
    assert str(out / "report.html") in shown
    run = ragray.load_run(out)
    assert run.summary["partial"]["questions_done"] == 2 and len(run.questions) == 2


def test_a_folder_without_finished_questions_is_still_not_a_run(tmp_path):
    (tmp_path / "config.yaml").write_text("name: x\n")
    with pytest.raises(InputError, match="not a ragray run directory"):
        ragray.load_run(tmp_path)
