"""How many requests the API works on at once, and the documented 503 when it is full.

Ray Serve's proxy answers a full ingress queue itself, with a plain-text body; the API promises
a JSON error with ``Retry-After``. So the ingress admits requests freely at the Serve level and
this ASGI middleware enforces ``serve.ingress``: at most ``max_ongoing_requests`` handled at once
per replica, at most ``max_queued_requests`` more waiting (``-1``: no limit), and beyond that a
503 JSON error (``{"error", "request_id"}``) with ``Retry-After: 1``. Waiting holds no thread.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from ragray.adapters.serving.gate import error_body, request_id_of

__all__ = ["Admission", "BUSY"]

BUSY = "server busy: the API's request queue is full, retry later"


class Admission:
    """ASGI middleware: ``ongoing`` requests at once, ``queued`` more waiting, 503 beyond."""

    def __init__(self, app: Any, ongoing: int, queued: int) -> None:
        self.app, self.ongoing, self.queued = app, ongoing, queued
        self._slots: asyncio.Semaphore | None = None  # made on the server's event loop
        self._inside = 0  # running + waiting

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.ongoing)
        if self.queued >= 0 and self._inside >= self.ongoing + self.queued:
            await _busy(scope, send)
            return
        self._inside += 1
        try:
            async with self._slots:
                await self.app(scope, receive, send)
        finally:
            self._inside -= 1


async def _busy(scope: dict, send: Any) -> None:
    rid = scope.get("state", {}).get("request_id") or request_id_of(scope) or uuid.uuid4().hex
    for message in error_body(503, BUSY, rid, **{"Retry-After": "1"}):
        await send(message)
