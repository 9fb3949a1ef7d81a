"""The history database: presets, runs, ephemeral indexes, concurrent writers, recording."""

import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from ragray.config import ExperimentConfig, load_config
from ragray.errors import InputError
from ragray.store.history import History, check_preset_name
from ragray.store.recording import recorded_run, recording


def config(**values) -> ExperimentConfig:
    return load_config(None, [f"{k}={v}" for k, v in values.items()])


# -- the database ----------------------------------------------------------------------------------


def test_relative_sqlite_path_is_created_under_the_cwd_in_wal_mode(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    h = History("sqlite:///nested/dir/ragray.sqlite")
    path = tmp_path / "nested" / "dir" / "ragray.sqlite"
    assert h.url == f"sqlite:///{path}"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"presets", "runs", "ephemeral_indexes"}
    h.close()


def test_reopening_keeps_the_data(url):
    History(url).save_preset("keep", config())
    assert [p.name for p in History(url).list_presets()] == ["keep"]


def test_in_memory_database_works():
    h = History("sqlite://")
    h.save_preset("mem", config())
    assert h.get_preset("mem") == config()


@pytest.mark.parametrize("bad, message", [
    ("not a url", r"history.url: not a valid SQLAlchemy URL: 'not a url' \(e.g. sqlite:///runs/history.sqlite\)"),
    ("nosuchdb://host/db", r"history.url: unknown database 'nosuchdb' in 'nosuchdb://host/db'"),
])
def test_bad_urls_name_history_url(bad, message):
    with pytest.raises(InputError, match=message):
        History(bad)


def test_a_missing_driver_is_named():
    try:
        import MySQLdb  # noqa: F401
        pytest.skip("MySQLdb is installed here")
    except ImportError:
        pass
    with pytest.raises(InputError, match=r"history.url 'mysql://user:\*\*\*@host/db' needs its database driver"):
        History("mysql://user:secret@host/db")  # and the password is not shown


def test_a_sqlite_folder_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="history.url: cannot create the folder of .*file/sub/h.sqlite"):
        History(f"sqlite:///{tmp_path / 'file' / 'sub' / 'h.sqlite'}")


# -- presets ---------------------------------------------------------------------------------------


def test_presets_save_get_update_delete(history):
    saved = history.save_preset("fast", config(**{"retrieval.top_k": 3}), "three passages")
    assert saved.description == "three passages" and saved.created_at == saved.updated_at
    assert saved.created_at.tzinfo is timezone.utc
    assert history.get_preset("fast").retrieval.top_k == 3
    time.sleep(0.01)
    updated = history.save_preset("fast", config(**{"retrieval.top_k": 5}))
    assert history.get_preset("fast").retrieval.top_k == 5
    assert updated.description == "three passages"  # None keeps the saved description
    assert updated.created_at == saved.created_at and updated.updated_at > saved.updated_at
    assert history.save_preset("fast", config(), "").description == ""
    assert history.delete_preset("fast") is True
    assert history.delete_preset("fast") is False
    with pytest.raises(KeyError):
        history.get_preset("fast")


def test_presets_list_is_by_name_and_paginated(history):
    for name in ["delta", "alpha", "charlie", "bravo", "echo"]:
        history.save_preset(name, config())
    assert [p.name for p in history.list_presets()] == ["alpha", "bravo", "charlie", "delta", "echo"]
    assert [p.name for p in history.list_presets(limit=2, offset=1)] == ["bravo", "charlie"]
    assert [p.name for p in history.list_presets(limit=2, offset=4)] == ["echo"]
    assert history.list_presets(limit=2, offset=5) == []
    assert len(history.list_presets(limit=None)) == 5
    with pytest.raises(InputError, match="limit must be >= 1"):
        history.list_presets(limit=0)
    with pytest.raises(InputError, match="offset must be >= 0"):
        history.list_presets(offset=-1)


@pytest.mark.parametrize("name", ["", "../etc", "a/b", ".hidden", "-x", "with space", "x" * 101, "é"])
def test_bad_preset_names_are_rejected(history, name):
    message = "preset name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
    with pytest.raises(InputError, match=message):
        history.save_preset(name, config())
    with pytest.raises(KeyError):
        history.get_preset(name)
    assert history.delete_preset(name) is False


def test_good_preset_names():
    for name in ["a", "fast_v2", "hotpot.dense-rerank", "9lives", "x" * 100]:
        assert check_preset_name(name) == name


# -- runs ------------------------------------------------------------------------------------------


def test_run_lifecycle_done(history, tmp_path):
    run_id = history.start_run("run", "hotpot", config(name="hotpot"), tmp_path / "out")
    running = history.get_run(run_id)
    assert running.status == "running" and running.finished_at is None and running.seconds is None
    assert running.out == str(tmp_path / "out") and running.kind == "run" and running.name == "hotpot"
    assert yaml.safe_load(running.config_yaml)["name"] == "hotpot"
    time.sleep(0.05)
    history.finish_run(run_id, {"mean_spearman": float("nan"), "n": 3}, ["summary.json"])
    done = history.get_run(run_id)
    assert done.status == "done" and done.summary == {"mean_spearman": None, "n": 3}
    assert done.results == ["summary.json"] and done.error is None
    assert done.seconds == pytest.approx((done.finished_at - done.started_at).total_seconds())
    assert 0.05 <= done.seconds < 5
    as_dict = done.as_dict()
    assert as_dict["config"]["name"] == "hotpot" and as_dict["started_at"].endswith("+00:00")


def test_run_lifecycle_failed_and_unknown_ids(history):
    run_id = history.start_run("audit", "x", config(), None)
    history.fail_run(run_id, "InputError: data/qa.jsonl:3: 'question' is missing")
    failed = history.get_run(run_id)
    assert failed.status == "failed" and failed.error.endswith("'question' is missing") and failed.out is None
    for call in (lambda: history.get_run("nope"), lambda: history.finish_run("nope", {}),
                 lambda: history.fail_run("nope", "x")):
        with pytest.raises(KeyError):
            call()


def test_run_kind_and_id_are_checked(history):
    with pytest.raises(InputError, match="run kind must be one of run, interpret, audit, score, sweep, trial, got 'x'"):
        history.start_run("x", "n", config(), None)
    with pytest.raises(InputError, match="run id must be"):
        history.start_run("run", "n", config(), None, run_id="../x")


def test_list_runs_newest_first_with_filters_and_pages(history):
    ids = []
    for i, kind in enumerate(["run", "audit", "run", "score", "run"]):
        ids.append(history.start_run(kind, f"n{i}", config(), None))
        time.sleep(0.002)  # distinct start times
    history.finish_run(ids[0], {})
    history.fail_run(ids[2], "boom")
    assert [r.id for r in history.list_runs()] == ids[::-1]
    assert [r.id for r in history.list_runs(limit=2, offset=1)] == [ids[3], ids[2]]
    assert [r.id for r in history.list_runs(kind="run")] == [ids[4], ids[2], ids[0]]
    assert [r.id for r in history.list_runs(kind="run", status="running")] == [ids[4]]
    assert [r.id for r in history.list_runs(status="failed")] == [ids[2]]
    with pytest.raises(InputError, match="status must be one of running, done, failed, interrupted, got 'ok'"):
        history.list_runs(status="ok")
    with pytest.raises(InputError, match="kind must be one of run, interpret"):
        history.list_runs(kind="runs")


def test_a_sweeps_trials_point_at_it(history):
    sweep = history.start_run("sweep", "grid", config(), None)
    trials = [history.start_run("trial", "grid", config(), None, parent_id=sweep) for _ in range(3)]
    history.start_run("run", "other", config(), None)
    assert sorted(r.id for r in history.list_runs(parent_id=sweep)) == sorted(trials)


# -- concurrent writers ----------------------------------------------------------------------------


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_threads_write_at_once(url):
    shared = History(url)

    def work(t: int) -> list[str]:
        own = History(url) if t % 2 else shared  # separate engines and one shared engine
        out = []
        for i in range(12):
            run_id = own.start_run("trial", f"t{t}", config(), None)
            own.finish_run(run_id, {"t": t, "i": i})
            own.save_preset(f"p{i % 3}", config(seed=t))
            out.append(run_id)
        return out

    with ThreadPoolExecutor(8) as pool:
        ids = [i for chunk in pool.map(work, range(8)) for i in chunk]
    runs = shared.list_runs(limit=None)
    assert len(ids) == len(set(ids)) == len(runs) == 96
    assert {r.status for r in runs} == {"done"}
    assert [p.name for p in shared.list_presets()] == ["p0", "p1", "p2"]


WRITER = textwrap.dedent("""
    import pathlib, sys, time
    from ragray.config import ExperimentConfig
    from ragray.store.history import History
    url, tag, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.005)
    history = History(url)  # every process creates the tables at the same moment
    for i in range(n):
        run_id = history.start_run("trial", tag, ExperimentConfig(name=tag), f"out/{tag}/{i}")
        history.finish_run(run_id, {"i": i})
        history.save_preset("shared", ExperimentConfig(name=tag))
        history.register_ephemeral(tag, f"idx/{tag}/{i}", 0)
    print("ok", tag)
""")


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_processes_write_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"  # does not exist yet
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, f"p{k}", "25", str(go)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
    time.sleep(1.0)  # let every interpreter import and wait at the barrier
    go.write_text("go")
    results = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0 and out.startswith("ok"), err[-2000:]
    history = History(url)
    runs = history.list_runs(limit=None)
    assert len(runs) == 75 and {r.status for r in runs} == {"done"}
    assert {r.name for r in runs} == {"p0", "p1", "p2"}
    assert [p.name for p in history.list_presets()] == ["shared"]
    assert history.cleanup_expired()["expired_count"] == 75


# -- ephemeral indexes -----------------------------------------------------------------------------


def test_cleanup_deletes_expired_files_and_directories(history, tmp_path):
    expired_dir = tmp_path / "idx" / "ns_a"
    (expired_dir / "sub").mkdir(parents=True)
    (expired_dir / "sub" / "index.faiss").write_bytes(b"\0" * 100)
    expired_file = tmp_path / "idx" / "ns_b.npy"
    expired_file.write_bytes(b"x")
    fresh = tmp_path / "idx" / "ns_c"
    fresh.mkdir()
    history.register_ephemeral("ns", expired_dir, 0)
    history.register_ephemeral("ns", expired_file, 0)
    history.register_ephemeral("ns", tmp_path / "already-gone", 0)
    history.register_ephemeral("ns", fresh, 3600)
    assert history.cleanup_expired() == {"expired_count": 3, "deleted_count": 3, "errors": []}
    assert not expired_dir.exists() and not expired_file.exists() and fresh.is_dir()
    assert history.cleanup_expired() == {"expired_count": 0, "deleted_count": 0, "errors": []}
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    assert history.cleanup_expired(now=later) == {"expired_count": 1, "deleted_count": 1, "errors": []}
    assert not fresh.exists()


def test_cleanup_lists_errors_and_retries_later(history, tmp_path, monkeypatch):
    stuck = tmp_path / "stuck"
    stuck.mkdir()
    history.register_ephemeral("ns", stuck, 0)

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("ragray.store.history.shutil.rmtree", refuse)
    assert history.cleanup_expired() == {"expired_count": 1, "deleted_count": 0,
                                         "errors": [f"{stuck}: Permission denied"]}
    assert stuck.is_dir()
    monkeypatch.undo()
    assert history.cleanup_expired() == {"expired_count": 1, "deleted_count": 1, "errors": []}
    assert not stuck.exists()


def test_delete_namespace_removes_its_paths_now_whatever_their_ttl(history, tmp_path):
    mine, other = tmp_path / "sweep_t1", tmp_path / "other_t1"
    for d in (mine, other):
        (d / "indexes").mkdir(parents=True)
    history.register_ephemeral("sweep_t1", mine, 3600)
    history.register_ephemeral("other_t1", other, 3600)
    assert history.delete_namespace("sweep_t1") == {"expired_count": 1, "deleted_count": 1, "errors": []}
    assert not mine.exists() and other.is_dir()
    assert history.delete_namespace("sweep_t1") == {"expired_count": 0, "deleted_count": 0, "errors": []}
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    assert history.cleanup_expired(now=later) == {"expired_count": 1, "deleted_count": 1, "errors": []}


def test_registering_a_tracked_path_again_restarts_its_ttl(history, tmp_path):
    d = tmp_path / "ns_t"
    d.mkdir()
    first = history.register_ephemeral("ns_t", d, 0)
    assert history.register_ephemeral("ns_t", d, 3600) == first  # a resumed sweep: one entry, new TTL
    assert history.cleanup_expired() == {"expired_count": 0, "deleted_count": 0, "errors": []}
    assert history.delete_namespace("ns_t")["expired_count"] == 1 and not d.exists()
    assert history.register_ephemeral("ns_t", d, 0) != first  # deleted entries are not revived


def test_ttl_must_be_a_non_negative_number(history, tmp_path):
    for ttl in (-1, float("nan"), "10"):
        with pytest.raises(InputError, match="ttl_seconds must be a number >= 0"):
            history.register_ephemeral("ns", tmp_path, ttl)


# -- recording a run -------------------------------------------------------------------------------


def recorded(url, **values):
    return config(**{"history.url": url, **values})


def test_recorded_run_done_with_summary_and_files(url, tmp_path):
    out = tmp_path / "run1"
    with recorded_run(recorded(url, name="exp"), "score", out) as rec:
        assert History(url).get_run(rec.id).status == "running"
        out.mkdir()
        (out / "summary.json").write_text("{}")
        rec.summary = {"em": 0.5}
    run = History(url).get_run(rec.id)
    assert (run.status, run.kind, run.name, run.summary, run.results) == ("done", "score", "exp", {"em": 0.5},
                                                                          ["summary.json"])
    assert run.out == str(out) and run.seconds >= 0


def test_recorded_run_failed_keeps_the_error_and_reraises(url, tmp_path):
    with pytest.raises(InputError, match="bad row"), recorded_run(recorded(url), "run", tmp_path / "r") as rec:
        raise InputError("data.jsonl:3: bad row")
    run = History(url).get_run(rec.id)
    assert run.status == "failed" and run.error == "InputError: data.jsonl:3: bad row"


def test_recording_off_writes_nothing(tmp_path):
    db = tmp_path / "never.sqlite"
    with recorded_run(recorded(f"sqlite:///{db}", **{"history.record": "false"}), "run", tmp_path / "r") as rec:
        rec.summary = {}
    assert rec.id is None and not db.exists()


def test_a_broken_history_never_breaks_the_run(tmp_path, caplog):
    (tmp_path / "file").write_text("x")
    bad = recorded(f"sqlite:///{tmp_path / 'file' / 'h.sqlite'}")
    with (caplog.at_level(logging.WARNING, logger="ragray.store.recording"),
          recorded_run(bad, "run", tmp_path / "r") as rec):
        rec.summary = {"ok": True}
    assert rec.id is None and "run history: not recording this run" in caplog.text


def test_a_history_failing_at_the_end_only_warns(url, tmp_path, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(History, "finish_run", broken)
    with (caplog.at_level(logging.WARNING, logger="ragray.store.recording"),
          recorded_run(recorded(url), "run", tmp_path / "r") as rec):
        rec.summary = {}
    assert "could not record run" in caplog.text and "disk full" in caplog.text
    assert History(url).get_run(rec.id).status == "running"


def test_nested_same_directory_is_one_record_other_directory_a_child(url, tmp_path):
    history = History(url)
    out = tmp_path / "http-run"
    run_id = history.start_run("run", "served", config(), out)
    with recording(history, run_id, out):  # what POST /runs does around the command
        with recorded_run(recorded(url), "run", out) as inner:  # what the command does
            inner.summary = {"n_questions": 1}
        with recorded_run(recorded(url), "trial", tmp_path / "trial-0") as child:
            child.summary = {"trial": 0}
    runs = history.list_runs(limit=None)
    assert len(runs) == 2
    assert history.get_run(run_id).summary == {"n_questions": 1} and inner.id == run_id
    assert history.get_run(child.id).parent_id == run_id


def test_recording_is_per_thread(url, tmp_path):
    history = History(url)
    out = tmp_path / "outer"
    run_id = history.start_run("sweep", "s", config(), out)
    seen = {}

    def other_thread():
        with recorded_run(recorded(url), "run", out) as rec:  # another thread: not nested
            seen["id"] = rec.id

    with recording(history, run_id, out):
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
    assert seen["id"] not in (None, run_id) and history.get_run(seen["id"]).parent_id is None


def test_the_default_history_lives_in_the_data_folder_never_the_cwd(tmp_path, monkeypatch):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("RAGRAY_HOME", str(home))
    with recorded_run(config(), "run", tmp_path / "elsewhere" / "x") as rec:
        rec.summary = {}
    assert os.listdir(work) == []  # nothing in the working directory
    assert (home / "history.sqlite").is_file()
    assert History().get_run(rec.id).out == str(tmp_path / "elsewhere" / "x")
    # a relative SQLite URL the user names is still read against the cwd
    mine = load_config(None, ["history.url=sqlite:///runs/mine.sqlite"])
    with recorded_run(mine, "run", "runs/y") as rec:
        rec.summary = {}
    assert History("sqlite:///runs/mine.sqlite").get_run(rec.id).out == os.path.join(work, "runs", "y")
