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
"""

from __future__ import annotations

import os
from typing import Any

from ragray._imports import require

__all__ = ["RAY_ENV_DEFAULTS", "apply_defaults", "connect"]

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


def connect(address: str | None, *, feature: str, dashboard: bool | None = None) -> Any:
    """The ``ray`` module, connected: to ``address`` or ``RAY_ADDRESS``, else a Ray started in this
    process (with the dashboard unless ``dashboard`` is False). A Ray already initialized here is
    used as it is. ``feature`` names what needs Ray in the error when it is not installed."""
    apply_defaults()
    ray = require("ray", extra="ray", feature=feature)
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(address="local", include_dashboard=dashboard, log_to_driver=False)
    return ray
