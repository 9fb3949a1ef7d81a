"""The working-directory guard and the order of :func:`ragray.adapters.execution.ray_runtime.connect`
(issue 27: a job driver's directory deleted and unpacked again under it); the real thing runs in
``tests/cluster/test_two_node_jobs.py``."""

from __future__ import annotations

import os
import shutil
import sys
import time
import types

import pytest

from ragray.adapters.execution import ray_runtime
from ragray.adapters.execution.ray_runtime import WorkingDirectoryGuard
from ragray.errors import BackendError


@pytest.fixture()
def inside(tmp_path):
    home = os.getcwd()
    d = tmp_path / "pkg"
    d.mkdir()
    os.chdir(d)
    try:
        yield d
    finally:
        os.chdir(home)


def test_the_guard_moves_the_process_into_the_directory_made_again(inside):
    guard = WorkingDirectoryGuard(str(inside), interval=0.01)
    assert guard.check() is False  # nothing happened: stays
    shutil.rmtree(inside)
    with pytest.raises(FileNotFoundError):
        os.getcwd()
    assert guard.check() is False  # not there yet: waits
    inside.mkdir()
    (inside / "configs.yaml").write_text("x: 1\n")
    assert guard.check() is True and guard.moves == 1
    assert os.getcwd() == str(inside) and open("configs.yaml").read() == "x: 1\n"  # relative paths work again


def test_the_guards_thread_follows_later_deletions(inside):
    guard = WorkingDirectoryGuard(str(inside), interval=0.01)
    guard._thread.start()
    try:
        for n in (1, 2):  # "later" too: the directory can go whenever a node first sets the job up
            shutil.rmtree(inside)
            time.sleep(0.05)
            inside.mkdir()
            deadline = time.monotonic() + 5
            while guard.moves < n and time.monotonic() < deadline:
                time.sleep(0.01)
            assert guard.moves == n and os.getcwd() == str(inside)
    finally:
        guard.stop()


def test_joining_a_cluster_loads_torch_first_and_guards_the_directory(monkeypatch, inside):
    """torch (oneMKL) is loaded while the directory exists; the guard starts after ray.init."""
    calls: list[str] = []
    fake = types.SimpleNamespace(is_initialized=lambda: False,
                                 init=lambda **kw: calls.append(f"init {kw.get('address')}"),
                                 util=types.SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1"))
    monkeypatch.setattr(ray_runtime, "require", lambda *a, **k: fake)
    monkeypatch.setattr(ray_runtime, "load_native_libraries", lambda: calls.append("torch"))
    monkeypatch.setattr(WorkingDirectoryGuard, "ensure", classmethod(lambda cls, path: calls.append(f"guard {path}")))
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    ray_runtime.connect(None, feature="test")
    assert calls == ["torch", "init 127.0.0.1:1", f"guard {inside}"]
    calls.clear()
    monkeypatch.delenv("RAY_ADDRESS")
    ray_runtime.connect(None, feature="test")  # a Ray of its own: nothing to guard
    assert calls == ["init local"]


def test_native_libraries_load_when_torch_is_installed():
    pytest.importorskip("torch")
    ray_runtime.load_native_libraries()
    assert "torch" in sys.modules


def test_the_cli_anchors_path_arguments_before_it_joins_a_cluster(monkeypatch, inside):
    from ragray.adapters.cli import _anchor_path_args, build_parser

    argv = ["run", "configs/x.yaml", "--dataset", "qa.jsonl", "--out", "runs/x"]
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    args = build_parser().parse_args(argv)
    _anchor_path_args(args)
    assert (args.config, args.dataset, args.out) == ("configs/x.yaml", "qa.jsonl", "runs/x")  # no cluster: as given
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    args = build_parser().parse_args(argv)
    _anchor_path_args(args)
    assert (args.config, args.dataset, args.out) == tuple(str(inside / p) for p in ("configs/x.yaml", "qa.jsonl", "runs/x"))
    args = build_parser().parse_args(["run", "--dataset", "demo"])
    _anchor_path_args(args)
    assert args.dataset == "demo"


def test_outside_a_ray_worker_nothing_is_reserved(monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    assert ray_runtime.reserved_cpus() is None  # and Ray was not imported to say so
    assert "ray" not in sys.modules


def test_its_own_ray_starts_on_loopback_whatever_the_environment_says(monkeypatch):
    """Ray read RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER at import (true: a loopback node address becomes the
    routable one); while connect() starts Ray it is off for Ray and its processes, then as it was."""
    pytest.importorskip("ray")
    from ray._private import ray_constants

    seen: list[tuple] = []
    fake = types.SimpleNamespace(
        is_initialized=lambda: False,
        init=lambda **kw: seen.append((kw, ray_constants.ENABLE_RAY_CLUSTER,
                                       os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"])),
        util=types.SimpleNamespace(get_node_ip_address=lambda: "127.0.0.1"))
    monkeypatch.setattr(ray_runtime, "require", lambda *a, **k: fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "1")
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    ray_runtime.connect(None, feature="test")
    (kw, constant, env), = seen
    assert (kw["_node_ip_address"], kw["dashboard_host"], constant, env) == ("127.0.0.1", "127.0.0.1", False, "0")
    assert ray_constants.ENABLE_RAY_CLUSTER is True and os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "1"


def test_a_ray_that_took_a_routable_address_is_shut_down(monkeypatch):
    pytest.importorskip("ray")
    shut: list[bool] = []
    fake = types.SimpleNamespace(is_initialized=lambda: False, init=lambda **kw: None,
                                 shutdown=lambda: shut.append(True),
                                 util=types.SimpleNamespace(get_node_ip_address=lambda: "192.0.2.2"))
    monkeypatch.setattr(ray_runtime, "require", lambda *a, **k: fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(BackendError, match=r"Ray started on node address 192.0.2.2, not loopback"):
        ray_runtime.connect(None, feature="test")
    assert shut == [True]
