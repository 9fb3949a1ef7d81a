"""The work one server process has under way — its one-question requests and its runs — and stopping it.

Every request of ``/influence`` and ``/interpretation`` and every run of ``POST /runs`` holds a
:class:`~ragray.cancel.CancelToken` registered here. A token is cancelled when its client
disconnects, by ``DELETE /runs/{id}``, or by :meth:`Inflight.stop` when the server stops (SIGTERM,
Ctrl-C, a Serve replica's shutdown); the work then stops at its next model call. :meth:`Inflight.stop`
waits for the runs' threads at most ``timeout`` seconds and names the runs still going, which the
caller records ``interrupted`` itself (their threads die with the process).

:class:`RunModel` is what a run started over HTTP calls its model: the served generator (or the
run's own) behind the run's token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from ragray.cancel import CancelToken
from ragray.config import ExperimentConfig
from ragray.generation import Generator
from ragray.generation.cancellable import CancellableGenerator

__all__ = ["Inflight", "RunModel", "STOPPING", "stops_with_the_server"]

#: why work is cancelled when the server stops
STOPPING = "the server is stopping"


@dataclass(frozen=True)
class _Run:
    thread: threading.Thread
    token: CancelToken


class Inflight:
    """The cancellable requests and runs of one server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: set[CancelToken] = set()
        self._runs: dict[str, _Run] = {}
        self.stopping = False

    @contextmanager
    def request(self) -> Iterator[CancelToken]:
        """A token for one request while it runs (already cancelled when the server is stopping)."""
        token = CancelToken()
        with self._lock:
            self._requests.add(token)
            if self.stopping:
                token.cancel(STOPPING)
        try:
            yield token
        finally:
            with self._lock:
                self._requests.discard(token)

    def add_run(self, run_id: str, thread: threading.Thread, token: CancelToken) -> None:
        """Track the run ``run_id`` (its thread not started yet: :meth:`stop` waits for started ones)."""
        with self._lock:
            self._runs[run_id] = _Run(thread, token)
            if self.stopping:
                token.cancel(STOPPING)

    def finished(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def cancel_run(self, run_id: str, reason: str) -> bool:
        """Cancel the run ``run_id`` if it is going on in this process (again: no change); whether it is."""
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            return False
        run.token.cancel(reason)
        return True

    def cancel_all(self, reason: str = STOPPING) -> None:
        """Cancel every request and run. A signal handler calls this, so it takes no lock (the
        copies are made in one step each, the tokens only set flags)."""
        self.stopping = True
        for token in list(self._requests) + [r.token for r in list(self._runs.values())]:
            token.cancel(reason)

    def stop(self, timeout: float) -> list[str]:
        """Cancel everything, wait up to ``timeout`` seconds for the runs' threads; the ids of the
        runs still going then."""
        with self._lock:
            self.cancel_all()
            runs = dict(self._runs)
        deadline = time.monotonic() + timeout
        for run in runs.values():
            if run.thread.ident is not None:
                run.thread.join(max(0.0, deadline - time.monotonic()))
        return [run_id for run_id, run in runs.items() if run.thread.is_alive()]


class RunModel:
    """The model of one run started over HTTP, behind its token: the served ``shared`` generator,
    or the run's own (another generation section), closed after the run unless the process keeps
    it (:mod:`ragray.generation.kept`). A run of its own on the ``ray`` executor gets None: Ray
    Data's actors load the model, and the token does not reach them."""

    def __init__(self, config: ExperimentConfig, shared: Generator | None, token: CancelToken) -> None:
        self.config, self.shared, self.token = config, shared, token
        self._opened: Generator | None = None
        self._kept = False

    def open(self, command: str) -> Generator | None:
        """The generator the run of ``command`` calls (None: it needs none, or its executor opens its own)."""
        per_call = self.config.serve.max_prompts_per_call
        if self.shared is not None:
            return CancellableGenerator(self.shared, self.token, per_call)
        if self.config.execution.executor != "local" or (command == "audit" and not self.config.audit.llm):
            return None
        from ragray.generation.kept import kept_generator
        from ragray.pipeline.generators import open_generator

        loaded = kept_generator(self.config.generation)
        self._kept = loaded is not None
        self._opened = open_generator(self.config, loaded)
        return CancellableGenerator(self._opened, self.token, per_call)

    def close(self) -> None:
        """Close the run's own generator (not the served one, nor a model the process keeps)."""
        if self._opened is not None and not self._kept:
            self._opened.close()


def stops_with_the_server(stop: Callable[[], None]) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """A FastAPI ``lifespan`` that calls ``stop`` (in a worker thread: it waits for runs) when the
    server shuts down."""

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(stop)

    return lifespan
