"""The on-disk store: atomic entries, damage detected and recomputed, concurrent writers."""

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragray.cache.store import CacheStore, default_cache_root


@pytest.fixture
def store(tmp_path):
    return CacheStore(tmp_path / "cache")


def test_default_root_honours_xdg_cache_home(monkeypatch, tmp_path):
    assert default_cache_root() == Path(os.environ["RAGRAY_CACHE"])  # the variable first (conftest sets one)
    monkeypatch.delenv("RAGRAY_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_root() == tmp_path / "ragray"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_root() == default_cache_root().home() / ".cache" / "ragray"


def test_blob_round_trip_and_absent_key(store):
    assert store.read_blob("k", "abc") is None
    assert store.write_blob("k", "abc", b"payload\nwith lines")
    assert store.read_blob("k", "abc") == b"payload\nwith lines"
    assert not [p for p in store.path("k", "abc").parent.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-3],  # truncated
        lambda raw: raw[:-1] + b"X",  # one byte changed
        lambda raw: b"not a header" + raw,
        lambda raw: raw.replace(b'"key": "abc"', b'"key": "xyz"'),  # another key's file
    ],
)
def test_damaged_blob_is_ignored_with_a_warning_and_removed(store, caplog, damage):
    store.write_blob("k", "abc", b"some payload")
    path = store.path("k", "abc")
    path.write_bytes(damage(path.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="ragray.cache.store"):
        assert store.read_blob("k", "abc") is None
    assert "ignoring cache entry" in caplog.text and "recomputed" in caplog.text
    assert not path.exists()
    assert store.write_blob("k", "abc", b"some payload") and store.read_blob("k", "abc") == b"some payload"


def write_two(folder):
    (folder / "a.json").write_text('{"x": 1}')
    (folder / "sub").mkdir()
    (folder / "sub" / "b.txt").write_text("b")


def read_two(folder):
    return json.loads((folder / "a.json").read_text())["x"], (folder / "sub" / "b.txt").read_text()


def test_folder_round_trip_and_first_writer_wins(store):
    assert store.load_folder("idx", "k1", read_two) is None
    assert store.save_folder("idx", "k1", write_two)
    assert store.load_folder("idx", "k1", read_two) == (1, "b")
    # a second writer of the same key succeeds and leaves the first entry in place
    assert store.save_folder("idx", "k1", lambda d: (d / "a.json").write_text('{"x": 2}'))
    assert store.load_folder("idx", "k1", read_two) == (1, "b")
    assert sorted(p.name for p in store.path("idx", "k1").parent.iterdir()) == ["k1"]


@pytest.mark.parametrize("damage", ["edit", "delete", "manifest"])
def test_damaged_folder_is_ignored_with_a_warning(store, caplog, damage):
    store.save_folder("idx", "k1", write_two)
    folder = store.path("idx", "k1")
    if damage == "edit":
        (folder / "sub" / "b.txt").write_text("c")
    elif damage == "delete":
        (folder / "a.json").unlink()
    else:
        (folder / "manifest.json").write_text("{")
    with caplog.at_level(logging.WARNING, logger="ragray.cache.store"):
        assert store.load_folder("idx", "k1", read_two) is None
    assert "ignoring cache entry" in caplog.text
    assert not folder.exists()


def test_loader_failure_counts_as_damage(store, caplog):
    store.save_folder("idx", "k1", write_two)

    def bad_loader(folder):
        raise ValueError("does not fit 3 passages")

    with caplog.at_level(logging.WARNING):
        assert store.load_folder("idx", "k1", bad_loader) is None
    assert "does not fit 3 passages" in caplog.text


def test_unwritable_cache_is_logged_not_fatal(tmp_path, caplog):
    blocker = tmp_path / "a-file"  # a file where the cache folder should be: every write fails
    blocker.write_text("")
    store = CacheStore(blocker)
    with caplog.at_level(logging.WARNING):
        assert not store.write_blob("k", "abc", b"x")
        assert not store.save_folder("idx", "abc", write_two)
    assert caplog.text.count("could not write cache entry") == 2
    assert store.read_blob("k", "abc") is None and store.load_folder("idx", "abc", read_two) is None


WRITER = textwrap.dedent(
    """
    import sys, time
    from ragray.cache.store import CacheStore

    root, start = sys.argv[1], float(sys.argv[2])
    store = CacheStore(root)
    payload = b"x" * 200_000
    while time.time() < start:  # both processes begin together
        time.sleep(0.001)
    for i in range(40):
        assert store.write_blob("k", "same", payload)
        got = store.read_blob("k", "same")
        assert got is None or got == payload, "partial read"
        assert store.save_folder("idx", "same", lambda d: (d / "w.bin").write_bytes(payload))
        got = store.load_folder("idx", "same", lambda d: (d / "w.bin").read_bytes())
        assert got is None or got == payload, "partial folder"
    print("ok")
    """
)


@pytest.mark.slow  # over 2 s: outside the fast subset (README)
def test_two_processes_writing_the_same_keys_both_succeed(tmp_path):
    import time

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    start = str(time.time() + 2.0)
    procs = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path / "c"), start],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all(out.strip() == "ok" for out, _ in outs)
    store = CacheStore(tmp_path / "c")
    assert store.read_blob("k", "same") == b"x" * 200_000
    assert store.load_folder("idx", "same", lambda d: (d / "w.bin").read_bytes()) == b"x" * 200_000
    leftovers = [p for sub in ("k", "idx") for p in (tmp_path / "c" / sub).iterdir() if p.name != "same"]
    assert leftovers == []
