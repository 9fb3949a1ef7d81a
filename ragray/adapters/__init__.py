"""The adapters: how users reach the pipeline and the Python API. Each calls them and adds no logic.

- :mod:`ragray.adapters.cli` and :mod:`ragray.adapters.commands`: the ``ragray`` command;
- :mod:`ragray.adapters.serving`: the HTTP API and its Ray Serve deployments;
- :mod:`ragray.adapters.sweep`: the Ray Tune sweep and its leaderboard;
- :mod:`ragray.adapters.execution`: Ray Data actors and the one place that connects to Ray;
- :mod:`ragray.adapters.dashboard`: the web page over the run history.

The old paths (``ragray.serving``, ``ragray.cli``, ...) still import, with a DeprecationWarning,
for one release (:mod:`ragray._moved`).
"""
