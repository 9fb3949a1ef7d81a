"""Issue 64, item 1: Ray inside the perimeter.

The attack: ``RAGRAY_API_KEY=k ragray serve --host 0.0.0.0`` on Ray. The key guards the HTTP API,
but Ray's own ports (GCS, raylet, agents, workers) take gRPC with no authentication, so if they
listen beyond loopback anyone who reaches the machine can ``ray.init(address="<host>:<gcs port>")``
and run code in the server, key or not. The server is started the way the attack needs it:
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` absent from its environment (Ray then picks the machine's
routable address for its node) and ``ray`` imported before ragray connects (the Serve app does).
Every listening socket of that Ray's processes must be on loopback, but the API's.

The fast tests pin the classifier of :mod:`ragray.adapters.execution.ray_ports` and the rebinding
of a replica's inter-deployment gRPC server (:mod:`ragray.adapters.serving.replica_grpc`: Ray Serve
binds it to ``[::]:0`` whatever the node's address).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragray.adapters.execution.ray_ports import (ListeningSocket, describe, exposed, is_loopback_ip,
                                                 listening_sockets)
from ragray.adapters.serving.replica_grpc import keep_on_loopback, loopback_address

ROOT = Path(__file__).resolve().parents[2]
FAST = ["generation.backend=scripted", "rerank.strategy=none", "metrics.embedding=false"]


@pytest.mark.parametrize("ip, loopback", [
    ("127.0.0.1", True), ("127.8.0.1", True), ("::1", True),
    ("::ffff:127.0.0.1", True),  # a dual-stack gRPC socket bound to 127.0.0.1, as psutil shows it
    ("0.0.0.0", False), ("::", False), ("::ffff:0.0.0.0", False), ("192.0.2.2", False),
    ("::ffff:192.0.2.2", False), ("fe80::1%eth0", False)])
def test_loopback_addresses(ip, loopback):
    assert is_loopback_ip(ip) is loopback


GCS = ListeningSocket(10, "gcs_server", "::ffff:127.0.0.1", 6379)
AGENT = ListeningSocket(11, "ray::DashboardAgent", "127.0.0.1", 52365)
PROXY = ListeningSocket(12, "ray::ProxyActor", "0.0.0.0", 8000)


def test_only_sockets_beyond_loopback_are_exposed_and_the_api_port_is_allowed():
    wide = ListeningSocket(13, "raylet", "::", 40000)
    runtime_env = ListeningSocket(14, "ray::RuntimeEnvAgent", "192.0.2.2", 41000)
    sockets = [GCS, AGENT, PROXY, wide, runtime_env]
    assert exposed(sockets) == [PROXY, wide, runtime_env]
    assert exposed(sockets, allowed_ports=[8000]) == [wide, runtime_env]
    assert str(wide) == "[::]:40000 (raylet, pid 13)"


def test_what_serve_says_about_rays_ports():
    own = describe([GCS, AGENT, PROXY], gcs_address="127.0.0.1:6379", http="0.0.0.0:8000")
    assert own == ("Ray: its 2 listening ports (2 processes) are on loopback only; the network reaches the API "
                   "at 0.0.0.0:8000")
    leaky = describe([ListeningSocket(10, "gcs_server", "::", 6379), AGENT, PROXY],
                     gcs_address="192.0.2.2:6379", http="0.0.0.0:8000")
    assert leaky.startswith("WARNING: 1 of Ray's listening ports are reachable from the network")
    assert leaky.endswith(": [::]:6379 (gcs_server, pid 10)")
    joined = describe([ListeningSocket(1, "python", "::ffff:127.0.0.1", 41000), PROXY],
                      gcs_address="10.0.0.5:6379", http="0.0.0.0:8000")  # no process here holds the GCS port
    assert joined.startswith("Ray: joined the cluster at 10.0.0.5:6379; its ports are the cluster's.")
    assert "RAY_AUTH_MODE=token" in joined and "https://docs.ray.io/en/latest/ray-security/index.html" in joined


def test_the_sockets_are_read_from_the_process():
    pytest.importorskip("psutil")
    with socket.socket() as listening, socket.socket() as bound_only:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        bound_only.bind(("127.0.0.1", 0))  # bound, not listening: nobody can connect
        mine = listening_sockets([os.getpid()])
        ports = {s.port for s in mine}
        assert listening.getsockname()[1] in ports and bound_only.getsockname()[1] not in ports
        assert all(s.pid == os.getpid() for s in mine)
    assert listening_sockets([2 ** 22 + 12345]) == []  # no such process: nothing, no error


@pytest.mark.parametrize("given, bound", [("[::]:0", "127.0.0.1:0"), ("0.0.0.0:0", "127.0.0.1:0"),
                                           (":7000", "127.0.0.1:7000"), ("10.0.0.5:0", "10.0.0.5:0"),
                                           ("[::1]:0", "[::1]:0"), ("127.0.0.1:9", "127.0.0.1:9")])
def test_a_wildcard_bind_becomes_loopback(given, bound):
    assert loopback_address(given) == bound


@pytest.mark.parametrize("node, bound", [("127.0.0.1", "127.0.0.1:0"), ("192.0.2.2", "[::]:0")])
def test_a_replica_rebinds_only_on_a_loopback_node(monkeypatch, node, bound):
    pytest.importorskip("ray.serve")
    import ray
    from ray.serve._private import replica

    seen: list[str] = []
    monkeypatch.setattr(replica, "add_port_to_grpc_server", lambda server, address: seen.append(address) or 1)
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: node)
    assert keep_on_loopback() is (node == "127.0.0.1")
    assert keep_on_loopback() is (node == "127.0.0.1")  # twice: wrapped once
    replica.add_port_to_grpc_server(object(), "[::]:0")  # what Serve's replica does as it starts
    assert seen == [bound]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Ctrl-C to the server's process group (never `ray stop`: it kills every Ray on the machine)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _ray_processes(server_pid: int) -> set[int]:
    """The server, every process under it, every process of its session (``setsid`` in the test) and
    every process whose command line names its Ray session directory (in case one was reparented)."""
    import psutil

    tree = {server_pid, *(p.pid for p in psutil.Process(server_pid).children(recursive=True))}
    sessions = set()
    for pid in tree:
        try:
            sessions |= set(re.findall(r"--session[-_]dir=(\S+)", " ".join(psutil.Process(pid).cmdline())))
        except psutil.NoSuchProcess:
            pass
    assert sessions, "no Ray session directory on any command line of the server's processes"
    found = set(tree)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            same_session = os.getsid(proc.pid) == server_pid
        except OSError:
            continue
        if same_session or any(s in " ".join(proc.info["cmdline"] or ()) for s in sessions):
            found.add(proc.pid)
    return found


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_keyed_server_on_0000_keeps_every_ray_port_on_loopback(tmp_path):
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("ray")
    pytest.importorskip("psutil")
    port = _free_port()
    cmd = [sys.executable, "-m", "ragray.adapters.cli", "serve", "configs/serve_demo.yaml",
           "--host", "0.0.0.0", "--port", str(port), *[a for o in FAST for a in ("--set", o)],
           "--set", f"serve.runs_dir={tmp_path / 'runs'}"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS")}  # the attack's condition
    env |= {"RAGRAY_API_KEY": "k", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=o, stderr=e, start_new_session=True)
    try:
        deadline = time.time() + 300
        while True:
            assert proc.poll() is None, err.read_text()[-3000:]
            assert time.time() < deadline, f"not healthy in 300 s:\n{err.read_text()[-3000:]}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", headers={"Authorization": "Bearer k"},
                             timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)

        sockets = listening_sockets(_ray_processes(proc.pid))
        names = {s.process for s in sockets}
        assert {"gcs_server", "raylet"} <= names, names  # Ray's processes were found
        api = [s for s in sockets if s.port == port]
        assert api and all(s.ip == "0.0.0.0" for s in api)  # serve.host: the one port meant for the network
        assert exposed(sockets, allowed_ports=[port]) == []

        said = None  # printed once the replicas answered, which can be just after /health does
        while said is None and time.time() < deadline + 60:
            said = re.search(r"^(Ray: |WARNING: \d+ of Ray's).*$", err.read_text(), re.M)
            time.sleep(0.5)
        assert said is not None, err.read_text()[-3000:]
        assert re.fullmatch(rf"Ray: its \d+ listening ports \(\d+ processes\) are on loopback only; the network "
                            rf"reaches the API at 0\.0\.0\.0:{port}", said.group(0))
    finally:
        _stop(proc)
