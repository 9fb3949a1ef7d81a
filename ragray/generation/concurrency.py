"""How many requests an endpoint gets at once: an adaptive limit that backs off when the server
throttles (429 / 503) and learns a fixed concurrency cap.

Two kinds of server throttle. One whose capacity is unknown or moving (a shared deployment, an
autoscaler) is best met by TCP's rule: halve on a throttle, add one after each window of
successes. One with a hard concurrency cap (how hosted APIs enforce a plan's limit: the request
over N in flight gets 429) answers 429 at the *same level* every time, and the halving rule
saw-tooths under it: measured against a 1.0 s server capped at 32, the halve-and-grow limit
averaged 23.5 in flight (0.73 of the cap).

So each throttle remembers the level it came at: how many requests this client had in flight when
the throttled one was sent (the lowest such level among a burst's throttles, since requests sent
below the cap are accepted). When a throttle comes at the level of the previous one (within
:data:`SAME_LEVEL`), that level is a cap: the limit settles one under it and stays there. While
settled, an isolated throttle (at least ``limit`` successes since the one before: the server counted
a finished request a moment longer than this client did) lowers the limit by one; throttles in quick
succession mean the cap moved down: the limit halves as before and the cap is forgotten until a
level repeats again. While settled, after :data:`PROBE_EVERY` × limit successes the limit tries one
more request at once: a cap that rose is found (the limit grows on), one that did not costs one
throttled request, retried as every throttled request is (nothing is lost, and the server answers
each request once).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, NamedTuple

__all__ = ["PROBE_EVERY", "SAME_LEVEL", "AdaptiveLimit", "Ticket"]

log = logging.getLogger(__name__)

#: two throttles within this many requests in flight of each other are at "the same level"
SAME_LEVEL = 1
#: successes (in multiples of the limit) between probes above a learned cap
PROBE_EVERY = 20


class Ticket(NamedTuple):
    """What :meth:`AdaptiveLimit.acquire` hands a request: the limit's epoch when it was sent and
    how many requests were in flight with it."""

    epoch: int
    level: int


class AdaptiveLimit:
    """At most ``limit`` requests at once (module docstring); never above ``ceiling``."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = self.limit = ceiling
        self.active = 0
        self.cuts = 0  # times the limit was halved
        self.cap: int | None = None  # the learned cap's settled limit (one under the level that throttles)
        self.throttles = 0
        self._last_level: int | None = None
        self._probing = False
        self._epoch = 0
        self._ok = 0
        self._ok_since_throttle = 0
        self._just_learned = False
        self._cond = threading.Condition()

    def acquire(self) -> Ticket:
        """Wait for a slot; returns the request's ticket (pass it to :meth:`release`)."""
        with self._cond:
            while self.active >= self.limit:
                self._cond.wait()
            self.active += 1
            return Ticket(self._epoch, self.active)

    def release(self, ticket: Ticket, throttled: bool) -> None:
        with self._cond:
            self.active -= 1
            if throttled:
                self.throttles += 1
                self._throttled(ticket)
            elif self.limit < self.ceiling:
                self._succeeded()
            else:
                self._ok_since_throttle += 1
            self._cond.notify_all()

    def _set(self, limit: int) -> None:
        """A new limit; a lower one starts a new epoch (throttles of requests sent before it are
        part of what caused it)."""
        limit = max(1, min(self.ceiling, limit))
        if limit < self.limit:
            self._epoch += 1
        self.limit, self._ok = limit, 0

    def _throttled(self, ticket: Ticket) -> None:
        if ticket.epoch != self._epoch:  # sent before the last cut: part of a burst already acted on
            if self._last_level is not None and ticket.epoch == self._epoch - 1:
                self._last_level = min(self._last_level, ticket.level)
            return
        level, last = ticket.level, self._last_level
        isolated = self._just_learned or self._ok_since_throttle >= self.limit
        self._last_level, self._ok_since_throttle, self._just_learned = level, 0, False
        if self._probing:  # the cap did not rise: back under it
            self._probing = False
            self._set(self.cap or self.limit - 1)
            return
        if self.cap is None and last is not None and abs(level - last) <= SAME_LEVEL:
            self.cap = max(1, max(level, last) - 1)
            self._set(self.cap)
            self._just_learned = True
            log.warning("the server throttles at %d requests in flight again: it has a cap; %d at once from now",
                        max(level, last), self.limit)
            return
        if self.cap is not None and isolated:  # a little under what was learned
            self.cap = max(1, min(self.cap, level) - 1)
            self._set(self.cap)
            return
        if self.cap is not None:
            log.warning("the server throttles again and again below its learned cap (%d): the cap moved", self.cap)
            self.cap = None
        self._set(self.limit // 2)
        self.cuts += 1
        log.warning("the server throttles: %d requests in flight at most now", self.limit)

    def _succeeded(self) -> None:
        self._ok += 1
        self._ok_since_throttle += 1
        if self._probing and self._ok >= self.limit:  # the probe held: the cap rose
            self._probing, self.cap = False, None
            self._set(self.limit + 1)
        elif self.cap is not None and not self._probing:
            if self._ok >= PROBE_EVERY * self.limit:
                self._probing = True
                self._set(self.limit + 1)
        elif self._ok >= self.limit:
            self._set(self.limit + 1)

    def state(self) -> dict[str, Any]:
        """What the run records: the configured ceiling, the limit now (the one it settled on at the
        end of a run), the learned cap (None: none learned), halvings and throttled requests."""
        with self._cond:
            return {"ceiling": self.ceiling, "limit": self.cap if self._probing else self.limit,
                    "learned_cap": None if self.cap is None else self.cap + 1, "cuts": self.cuts,
                    "throttled_requests": self.throttles}
