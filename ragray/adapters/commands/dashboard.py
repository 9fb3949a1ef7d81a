"""``ragray dashboard [RUNS_DIR]``: the web page over a folder of runs and the run history.

Beyond loopback it needs the API key of ``ragray serve`` (``$<serve.api_key_env>``) or
``--insecure`` (:mod:`ragray.adapters.dashboard.access`); uploads are bounded by ``dashboard.*``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ragray._imports import require
from ragray.errors import InputError

__all__ = ["dashboard_command"]


def dashboard_command(args: argparse.Namespace) -> int:
    """Check the folder and the exposure, then serve until Ctrl-C."""
    from ragray.config import load_config
    from ragray.store.history import history_url

    uvicorn = require("uvicorn", extra="dashboard", feature="ragray dashboard")
    require("fastapi", extra="dashboard", feature="ragray dashboard")
    config = load_config(None, args.overrides)
    if not Path(args.runs_dir).is_dir():
        raise InputError(f"RUNS_DIR: no such folder: {args.runs_dir}")
    from ragray.adapters.dashboard.access import check_dashboard_exposure
    from ragray.adapters.dashboard.app import make_dashboard
    from ragray.adapters.serving.exposure import is_loopback

    key_env = config.serve.api_key_env
    # loopback is the user's own machine: no key asked there, as before (even with $key_env set)
    key = None if is_loopback(args.host) else os.environ.get(key_env) or None
    warning = check_dashboard_exposure(args.host, key_env, key, args.insecure)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    history = history_url(args.history or config.history.url)
    app = make_dashboard(args.runs_dir, history, api_key=key, limits=config.dashboard)
    auth = f"key ${key_env} required" if key else "no key"
    print(f"ragray dashboard: {args.runs_dir} (history {history}) on http://{args.host}:{args.port}/, {auth}  "
          "(Ctrl-C stops)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
