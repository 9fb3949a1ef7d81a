"""Who may open the dashboard, and how much an upload may send.

``ragray dashboard`` shows every run of the history (CLI runs too), serves their files and turns
uploaded CSVs into runs on disk. On a loopback host (the default) that is the user's own machine
and nothing is asked. On any other host it starts only when ``$<serve.api_key_env>`` (the key
``ragray serve`` uses) is set, or with ``--insecure``, which prints a warning at every start. With
the key, every route answers 401 unless the request carries it:

- ``Authorization: Bearer <key>`` (curl, scripts), or
- the cookie a browser gets by entering the key once in the form of the 401 page (``POST /login``):
  HttpOnly and SameSite=Strict (no script reads it, no other site's page sends it), holding an
  HMAC of the key, never the key itself; it is good until the key changes.

Neither the key nor the cookie is ever written into a page or a log. The dashboard speaks plain
HTTP: beyond a trusted network, put TLS in front of it.

:class:`BodyLimit` answers 413 before a request body over the upload limit is read or parsed, so
an oversized upload never reaches the disk (the multipart parser spools files to a temporary folder).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from ragray.adapters.serving.exposure import is_loopback
from ragray.adapters.serving.gate import read_body
from ragray.errors import ConfigError

__all__ = ["COOKIE", "BodyLimit", "check_dashboard_exposure", "require_key", "session_token"]

COOKIE = "ragray_dashboard"
#: multipart framing around the file (boundaries, part headers) on top of the file's own bytes
FRAMING_BYTES = 64 * 1024

ASGIApp = Callable[[dict, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def check_dashboard_exposure(host: str, key_env: str, key: str | None, insecure: bool) -> str | None:
    """Refuse (:class:`ConfigError`) to serve the dashboard on a non-loopback ``host`` without the
    API key (``$key_env``, value ``key``) unless ``insecure``; returns the warning to print when insecure."""
    if is_loopback(host) or key:
        return None
    if not insecure:
        raise ConfigError(
            f"--host {host} is not loopback: anyone who reaches it could read every run in the history and "
            f"upload files. Set ${key_env} (serve.api_key_env) to require 'Authorization: Bearer <key>' (a "
            "browser logs in once with the key), or start with --insecure to serve without a key")
    return (f"WARNING: dashboard on {host} without an API key (--insecure): anyone who reaches this port can "
            f"read every run and upload CSVs; set ${key_env} to require a key")


def session_token(key: str) -> str:
    """The browser cookie's value for ``key``: an HMAC of it (the key itself never leaves the server)."""
    return hmac.new(key.encode(), b"ragray dashboard session", hashlib.sha256).hexdigest()


def _has_key(request: Request, key: str, token: str) -> bool:
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), key.encode()):
        return True
    return hmac.compare_digest(request.cookies.get(COOKIE, "").encode(), token.encode())


def _local_path(target: str) -> str:
    """``target`` when it is a path of this site (``/runs/x?y``), else ``/``: the login never
    redirects elsewhere."""
    if target.startswith("/") and not target.startswith("//") and not any(c in target for c in "\\\r\n"):
        return target
    return "/"


def require_key(app: FastAPI, key: str, login_page: Callable[[str, str], str]) -> None:
    """Every route of ``app`` answers 401 without ``key`` (see the module docstring);
    ``login_page(message, next_path)`` is the HTML of the 401 page, with the form that posts to /login."""
    token = session_token(key)
    challenge = {"WWW-Authenticate": "Bearer"}

    def refused(message: str, path: str, next_path: str) -> Response:
        if path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=401, headers=challenge)
        return HTMLResponse(login_page(message, next_path), status_code=401, headers=challenge)

    @app.middleware("http")
    async def gate(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
        if request.url.path == "/login" and request.method == "POST" or _has_key(request, key, token):
            return await call_next(request)
        query = request.url.query
        return refused("this dashboard needs the API key (Authorization: Bearer <key>, or log in below)",
                       request.url.path, request.url.path + (f"?{query}" if query else ""))

    @app.post("/login", include_in_schema=False)
    async def login(key_given: str = Form("", alias="key"), next_path: str = Form("/", alias="next")) -> Response:
        target = _local_path(next_path)
        if not hmac.compare_digest(key_given.encode(), key.encode()):
            return refused("wrong key", "/", target)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response


class BodyLimit:
    """ASGI middleware: 413 (``page(message)``, HTML) for a request body over ``limit`` bytes,
    declared or streamed, before the app reads or parses any of it; 408 for one not received
    within ``timeout_s`` (:func:`~ragray.adapters.serving.gate.read_body`, as the API's)."""

    def __init__(self, app: ASGIApp, limit: int, message: str, page: Callable[[str], str],
                 timeout_s: float = 60.0) -> None:
        self.app, self.limit, self.message, self.page, self.timeout_s = app, limit, message, page, timeout_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await read_body(scope, receive, self.limit, self.timeout_s)
        if not isinstance(body, list):
            message = self.message if body == 413 else f"the request body did not arrive within {self.timeout_s:g} s"
            await HTMLResponse(self.page(message), status_code=body)(scope, receive, send)
            return

        async def replay() -> dict:
            return body.pop(0) if body else await receive()

        await self.app(scope, replay, send)
