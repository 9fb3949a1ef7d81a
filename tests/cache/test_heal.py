"""A call cache that heals (issue 28): a damaged, unreadable, read-only or locked ``calls.sqlite``
never stops a run: a damaged file is set aside and a new one started, a file that cannot be used
leaves the run uncached, a lock passes over one read or write, and no answer is lost."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import threading

import pytest

from ragray.cache.calls import CachedGenerator, CallStore
from ragray.config import GenerationConfig
from tests.cache.test_calls import Paid, prompt


def filled(path, n=3000):
    """A cache file of ``n`` entries (~1 MB: many pages), closed."""
    store = CallStore(path)
    store.put_many({f"key{i:05d}": {"text": f"answer number {i} " * 4} for i in range(n)})
    store.close()
    return [f"key{i:05d}" for i in range(n)]


def overwrite_middle(path, size=4096):
    data = bytearray(path.read_bytes())
    mid = len(data) // 2
    data[mid : mid + size] = b"\xa5" * size
    path.write_bytes(bytes(data))


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.4) + 100])


def not_sqlite(path):
    path.write_text("these are notes, not a database\n" * 200)


def checkpointed(path):
    """Fold the WAL into the main file, so damage to the file is what SQLite reads."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


@pytest.mark.parametrize("damage", [overwrite_middle, truncate, not_sqlite], ids=lambda f: f.__name__)
def test_a_damaged_file_is_set_aside_and_a_new_one_started(tmp_path, damage, caplog):
    path = tmp_path / "calls.sqlite"
    keys = filled(path)
    checkpointed(path)
    damage(path)
    store = CallStore(path)
    with caplog.at_level(logging.WARNING, logger="ragray.cache.calls"):
        got = store.get_many(keys)  # every page read: the damage is found, whatever it hit
        store.put_many({"fresh": {"text": "new"}})
    assert store.set_aside is not None and store.set_aside.is_file()
    assert store.set_aside.name.startswith("calls.sqlite.corrupt-")
    assert store.disabled is None
    assert store.get_many(["fresh"]) == {"fresh": {"text": "new"}}  # the new file works
    assert all(v == {"text": f"answer number {int(k[3:])} " * 4} for k, v in got.items())  # nothing wrong served
    said = " ".join(r.getMessage() for r in caplog.records)
    assert str(path) in said and "moved to calls.sqlite.corrupt-" in said
    # a later process opens the new file without a word
    caplog.clear()
    again = CallStore(path)
    with caplog.at_level(logging.WARNING, logger="ragray.cache.calls"):
        assert again.get_many(["fresh"]) == {"fresh": {"text": "new"}}
    assert not caplog.records


def test_a_file_set_aside_by_another_process_is_not_moved_again(tmp_path):
    """Two stores (processes) on one damaged file: the first moves it, the second finds a new file
    at the path and only reconnects, so the healthy new file is kept."""
    path = tmp_path / "calls.sqlite"
    keys = filled(path)
    checkpointed(path)
    first, second = CallStore(path), CallStore(path)
    assert len(second.get_many(keys[:1])) == 1  # connected to the old file before the damage
    overwrite_middle(path)
    first.get_many(keys)
    first.put_many({"fresh": {"text": "new"}})
    second.get_many(keys)  # reads the old, damaged inode
    assert first.set_aside is not None and second.set_aside is None
    assert second.get_many(["fresh"]) == {"fresh": {"text": "new"}}
    moved = [p for p in tmp_path.glob("calls.sqlite.corrupt-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(moved) == 1


def test_a_database_locked_past_the_timeout_passes_over_that_call(tmp_path, caplog):
    path = tmp_path / "calls.sqlite"
    filled(path, 10)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("INSERT INTO calls VALUES ('held', '1')")  # holds the file's exclusive lock
    store = CallStore(path, timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="ragray.cache.calls"):
        assert store.get_many(["key00001"]) == {}  # a miss, not an error
        store.put_many({"new": 1})  # skipped
    assert "locked by another process" in caplog.text and str(path) in caplog.text
    assert store.disabled is None and store.set_aside is None
    other.execute("COMMIT")
    other.close()
    assert store.get_many(["key00001"]) == {"key00001": {"text": "answer number 1 " * 4}}  # back once free
    store.put_many({"new": 2})
    assert store.get_many(["new"]) == {"new": 2}


@pytest.fixture()
def read_only_dir(tmp_path):
    """A directory on a read-only mount (root ignores file modes, so chmod would not do)."""
    where = tmp_path / "ro"
    where.mkdir()
    filled(where / "calls.sqlite", 10)
    checkpointed(where / "calls.sqlite")
    for leftover in where.glob("calls.sqlite-*"):
        leftover.unlink()
    bind = subprocess.run(["mount", "--bind", str(where), str(where)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
    ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(where)], capture_output=True)
    try:
        if ro.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {ro.stderr.decode().strip()}")
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


def test_a_read_only_directory_leaves_the_run_uncached(read_only_dir, caplog):
    path = read_only_dir / "calls.sqlite"
    with pytest.raises(OSError):
        (read_only_dir / "probe").write_text("x")  # the mount is really read-only
    inner = Paid()
    gen = CachedGenerator(inner, CallStore(path), GenerationConfig())
    with caplog.at_level(logging.WARNING, logger="ragray.cache.calls"):
        first = gen.generate([prompt("ANSWER=a"), prompt("ANSWER=b")])
        again = gen.generate([prompt("ANSWER=a")])
    assert [g.text for g in first] == ["a", "b"] and again[0].text == "a"
    assert gen.store.disabled is not None and str(path) in caplog.text and "continues uncached" in caplog.text
    assert gen.stats.calls_miss == 3  # nothing stored, nothing served
    assert not list(read_only_dir.glob("calls.sqlite.corrupt-*"))


def test_a_write_that_fails_loses_no_answer_and_wakes_every_waiter(tmp_path):
    """The store's write fails (locked) while a second thread waits for the same prompt: both get
    the answer, no question stops."""
    path = tmp_path / "calls.sqlite"
    filled(path, 1)
    started, release = threading.Event(), threading.Event()

    class Slow(Paid):
        def generate(self, prompts):
            started.set()
            release.wait(10)
            return super().generate(prompts)

    gen = CachedGenerator(Slow(), CallStore(path, timeout=0.1), GenerationConfig())
    gen.store.get_many(["key00000"])  # connected
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # every write waits for this one
    results: dict[str, str] = {}
    first = threading.Thread(target=lambda: results.update(a=gen.generate([prompt("ANSWER=x")])[0].text))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: results.update(b=gen.generate([prompt("ANSWER=x")])[0].text))
    second.start()
    release.set()
    first.join(10)
    second.join(10)
    other.execute("ROLLBACK")
    other.close()
    assert results == {"a": "x", "b": "x"}
    assert not first.is_alive() and not second.is_alive()


@pytest.mark.parametrize("damage", [overwrite_middle, not_sqlite], ids=lambda f: f.__name__)
def test_a_run_on_a_damaged_cache_has_the_tables_of_an_uncached_run(tmp_path, damage, caplog):
    """Questions in flight against an endpoint, the cache damaged between two runs: the second run
    completes with no error and the tables of an uncached run; the damaged file is set aside."""
    pytest.importorskip("uvicorn")
    from ragray.loopback import LoopbackServer
    from ragray.pipeline import run_influence
    from tests.pipeline.test_in_flight import config, tables

    with LoopbackServer(latency=0.01, limit=32) as server:
        in_flight = "execution.max_questions_in_flight=4"
        run_influence(config(server, tmp_path, in_flight), tmp_path / "fill", progress=False)
        path = tmp_path / "cache" / "calls.sqlite"
        checkpointed(path)
        damage(path)
        with caplog.at_level(logging.WARNING, logger="ragray.cache.calls"):
            healed = run_influence(config(server, tmp_path, in_flight), tmp_path / "healed", progress=False)
        plain = run_influence(config(server, tmp_path, in_flight, "cache.calls=false"), tmp_path / "plain",
                              progress=False)
    assert healed.summary.errors == 0 and healed.summary.n_failed_calls == 0
    assert tables(healed.out) == tables(plain.out)
    assert "moved to calls.sqlite.corrupt-" in caplog.text
    assert list((tmp_path / "cache").glob("calls.sqlite.corrupt-*"))
