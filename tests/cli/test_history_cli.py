"""`ragray runs`, `ragray presets`, `ragray cleanup`, and the runs the other commands record."""

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragray.adapters.cli import main
from ragray.config import load_config
from ragray.store.history import History

REPO = Path(__file__).resolve().parents[2]


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def records(tmp_path):
    """Two outputs of someone's pipeline for ``ragray score``."""
    rows = [{"question": "Which ferry sails to Kell?", "answer": "The Tern", "answers": ["Tern"],
             "contexts": ["The ferry to Kell is the Tern."]},
            {"question": "Where do puffins nest?", "answer": "On the stacks.", "answers": ["north stacks"],
             "contexts": ["Puffins nest on the north stacks."]}]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture()
def island(tmp_path):
    rows = [{"id": "q1", "question": "Which ferry goes to Corran?", "answers": ["tern"],
             "passages": [{"id": "ferry", "text": "The night ferry to Corran leaves from pier nine. ANSWER=tern"},
                          {"id": "birds", "text": "Arctic terns nest on the northern cliffs every summer."},
                          {"id": "market", "text": "The fish market opens at dawn on weekdays."}],
             "gold_passage_ids": ["ferry"]}]
    path = tmp_path / "island.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_readme_presets_commands(tmp_path, db, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sets, url = db
    code, out, _ = run(["presets", "save", "fast", str(REPO / "configs" / "default.yaml"), "--set",
                        "retrieval.top_k=3", "--description", "BM25 top 3", *sets], capsys)
    assert code == 0 and out == f"ragray presets: saved 'fast' in {url}\n"
    code, out, _ = run(["presets", "list", *sets], capsys)
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "UPDATED", "(UTC)", "RETRIEVER", "GENERATOR", "DESCRIPTION"]
    assert re.fullmatch(r"fast +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +bm25 +transformers:smollm2 +BM25 top 3", row)
    code, out, _ = run(["presets", "get", "fast", *sets], capsys)
    (tmp_path / "fast.yaml").write_text(out)
    assert code == 0 and load_config(tmp_path / "fast.yaml").retrieval.top_k == 3
    code, out, _ = run(["retrieve", "fast.yaml", "--limit", "2", "--out", "r", "--no-progress"], capsys)
    assert code == 0 and "top-3" in out
    code, out, _ = run(["presets", "delete", "fast", *sets], capsys)
    assert code == 0 and out == f"ragray presets: deleted 'fast' from {url}\n"
    assert run(["presets", "list", *sets], capsys)[1] == f"no presets saved in {url}\n"


def test_presets_list_pages(db, capsys):
    sets, _ = db
    for name in ["b", "a", "c"]:
        assert run(["presets", "save", name, str(REPO / "configs" / "default.yaml"), *sets], capsys)[0] == 0
    out = run(["presets", "list", "--limit", "1", "--offset", "1", *sets], capsys)[1]
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["b"]


def test_score_is_recorded_and_shown(tmp_path, db, records, capsys):
    sets, _ = db
    code, *_ = run(["score", "--records", str(records), "--set", "metrics.embedding=false", *sets,
                    "--out", str(tmp_path / "s"), "--no-progress"], capsys)
    assert code == 0
    code, out, _ = run(["runs", "list", *sets], capsys)
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["ID", "KIND", "NAME", "STATUS", "STARTED", "(UTC)", "SECONDS", "OUT"]
    run_id = row.split()[0]
    assert re.fullmatch(rf"{run_id} +score +default +done +\S+ \S+ +\d+\.\d +{re.escape(str(tmp_path / 's'))}", row)
    code, out, _ = run(["runs", "show", run_id, *sets], capsys)
    shown = json.loads(out)
    assert shown["status"] == "done" and shown["kind"] == "score" and shown["error"] is None
    assert shown["summary"] == json.loads((tmp_path / "s" / "summary.json").read_text())
    assert shown["summary"]["n"] == 2 and shown["summary"]["em"] == 0.5
    assert {"summary.json", "config.yaml", "scores.parquet", "scores.csv"} <= set(shown["results"])
    assert shown["config"]["metrics"]["embedding"] is False and shown["seconds"] >= 0


def test_a_failed_command_is_recorded_failed(tmp_path, db, capsys):
    sets, url = db
    code, _, err = run(["score", "--records", str(tmp_path / "missing.jsonl"), *sets,
                        "--out", str(tmp_path / "s")], capsys)
    assert code == 2 and "missing.jsonl" in err
    (failed,) = History(url).list_runs(status="failed")
    assert failed.kind == "score" and "missing.jsonl" in failed.error and failed.error.startswith("InputError: ")
    out = run(["runs", "list", "--kind", "score", "--status", "failed", "--limit", "20", *sets], capsys)[1]
    assert failed.id in out and " failed " in out
    assert run(["runs", "list", "--status", "done", *sets], capsys)[1] == f"no runs recorded in {url} (with these filters)\n"


def test_run_and_audit_are_recorded(tmp_path, db, island, capsys):
    sets, url = db
    common = ["--dataset", str(island), "--set", "metrics.embedding=false", *sets, "--no-progress"]
    assert run(["run", "--backend", "scripted", "--out", str(tmp_path / "r"), *common], capsys)[0] == 0
    assert run(["audit", "--top-k", "1", "--out", str(tmp_path / "a"), *common], capsys)[0] == 0
    audit, influence = History(url).list_runs()
    assert (audit.kind, audit.status, audit.summary["n_pass"]) == ("audit", "done", 1)
    assert (influence.kind, influence.status, influence.summary["n_questions"]) == ("run", "done", 1)
    assert influence.out == str(tmp_path / "r") and "questions.parquet" in influence.results


def test_record_false_writes_no_history(tmp_path, records, capsys):
    db = tmp_path / "never.sqlite"
    code, *_ = run(["score", "--records", str(records), "--set", "metrics.embedding=false",
                    "--set", f"history.url=sqlite:///{db}", "--set", "history.record=false",
                    "--out", str(tmp_path / "s")], capsys)
    assert code == 0 and not db.exists()


def test_cleanup_prints_the_counts(tmp_path, db, capsys, monkeypatch):
    sets, url = db
    history = History(url)
    expired, kept = tmp_path / "idx-a", tmp_path / "idx-b"
    for d in (expired, kept):
        d.mkdir()
    history.register_ephemeral("ns", expired, 0)
    history.register_ephemeral("ns", kept, 3600)
    code, out, _ = run(["cleanup", *sets], capsys)
    assert code == 0 and out == f"ragray cleanup: 1 expired, 1 deleted, 0 errors ({url})\n"
    assert not expired.exists() and kept.is_dir()

    stuck = tmp_path / "idx-c"
    stuck.mkdir()
    history.register_ephemeral("ns", stuck, 0)

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("ragray.store.history.shutil.rmtree", refuse)
    code, out, err = run(["cleanup", *sets], capsys)
    assert code == 1 and out == f"ragray cleanup: 1 expired, 0 deleted, 1 errors ({url})\n"
    assert err == f"  could not delete {stuck}: Permission denied\n"


@pytest.mark.parametrize("argv, message", [
    (["runs", "show", "nope"], r"ragray runs: error: no run 'nope' in sqlite:///"),
    (["runs", "list", "--kind", "bogus"], r"kind must be one of run, interpret, audit, score, sweep, trial, got 'bogus'"),
    (["presets", "get", "nope"], r"ragray presets: error: no preset 'nope' in sqlite:///"),
    (["presets", "delete", "nope"], r"ragray presets: error: no preset 'nope' in sqlite:///"),
    (["presets", "save", "../x", str(REPO / "configs" / "default.yaml")], r"preset name must be 1-100 letters"),
    (["presets", "save", "x", "nowhere.yaml"], r"config file not found: nowhere.yaml"),
])
def test_bad_input_exits_2_with_the_reason(argv, message, db, capsys):
    code, _, err = run([*argv, *db[0]], capsys)
    assert code == 2 and re.search(message, err), err


@pytest.mark.parametrize("url, message", [
    ("foo", r"ragray runs: error: history.url: not a valid SQLAlchemy URL: 'foo'"),
    ("nosuch://h/db", r"history.url: unknown database 'nosuch'"),
])
def test_bad_history_url_exits_2_naming_it(url, message, capsys):
    code, _, err = run(["runs", "list", "--set", f"history.url={url}"], capsys)
    assert code == 2 and re.search(message, err), err


def test_bad_offset_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["runs", "list", "--offset", "-1"])
    assert info.value.code == 2 and "argument --offset: must be >= 0, got -1" in capsys.readouterr().err


def test_console_script_uses_the_default_database_in_the_data_folder(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = {**os.environ, "RAGRAY_HOME": str(home)}
    result = subprocess.run([sys.executable, "-m", "ragray.adapters.cli", "runs", "list"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"no runs recorded in sqlite:///{home / 'history.sqlite'}\n"
    assert (home / "history.sqlite").is_file() and os.listdir(work) == []
