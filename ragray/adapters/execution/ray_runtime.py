"""The one place ragray talks to Ray's runtime: environment defaults and the connection.

Every Ray entry point (the Ray Data executor, ``ragray sweep`` on Tune, ``ragray serve`` and the
``serve run`` app builder) calls :func:`connect` (or :func:`apply_defaults` where Ray's own CLI
connects), and nothing happens at import.

Defaults (``os.environ.setdefault``: a user's own setting wins): loopback-only single-node
clusters, no token auth, no usage stats (ENV.md: Ray 2.60 on one machine), and Tune trials keep
the working directory, so relative paths in configs work inside a trial.

Address: ``execution.address`` / ``--address``, else ``RAY_ADDRESS``, else a new Ray in this
process (``address="local"``): a bare ``ray.init()`` would attach to whatever cluster
``ray start`` last recorded in ``/tmp/ray/ray_current_cluster``, possibly someone else's.

The Ray ragray starts itself listens on loopback only (issue 64): Ray's processes talk gRPC with
no authentication unless token auth is on, so a Ray port the network reaches lets anyone run code
in ragray's processes (and read ``$RAGRAY_API_KEY``). Every Ray process binds by the node IP
address the driver passes it (``--node-ip-address``: GCS, raylet, workers and the dashboard agent
listen on 127.0.0.1 when it is 127.0.0.1 and on every interface otherwise, the runtime-env agent
on the address itself), and Ray 2.60 picks that address in the driver:
``ray.init(_node_ip_address=...)`` goes through ``services.resolve_ip_for_localhost``, which turns
a loopback address into the machine's routable one unless
``ray._private.ray_constants.ENABLE_RAY_CLUSTER`` is false, a constant Ray reads from
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, at ``import ray``. The environment default below comes
too late when ``ray`` is already imported, and a user's ``=1`` (kept for a multi-node cluster)
wins over it, so :func:`connect` sets the constant (and the variable, for the processes Ray
starts) while it starts Ray, then checks the node address Ray took. Serve replicas open one more
gRPC server, on every interface whatever the node address: see
:mod:`ragray.adapters.serving.replica_grpc`. A cluster of several machines is started with
``ray start`` and joined with an address; joining changes nothing.

Joining a cluster from a ``ray job submit`` driver, the driver's working directory (the job's
unpacked ``--working-dir`` package) can be deleted and unpacked again under the same path while the
driver runs: when a node that shares the head's session folder (``ray start --address`` without
its own ``--temp-dir``) sets the package up for the job, which can be at ``ray.init()`` or minutes
later, when a trial or actor first lands there. A process whose directory was deleted has no
working directory (``os.getcwd()`` raises, relative paths fail) and oneMKL aborts the process when
torch loads. So before joining, :func:`connect` loads torch's native libraries, and after it
:class:`WorkingDirectoryGuard` moves the process back into the directory of the same path as soon
as it exists again, for the rest of the process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from ragray._imports import require
from ragray.errors import BackendError
from ragray.worker import assigned_gpus, reserved_cpus  # what Ray gave this process (re-exported)

__all__ = ["RAY_ENV_DEFAULTS", "WorkingDirectoryGuard", "apply_defaults", "connect", "load_native_libraries",
           "assigned_gpus", "reserved_cpus"]

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"  # the node address, and the dashboard's host, of the Ray ragray starts

RAY_ENV_DEFAULTS: dict[str, str] = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_CHDIR_TO_TRIAL_DIR": "0",
}


def apply_defaults() -> None:
    """Set :data:`RAY_ENV_DEFAULTS` where the environment does not already."""
    for key, value in RAY_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)


def load_native_libraries() -> None:
    """Load torch (and the oneMKL inside it) now, if installed: its loader needs the working directory."""
    if importlib.util.find_spec("torch") is None:
        return
    import torch

    _ = torch.ones(16, 16) @ torch.ones(16, 16)  # the BLAS backend initializes on its first product


class WorkingDirectoryGuard:
    """Keeps the process in the directory ``path`` names: when that directory is deleted and made
    again (same path, another inode), the process moves into the new one. One daemon thread per
    process, polling every ``interval`` seconds (a ``stat`` of two paths)."""

    _started: WorkingDirectoryGuard | None = None
    _lock = threading.Lock()

    def __init__(self, path: str, interval: float = 0.05) -> None:
        self.path, self.interval = path, interval
        self.moves = 0  # times the process was moved back (tests, logs)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ragray-cwd-guard", daemon=True)

    @classmethod
    def ensure(cls, path: str | None) -> WorkingDirectoryGuard | None:
        """Start the process's guard on ``path`` unless one runs (None: no working directory to keep)."""
        with cls._lock:
            if cls._started is None and path is not None:
                cls._started = cls(path)
                cls._started._thread.start()
            return cls._started

    def check(self) -> bool:
        """Move back into ``path`` if the working directory is no longer it; True when moved."""
        try:
            here = os.stat(".")
        except FileNotFoundError:
            here = None
        try:
            there = os.stat(self.path)
        except FileNotFoundError:  # deleted and not made again yet: wait
            return False
        if here is not None and (here.st_ino, here.st_dev) == (there.st_ino, there.st_dev) and here.st_nlink:
            return False
        try:
            os.chdir(self.path)
        except OSError:
            return False
        self.moves += 1
        log.info("the working directory %s was deleted and made again (a Ray node unpacked the job's "
                 "working_dir into it); the process moved into the new one", self.path)
        return True

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()


@contextlib.contextmanager
def _single_machine() -> Iterator[None]:
    """While Ray starts: Ray's multi-node switch off in this process (the constant it read at
    import) and in the environment its processes inherit; both as they were afterwards."""
    from ray._private import ray_constants

    env_before = os.environ.get(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR)
    constant_before = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = constant_before
        if env_before is None:
            os.environ.pop(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, None)
        else:
            os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = env_before


def _start_local(ray: Any, dashboard: bool | None) -> None:
    """Start Ray in this process with every port on loopback (module docstring); a Ray that took
    another node address is shut down again (:class:`BackendError`) rather than left listening."""
    with _single_machine():
        ray.init(address="local", include_dashboard=dashboard, dashboard_host=LOOPBACK,
                 _node_ip_address=LOOPBACK, log_to_driver=False)
    node_ip = ray.util.get_node_ip_address()
    if not ipaddress.ip_address(node_ip).is_loopback:
        ray.shutdown()
        raise BackendError(f"Ray started on node address {node_ip}, not loopback: its ports would be reachable "
                           "from the network; start a cluster with `ray start` and pass --address to use one")


def _working_directory() -> str | None:
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def connect(address: str | None, *, feature: str, dashboard: bool | None = None) -> Any:
    """The ``ray`` module, connected: to ``address`` or ``RAY_ADDRESS``, else a Ray started in this
    process (with the dashboard unless ``dashboard`` is False), every port of it on loopback. A Ray
    already initialized here is used as it is. ``feature`` names what needs Ray in the error when it
    is not installed. Joining a cluster keeps the process's working directory usable (module
    docstring)."""
    apply_defaults()
    ray = require("ray", extra="ray", feature=feature)
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            home = _working_directory()
            load_native_libraries()
            ray.init(address=address, log_to_driver=False)
            WorkingDirectoryGuard.ensure(home)
        else:
            _start_local(ray, dashboard)
    return ray


