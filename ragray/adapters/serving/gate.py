"""The API's front door: a request's id, the API key and the body, before anything else sees it.

Order matters (issue 64): an attacker who opens many connections and sends their bodies one byte
at a time must not take the server. So this ASGI middleware sits outside admission
(:mod:`ragray.adapters.serving.admission`) and the app, and for each HTTP request

1. reads ``X-Request-ID`` (at most 64 of ``A-Za-z0-9._:-``; anything else, bytes that are not
   ASCII included, is a 400 rather than a 500 when the id is echoed in a header);
2. checks ``Authorization: Bearer <key>`` on the headers alone (401), so a client without the
   key is answered before its body is read and is never counted by admission;
3. reads the whole body within ``body_timeout_s`` (408, connection closed) and ``limit`` bytes
   (413), declared or streamed, and only then hands the request on: a body still arriving holds
   no admission slot, so slow senders with the key cannot lock out the others either.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Gate", "error_body", "read_body", "request_id_of"]

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]

_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")


def error_body(status: int, message: str, request_id: str, **headers: str) -> tuple[dict, dict]:
    """The ASGI start and body messages of the API's JSON error ``{"error", "request_id"}``."""
    body = json.dumps({"error": message, "request_id": request_id}, ensure_ascii=True).encode("ascii")
    pairs = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
             (b"x-request-id", request_id.encode("ascii"))]
    pairs += [(k.lower().encode("ascii"), v.encode("ascii")) for k, v in headers.items()]
    return ({"type": "http.response.start", "status": status, "headers": pairs},
            {"type": "http.response.body", "body": body})


async def _send_error(send: Any, status: int, message: str, request_id: str, **headers: str) -> None:
    start, body = error_body(status, message, request_id, **headers)
    await send(start)
    await send(body)


def request_id_of(scope: dict) -> str | None:
    """The request's id: the client's valid ``X-Request-ID``, else a new one; None when the
    client's header is not a valid id."""
    given = [v for k, v in scope.get("headers") or () if k.lower() == b"x-request-id"]
    if not given or not given[0]:
        return uuid.uuid4().hex
    return given[0].decode("ascii") if _REQUEST_ID.match(given[0]) else None


def _bearer(scope: dict) -> bytes:
    for k, v in scope.get("headers") or ():
        if k.lower() == b"authorization":
            scheme, _, token = v.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return b""


class Gate:
    """ASGI middleware: request id, API key, then the whole body within its size and time limits
    (module docstring). ``key`` None: no auth."""

    def __init__(self, app: ASGIApp, *, key: str | None, limit: int, body_timeout_s: float) -> None:
        self.app, self.limit, self.body_timeout_s = app, limit, body_timeout_s
        self.key = key.encode() if key else None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id_of(scope)
        if rid is None:
            await _send_error(send, 400, "X-Request-ID: must be 1-64 ASCII letters, digits or ._:-",
                              uuid.uuid4().hex)
            return
        scope.setdefault("state", {})["request_id"] = rid
        if self.key is not None and not hmac.compare_digest(_bearer(scope), self.key):
            await _send_error(send, 401, "missing or wrong API key (Authorization: Bearer <key>)", rid,
                              **{"WWW-Authenticate": "Bearer"})
            return
        messages = await self._body(scope, receive, send, rid)
        if messages is None:
            return

        async def replay() -> dict:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _body(self, scope: dict, receive: Any, send: Any, rid: str) -> list[dict] | None:
        """The request's body messages, or None once an error is sent (too large, too slow)."""
        body = await read_body(scope, receive, self.limit, self.body_timeout_s)
        if isinstance(body, list):
            return body
        if body == 413:
            await _send_error(send, 413, f"request body over {self.limit} bytes", rid)
        else:
            await _send_error(send, 408, f"request body not received within {self.body_timeout_s:g} s", rid,
                              Connection="close")
        return None


async def read_body(scope: dict, receive: Any, limit: int, timeout_s: float) -> list[dict] | int:
    """The whole body of an HTTP request as its ASGI messages, read within ``timeout_s`` seconds and
    ``limit`` bytes (declared or streamed); else the status that says why not: 413 or 408."""
    declared = next((v for k, v in scope.get("headers") or () if k.lower() == b"content-length"), None)
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return 413
    messages: list[dict] = []
    size, deadline = 0, time.monotonic() + timeout_s
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0.001))
        except asyncio.TimeoutError:
            return 408
        messages.append(message)
        size += len(message.get("body", b""))
        if size > limit:
            return 413
        if message["type"] != "http.request" or not message.get("more_body"):
            return messages
