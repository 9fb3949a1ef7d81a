"""Stopping work that is under way: a token its owner cancels, and the error the work then raises.

The HTTP server hands a :class:`CancelToken` to each piece of work it starts (a one-question
request, a run): the token is cancelled when the client disconnects, a client asks
(``DELETE /runs/{id}``) or the server is stopping. The work checks the token before each model
call (:class:`ragray.generation.cancellable.CancellableGenerator`) and raises :class:`Cancelled`,
so it stops within one call of being cancelled.

:class:`Cancelled` is a ``BaseException``, as ``KeyboardInterrupt`` is: the pipeline records a
question's ``Exception`` on the question and goes on, and a cancelled run must stop instead. Its
finished questions stay written, so the run resumes (``ragray run --resume``).
"""

from __future__ import annotations

import threading

__all__ = ["CancelToken", "Cancelled"]


class Cancelled(BaseException):
    """The work was cancelled (the message says by whom); what it finished is kept."""


class CancelToken:
    """A flag that work checks between model calls; cancelled once, by any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str) -> None:
        """Ask the work to stop; the first reason given is kept (a later one changes nothing)."""
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def check(self) -> None:
        """Raise :class:`Cancelled` if the token was cancelled."""
        if self._event.is_set():
            raise Cancelled(self.reason)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until cancelled (at most ``timeout`` seconds); whether it was."""
        return self._event.wait(timeout)
