"""How many requests the API works on at once, and the documented 503 when it is full.

Ray Serve's proxy answers a full ingress queue itself, with a plain-text body; the API promises
a JSON error with ``Retry-After``. So the ingress admits requests freely at the Serve level and
this ASGI middleware enforces ``serve.ingress``: at most ``max_ongoing_requests`` handled at once
per replica, at most ``max_queued_requests`` more waiting (``-1``: no limit), and beyond that a
503 JSON error (``{"error", "request_id"}``) with ``Retry-After: 1``. Waiting holds no thread.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

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
    headers = dict(scope.get("headers") or [])
    rid = headers.get(b"x-request-id", b"").decode("latin-1")[:64] or uuid.uuid4().hex
    body = json.dumps({"error": BUSY, "request_id": rid}).encode()
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"), (b"x-request-id", rid.encode("latin-1"))]})
    await send({"type": "http.response.body", "body": body})
