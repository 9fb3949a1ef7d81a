"""A run whose process is gone reads back as ``interrupted``: the process recorded with it, the
heartbeat while it runs, and databases made before these columns existed."""

import os
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from ragray.config import ExperimentConfig
from ragray.store import liveness
from ragray.store.history import History
from ragray.store.liveness import ProcessInfo, is_gone, process_start_time, this_process
from ragray.store.recording import recording

HERE = socket.gethostname()


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_this_process_is_recorded_with_its_start_time(history, tmp_path):
    me = this_process()
    assert (me.pid, me.host) == (os.getpid(), HERE)
    assert me.started is not None and 0 <= time.time() - me.started < 24 * 3600
    assert process_start_time(me.pid) == pytest.approx(me.started, abs=0.05)
    run_id = history.start_run("run", "x", ExperimentConfig(), tmp_path)
    record = history.get_run(run_id)
    assert (record.status, record.pid, record.host) == ("running", os.getpid(), HERE)
    assert record.heartbeat_at is not None and record.as_dict()["pid"] == os.getpid()


def test_a_run_whose_process_is_gone_on_this_host_is_interrupted(history, tmp_path):
    cfg = ExperimentConfig()
    dead = history.start_run("run", "dead", cfg, tmp_path, process=ProcessInfo(_dead_pid(), HERE, None))
    reused = history.start_run("run", "reused", cfg, tmp_path,
                               process=ProcessInfo(os.getpid(), HERE, this_process().started - 3600))
    alive = history.start_run("run", "alive", cfg, tmp_path)
    assert history.get_run(dead).status == "interrupted"
    assert history.get_run(reused).status == "interrupted"  # the pid now belongs to another process
    assert history.get_run(alive).status == "running"
    assert {r.id for r in history.list_runs(status="interrupted")} == {dead, reused}
    assert [r.id for r in history.list_runs(status="running")] == [alive]
    assert [r.id for r in history.list_runs(status="interrupted", limit=1, offset=1)] == [dead]
    history.finish_run(dead, {"n": 1})  # a record that does end after all is what it says
    assert history.get_run(dead).status == "done"


def test_on_another_host_a_run_is_interrupted_when_its_heartbeat_is_old(history, tmp_path):
    run_id = history.start_run("run", "x", ExperimentConfig(), tmp_path,
                               process=ProcessInfo(os.getpid(), "another-host", None))
    assert history.get_run(run_id).status == "running"  # its pid means nothing here
    history.heartbeat(run_id, at=_utcnow() - timedelta(seconds=liveness.STALE_AFTER_S + 60))
    assert history.get_run(run_id).status == "interrupted"
    history.heartbeat(run_id)
    assert history.get_run(run_id).status == "running"
    history.fail_run(run_id, "boom")
    history.heartbeat(run_id, at=_utcnow() - timedelta(days=1))  # an ended run's heartbeat is left alone
    assert history.get_run(run_id).status == "failed"


def test_is_gone_rules():
    now = _utcnow()
    old, fresh = now - timedelta(seconds=liveness.STALE_AFTER_S + 1), now - timedelta(seconds=5)
    me = this_process()
    assert not is_gone(me.pid, HERE, me.started, old, now)  # alive here: the heartbeat does not matter
    assert is_gone(_dead_pid(), HERE, None, fresh, now)
    assert is_gone(me.pid, HERE, me.started + 100, fresh, now)
    assert is_gone(me.pid, "elsewhere", None, old, now) and not is_gone(me.pid, "elsewhere", None, fresh, now)
    assert not is_gone(None, None, None, None, now)  # an old record: nothing to judge it by


def test_a_database_made_before_the_process_columns_gets_them(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # the runs table as ragray created it before
        db.execute("CREATE TABLE runs (id VARCHAR(100) PRIMARY KEY, kind VARCHAR(16) NOT NULL, name TEXT NOT NULL, "
                   "status VARCHAR(16) NOT NULL, config TEXT NOT NULL, out TEXT, parent_id VARCHAR(100), "
                   "started_at DATETIME NOT NULL, finished_at DATETIME, seconds FLOAT, summary JSON, "
                   "results JSON, error TEXT)")
        db.execute("INSERT INTO runs (id, kind, name, status, config, started_at) "
                   "VALUES ('run-old', 'run', 'old', 'running', '{}', '2024-01-01 00:00:00')")
    h = History(f"sqlite:///{path}")
    (old,) = h.list_runs()
    assert (old.id, old.status, old.pid, old.host, old.heartbeat_at) == ("run-old", "running", None, None, None)
    new = h.start_run("run", "new", ExperimentConfig(), tmp_path, process=ProcessInfo(_dead_pid(), HERE, None))
    assert [(r.id, r.status) for r in h.list_runs()] == [(new, "interrupted"), ("run-old", "running")]
    h.close()
    with sqlite3.connect(path) as db:
        columns = [r[1] for r in db.execute("PRAGMA table_info(runs)")]
    assert columns[-4:] == ["pid", "host", "process_started", "heartbeat_at"]
    assert History(f"sqlite:///{path}").get_run(new).host == HERE  # opening again adds nothing twice


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_running_record_gets_a_heartbeat(where, tmp_path, monkeypatch):
    monkeypatch.setattr(liveness, "HEARTBEAT_S", 0.05)
    h = History(f"sqlite:///{tmp_path / 'h.sqlite'}" if where == "file" else "sqlite://")
    run_id = h.start_run("run", "x", ExperimentConfig(), tmp_path)
    first = h.get_run(run_id).heartbeat_at
    with recording(h, run_id, tmp_path) as rec:
        deadline = time.monotonic() + 10
        while h.get_run(run_id).heartbeat_at == first and time.monotonic() < deadline:
            time.sleep(0.02)
        assert h.get_run(run_id).heartbeat_at > first
        rec.summary = {"n": 1}
    ended = h.get_run(run_id)
    assert ended.status == "done"
    time.sleep(0.2)  # the heartbeat stopped with the block
    assert h.get_run(run_id).heartbeat_at == ended.heartbeat_at
    h.close()
