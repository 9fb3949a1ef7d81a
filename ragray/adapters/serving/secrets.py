"""No operator secret in any answer: what a client may never read, and the last gate before it could.

The operator's config holds what a client must not learn (issue 64): an endpoint's URL with its
password, the names of the environment variables that hold keys (and those keys), the history
database's URL, the files behind ``serve.datasets``, the runs, presets and cache folders, a model
loaded from a folder. Routes show a client only its own settings and the allowed keys' values
(:meth:`~ragray.adapters.serving.runs.Presets.public`), and every text body the API sends passes
:class:`Scrub`, which removes

- the userinfo and the query of any URL (``http://op:pw@host/v1?key=k`` -> ``http://host/v1``);
- every string of the operator's config that is a URL, a path or an environment variable's name,
  and the values of those variables and of the API key (:meth:`Redactor.for_server`): a served
  dataset's path reads ``dataset '<name>'``, a database URL ``<database>``, any other path
  ``<path>``; the server's home and working directories too.

The second gate is what makes the first safe to miss: a message a future route quotes from an
exception (a backend's error with its URL, a missing file) is scrubbed all the same.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ragray.config import ExperimentConfig
from ragray.config_access import flatten
from ragray.text.urls import strip_urls

__all__ = ["Redactor", "Scrub", "public_model"]

_TEXT_TYPES = (b"application/json", b"text/", b"application/javascript", b"application/xml", b"application/yaml",
               b"application/x-yaml")
#: strings shorter than this are not redacted: they would eat ordinary words
_MIN_SECRET = 4


def _is_path(key: str, value: str) -> bool:
    """Whether the setting ``key`` holds a path (not a hub id such as ``org/model``)."""
    if value.startswith(("/", "~", "./", "../", ".\\", "..\\")) or re.match(r"^[A-Za-z]:[\\/]", value):
        return True
    last = key.rsplit(".", 1)[-1]
    pathish = last.endswith(("path", "dir", "file", "folder")) or last in {"model", "corpus", "index"}
    return pathish and (("/" in value or "\\" in value) and (last != "model" or Path(value).exists()))


def public_model(model_id: str) -> str:
    """A model's name as a client may read it: a folder's last part, a hub id as it is."""
    return Path(model_id).name if _is_path("model", model_id) else model_id


@dataclass(frozen=True)
class Redactor:
    """Replaces known secrets (longest first) and every URL's userinfo and query.

    A secret value (a key, a password) goes wherever it appears; a name (a path, a variable, a
    URL) only as a whole word, so the home folder ``/home/al`` does not eat ``/home/alice`` and a
    client's own text keeps what merely contains such a string."""

    replacements: tuple[tuple[str, str], ...] = ()
    names: tuple[tuple[str, str], ...] = ()

    @classmethod
    def for_server(cls, configs: Iterable[ExperimentConfig], secrets: Iterable[str] = ()) -> Redactor:
        """The redactor of a server: the secrets of its served config and of its file presets
        (``configs``), the server's home and working directories, and ``secrets`` (the API key)."""
        found: dict[str, str] = {}
        for config in configs:
            found.update(_config_secrets(config))
        values = {s: "<secret>" for s in secrets if s}
        for name in [s for s, r in found.items() if r == "<variable>"]:  # the keys they hold
            if os.environ.get(name):
                values[os.environ[name]] = "<secret>"
        values.update({s: r for s, r in found.items() if r == "<secret>"})  # URL passwords and users
        for where, label in ((os.getcwd(), "<server folder>"), (os.path.expanduser("~"), "<home>")):
            if len(where) > 1:
                found.setdefault(where, label)
        return cls(_pairs(values), _pairs({s: r for s, r in found.items() if s not in values}))

    def text(self, text: str) -> str:
        """``text`` with no secret left in it."""
        text = strip_urls(text)
        for secret, replacement in self.replacements:
            if secret in text:
                text = text.replace(secret, replacement)
        if self.names and any(name in text for name, _ in self.names):
            table = dict(self.names)
            text = self._words.sub(lambda m: table[m.group(0)], text)
        return text

    @cached_property
    def _words(self) -> re.Pattern[str]:
        alternatives = "|".join(re.escape(name) for name, _ in self.names)  # longest first
        return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")


def _pairs(found: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Each secret in every form a body may hold it, longest first."""
    pairs = {(v, r) for s, r in found.items() if len(s) >= _MIN_SECRET for v in _forms(s)}
    return tuple(sorted(pairs, key=lambda p: (-len(p[0]), p[0])))


def _forms(secret: str) -> set[str]:
    """A secret as it may appear in a body: raw, JSON-escaped (ASCII or not), HTML-escaped."""
    return {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], html.escape(secret)}


def _path_forms(value: str) -> list[str]:
    """A path as written and as the server resolves it (an error quotes either)."""
    out = [value] if ("/" in value or "\\" in value) else []
    try:
        out += [str(Path(value).expanduser()), str(Path(value).expanduser().resolve())]
    except (OSError, RuntimeError, ValueError):
        pass
    return out


def _url_secrets(url: str) -> dict[str, str]:
    """A URL's password and user name (which a decoded message may show without the URL)."""
    match = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://([^/\s@]*)@", url)
    if not match:
        return {}
    user, _, password = match.group(1).partition(":")
    return {part: "<secret>" for part in (user, password) if part}


def _config_secrets(config: ExperimentConfig) -> dict[str, str]:
    """secret -> what it reads as, for every URL, path and variable name of ``config``."""
    out: dict[str, str] = {}
    for key, value in flatten(config).items():
        if key == "serve.datasets" and isinstance(value, Mapping):
            for name, path in value.items():
                out.update({p: f"dataset '{name}'" for p in _path_forms(str(path))})
        if not isinstance(value, str) or not value:
            continue
        if key.endswith("_env"):
            out[value] = "<variable>"
        elif "://" in value:
            out.update(_url_secrets(value))
            out[value] = "<database>" if key.startswith("history.") else strip_urls(value)
            if key.startswith("history.") and value.startswith("sqlite:///"):
                out.update({p: "<database>" for p in _path_forms(value.removeprefix("sqlite:///"))})
        elif _is_path(key, value):
            out.update({p: out.get(p, "<path>") for p in _path_forms(value)})
    return out


class Scrub:
    """ASGI middleware: every text response body (JSON, HTML, plain text, CSV) through
    :meth:`Redactor.text`; binary bodies (Parquet, images) pass as they are."""

    def __init__(self, app: Any, redactor: Redactor) -> None:
        self.app, self.redactor = app, redactor

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: dict | None = None
        chunks: list[bytes] = []

        async def scrubbed(message: dict) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                kind = dict(message.get("headers") or []).get(b"content-type", b"")
                if kind.startswith(_TEXT_TYPES):
                    start = message
                    return
            elif message["type"] == "http.response.body" and start is not None:
                chunks.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                body = self._body(b"".join(chunks), start)
                headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
                await send({**start, "headers": headers + [(b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, scrubbed)

    def _body(self, body: bytes, start: dict) -> bytes:
        kind = dict(start.get("headers") or []).get(b"content-type", b"").decode("latin-1")
        charset = re.search(r"charset=([\w-]+)", kind)
        encoding = charset.group(1) if charset else "utf-8"
        try:
            text = body.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            return body
        return self.redactor.text(text).encode(encoding, errors="replace")
