"""One-question requests that stop when their client goes away.

:func:`until_done` runs a request's work in a worker thread with a
:class:`~ragray.cancel.CancelToken` (registered in the server's :class:`Inflight`) and, meanwhile,
waits on the request's ASGI ``receive`` for ``http.disconnect``: a client that disconnects cancels
the token, and the work stops at its next model call (at most ``serve.max_prompts_per_call``
prompts later). A request the server cancels (Ray Serve does when its client goes; uvicorn when a
shutdown outlasts its grace) cancels the token too. Work stopped so answers 503.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import anyio
from fastapi import HTTPException, Request

from ragray.cancel import Cancelled, CancelToken
from ragray.adapters.serving.inflight import Inflight

__all__ = ["until_done"]

T = TypeVar("T")


async def _watch(request: Request, token: CancelToken) -> None:
    """Cancel ``token`` when the client disconnects (the body is read: the next message says so)."""
    while not token.cancelled:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            token.cancel("the client disconnected")
            return
        await asyncio.sleep(0.05)  # never a busy loop, whatever a server sends


async def until_done(request: Request, inflight: Inflight, work: Callable[[CancelToken], T]) -> T:
    """``work(token)`` in a worker thread, its token cancelled when the client disconnects or the
    request is cancelled; :class:`~ragray.cancel.Cancelled` becomes a 503."""
    with inflight.request() as token:
        watcher = asyncio.ensure_future(_watch(request, token))
        try:
            return await anyio.to_thread.run_sync(work, token, abandon_on_cancel=True)
        except Cancelled as exc:
            raise HTTPException(503, f"the request was stopped: {exc}") from None
        except asyncio.CancelledError:
            token.cancel("the request was cancelled")  # the abandoned thread stops at its next call
            raise
        finally:
            watcher.cancel()
