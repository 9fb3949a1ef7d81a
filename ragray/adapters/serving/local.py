"""The HTTP API in one process, without Ray: the same service over local components.

Used by the tests and the fuzzer, and by ``ragray serve --no-ray`` (:func:`serve_local`) for a quick
look at the API. On SIGTERM or Ctrl-C :func:`serve_local` cancels every request and run at once
(each stops at its next model call), gives them ``serve.stop_timeout_s`` to stop, records the runs
``interrupted`` and exits.
"""

from __future__ import annotations

from typing import Any

from ragray.config import ExperimentConfig
from ragray.generation import Generator
from ragray.pipeline.generators import open_generator
from ragray.adapters.serving.api import make_app
from ragray.adapters.serving.components import CorpusSearch, LockedGenerator, RerankStep
from ragray.adapters.serving.runs import Presets, RunManager
from ragray.adapters.serving.service import RagService

__all__ = ["local_app", "serve_local"]


def _app(config: ExperimentConfig, generator: Generator | None, api_key: str | None) -> tuple[Any, RunManager]:
    gen = LockedGenerator(generator or open_generator(config))
    service = RagService(config, CorpusSearch(config), RerankStep(config), gen)
    presets = Presets.for_server(config)
    runs = RunManager(config, presets, gen)
    return make_app(service, runs, presets, api_key=api_key), runs


def local_app(config: ExperimentConfig, generator: Generator | None = None, *, api_key: str | None = None) -> Any:
    """A FastAPI app serving ``config`` in this process (``generator`` overrides the backend)."""
    return _app(config, generator, api_key)[0]


def serve_local(config: ExperimentConfig, generator: Generator | None = None) -> None:
    """Serve ``config`` with uvicorn at ``serve.host:serve.port`` until SIGTERM or Ctrl-C."""
    import uvicorn

    app, runs = _app(config, generator, None)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            runs.inflight.cancel_all()  # at once, not after the requests' grace: they stop at their next call
            super().handle_exit(sig, frame)

    sc = config.serve
    Server(uvicorn.Config(app, host=sc.host, port=sc.port, timeout_graceful_shutdown=sc.stop_timeout_s)).run()
