"""Real `ray start` clusters on loopback for the job tests: a head and optional worker nodes.

Every node is a separate `ray start --block` process on 127.0.0.1 with every port chosen free (so
it cannot collide with another cluster on the machine) and, as ragray's recipes say, its own short
``--temp-dir`` (so the head's address is written there, not to /tmp/ray/ray_current_cluster where
every address-less `ray.init()` on the machine would find it). ``own_temp_dir=False`` starts a
worker the way a user who skips that step does: it shares the head's session folder (issue 27's
reproduction). Nodes are stopped by signalling their processes, never with `ray stop`, which would
stop every Ray process of the user.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests._cache_root import own_cache_root


RAY_CLI = shutil.which("ray")
REPO = Path(__file__).resolve().parents[2]
RUNTIME_ENV = "cluster/runtime_env.yaml"  # relative: the commands run from the repo root, as documented
RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DATA_DISABLE_PROGRESS_BARS": "1",
    # SIGTERM to `ray start --block` first drains the node for up to 30 s; a test node has
    # nothing worth draining.
    "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
}


@dataclass
class Cluster:
    dashboard: str  # http://127.0.0.1:<port>, the job API
    gcs: str  # 127.0.0.1:<port>, what drivers and worker nodes connect to
    temp_dir: Path  # the head's
    env: dict[str, str]
    procs: list[subprocess.Popen] = field(default_factory=list)  # head first
    logs: list[Path] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)  # every temp dir made for a node

    def log_tail(self, n: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-n:]}" for p in self.logs if p.is_file())


def free_ports(n: int) -> list[int]:
    """n distinct ports free on loopback now (all held open together, so no duplicates)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def stop_node(proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to `ray start --block` shuts its node down; whatever outlives it is killed by pid."""
    import psutil  # a dependency of ray

    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)
    proc.wait(timeout=10)


def raylet_pid(proc: subprocess.Popen) -> int:
    """The raylet under a `ray start --block` process (what a node loss kills)."""
    import psutil

    for p in psutil.Process(proc.pid).children(recursive=True):
        if "raylet" in p.name():
            return p.pid
    raise LookupError(f"no raylet under pid {proc.pid}")


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None


def alive_nodes(cluster: Cluster) -> list[dict]:
    """The cluster's live nodes, from the dashboard's state API."""
    got = _get(f"{cluster.dashboard}/api/v0/nodes?limit=100")
    nodes = (((got or {}).get("data") or {}).get("result") or {}).get("result") or []
    return [n for n in nodes if n.get("state") == "ALIVE"]


def _node_ports() -> list[str]:
    agent_http, agent_grpc, env_agent, metrics, node_mgr, obj_mgr = free_ports(6)
    return [f"--dashboard-agent-listen-port={agent_http}", f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--runtime-env-agent-port={env_agent}", f"--metrics-export-port={metrics}",
            f"--node-manager-port={node_mgr}", f"--object-manager-port={obj_mgr}"]


def _temp_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: AF_UNIX paths <= 107 bytes


def start_head(num_cpus: float = 2, prefix: str = "rgjob-", multi_node: bool = False,
               system_config: dict | None = None) -> Cluster:
    """`ray start --head --block`; returns once the job API answers. One node: loopback only
    (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). ``multi_node``: that variable unset, since with it
    set (even to 0) `ray start --address` refuses a second node; Ray then resolves 127.0.0.1 to
    the host's own address, which the nodes use between them (still one machine)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")}
    env |= RAY_ENV if multi_node else {**RAY_ENV, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    cache = own_cache_root()  # the cluster's own call cache (a module's cluster starts before any test's)
    env["RAGRAY_CACHE"] = str(cache)
    gcs, dash, client = free_ports(3)
    temp_dir = _temp_dir(prefix)
    log = temp_dir / "head.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [RAY_CLI, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={gcs}",
             "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
             f"--ray-client-server-port={client}", *_node_ports(), f"--num-cpus={num_cpus}", "--num-gpus=0",
             f"--object-store-memory={200 * 2**20}", f"--temp-dir={temp_dir}", "--disable-usage-stats",
             *([f"--system-config={json.dumps(system_config)}"] if system_config else [])],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=temp_dir, start_new_session=True,
        )
    cluster = Cluster(f"http://127.0.0.1:{dash}", f"127.0.0.1:{gcs}", temp_dir, env, [proc], [log], [temp_dir, cache])
    # ready = the job API answers AND `ray start` has written its address (its last step)
    deadline = time.monotonic() + 180
    while not ((_get(f"{cluster.dashboard}/api/version") or {}).get("ray_version")
               and (temp_dir / "ray_current_cluster").exists()):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_cluster(cluster)
            raise RuntimeError(f"ray start --head did not come up:\n{cluster.log_tail()}")
        time.sleep(0.5)
    return cluster


def add_worker(cluster: Cluster, num_cpus: float = 1, own_temp_dir: bool = True, num_gpus: int = 0) -> subprocess.Popen:
    """`ray start --address <head> --block`: one more node; returns once the head sees it alive.
    ``num_gpus``: fake GPUs (Ray's resource: torch on the node still sees none)."""
    before = len(alive_nodes(cluster))
    temp_dir = _temp_dir("rgwk-")
    cluster.dirs.append(temp_dir)
    log = temp_dir / "worker.log"
    args = [RAY_CLI, "start", f"--address={cluster.gcs}", "--block", "--node-ip-address=127.0.0.1",
            *_node_ports(), f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}", f"--object-store-memory={200 * 2**20}",
            "--disable-usage-stats"]
    if own_temp_dir:
        args.append(f"--temp-dir={temp_dir}")
    with open(log, "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=cluster.env, cwd=temp_dir,
                                start_new_session=True)
    cluster.procs.append(proc)
    cluster.logs.append(log)
    deadline = time.monotonic() + 120
    while len(alive_nodes(cluster)) <= before:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ray start --address did not join:\n{cluster.log_tail()}")
        time.sleep(0.5)
    return proc


def stop_cluster(cluster: Cluster) -> None:
    """Workers first, then the head; every node's temp dir removed."""
    for proc in reversed(cluster.procs):
        stop_node(proc)
    for d in cluster.dirs:
        shutil.rmtree(d, ignore_errors=True)


def submit(cluster: Cluster, job_id: str, command: list[str], timeout: float = 360,
           working_dir: Path = REPO) -> subprocess.CompletedProcess:
    """The documented command: `ray job submit` from the checkout, `--working-dir .`."""
    return subprocess.run(
        [RAY_CLI, "job", "submit", "--address", cluster.dashboard, "--submission-id", job_id,
         "--working-dir", ".", "--runtime-env", str(REPO / RUNTIME_ENV), "--", *command],
        cwd=working_dir, env=cluster.env, capture_output=True, text=True, timeout=timeout, check=False,
    )


@contextmanager
def served(cluster: Cluster, tmp_path: Path, app_args: dict, timeout: float = 300) -> Iterator[tuple[int, dict]]:
    """`serve deploy serve/demo.yaml --address <dashboard>` with the application's ``app_args`` on a
    free port; yields (port, the /health answer) once it answers, and `serve shutdown` at the end."""
    import httpx
    import pytest
    import yaml

    serve_cli = shutil.which("serve")
    if serve_cli is None:
        pytest.skip("the `serve` CLI (ray[serve]) is not installed")
    (port,) = free_ports(1)
    raw = yaml.safe_load((REPO / "serve" / "demo.yaml").read_text())
    raw["http_options"]["port"] = port
    # serve deploy cannot upload a local working dir: the config path must exist on the nodes
    raw["applications"][0]["args"] = app_args
    config = tmp_path / "serve.yaml"
    config.write_text(yaml.safe_dump(raw))
    env = {k: v for k, v in cluster.env.items() if k != "RAGRAY_API_KEY"}

    def status() -> str:
        return subprocess.run([serve_cli, "status", "--address", cluster.dashboard], env=env, capture_output=True,
                              text=True, timeout=60, check=False).stdout

    done = subprocess.run([serve_cli, "deploy", str(config), "--address", cluster.dashboard], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, status()
            time.sleep(1)
        assert "RUNNING" in status()
        yield port, r.json()
    finally:
        subprocess.run([serve_cli, "shutdown", "-y", "--address", cluster.dashboard], env=env,
                       capture_output=True, timeout=120, check=False)
