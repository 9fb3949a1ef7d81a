"""A `ragray run` killed with SIGKILL cannot end its history record: `ragray runs list`, the
History, the HTTP schema and the dashboard show it as ``interrupted``, not ``running`` forever."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import ragray
from ragray.adapters.cli import main
from ragray.adapters.dashboard.app import make_dashboard
from ragray.adapters.serving.schemas import RunStatus
from ragray.store.history import History

# `ragray run` itself (ragray.adapters.cli.main in a process of its own), with the scripted generator held
# at its first call, so the run is surely under way when it is killed
HELD_RUN = ("import sys, time\n"
            "from ragray.generation.scripted import ScriptedGenerator\n"
            "ScriptedGenerator.generate = lambda self, prompts: time.sleep(600)\n"
            "from ragray.adapters.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


def _island(tmp_path):
    rows = [{"id": "q1", "question": "Which ferry goes to Corran?", "answers": ["tern"],
             "passages": [{"id": "ferry", "text": "The night ferry to Corran leaves from pier nine. ANSWER=tern"},
                          {"id": "birds", "text": "Arctic terns nest on the northern cliffs every summer."}]}]
    path = tmp_path / "island.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_a_sigkilled_run_is_listed_as_interrupted(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs' / 'history.sqlite'}"
    out = tmp_path / "runs" / "killed"
    argv = ["run", "--backend", "scripted", "--dataset", str(_island(tmp_path)), "--set", "metrics.embedding=false",
            "--set", f"history.url={url}", "--out", str(out), "--no-progress"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           # the subprocess imports the ragray this test imported
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(ragray.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", HELD_RUN, *argv], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        history, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if (tmp_path / "runs" / "history.sqlite").is_file():
                history = history or History(url)
                if history.list_runs() and (out / "config.yaml").is_file():
                    break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1]
        (record,) = history.list_runs()
        assert (record.status, record.pid, record.out) == ("running", proc.pid, str(out))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    (record,) = history.list_runs()
    assert (record.status, record.finished_at, record.error) == ("interrupted", None, None)
    assert [r.id for r in history.list_runs(status="interrupted")] == [record.id]
    assert history.list_runs(status="running") == []

    assert main(["runs", "list", "--set", f"history.url={url}"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"{record.id} +run +default +interrupted +\S+ \S+ +- +{re.escape(str(out))}", row), row
    assert main(["runs", "list", "--status", "interrupted", "--set", f"history.url={url}"]) == 0
    assert record.id in capsys.readouterr().out

    status = RunStatus(run_id=record.id, command=record.kind, status=record.status, out=record.out, questions_done=0)
    assert status.status == "interrupted"
    page = TestClient(make_dashboard(tmp_path / "runs", url)).get("/").text
    assert re.search(rf'<tr data-run="{record.id}" data-kind="run">.*?<span class="badge interrupted">interrupted',
                     page, re.S), page
