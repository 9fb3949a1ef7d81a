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

import importlib.util
import logging
import os
import threading
from typing import Any

from ragray._imports import require
from ragray.worker import assigned_gpus, reserved_cpus  # what Ray gave this process (re-exported)

__all__ = ["RAY_ENV_DEFAULTS", "WorkingDirectoryGuard", "apply_defaults", "connect", "load_native_libraries",
           "assigned_gpus", "reserved_cpus"]

log = logging.getLogger(__name__)

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


def _working_directory() -> str | None:
    try:
        return os.getcwd()
    except FileNotFoundError:
        return None


def connect(address: str | None, *, feature: str, dashboard: bool | None = None) -> Any:
    """The ``ray`` module, connected: to ``address`` or ``RAY_ADDRESS``, else a Ray started in this
    process (with the dashboard unless ``dashboard`` is False). A Ray already initialized here is
    used as it is. ``feature`` names what needs Ray in the error when it is not installed. Joining
    a cluster keeps the process's working directory usable (module docstring)."""
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
            ray.init(address="local", include_dashboard=dashboard, log_to_driver=False)
    return ray


