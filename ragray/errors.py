"""The ragray error hierarchy.

    RagrayError                 base of everything ragray raises on purpose
    ├── ConfigError             a config file, a ``--set`` override or a component option is invalid
    │   ├── NotAllowedError     a client of the HTTP API set a setting the operator owns (HTTP 403)
    │   └── LimitError          a client's setting or request is over a cap of the server (HTTP 400)
    ├── InputError              a dataset file, a row or a CLI argument is invalid
    │   ├── PromptTooLongError  a prompt does not fit the model's context (HTTP 422, with the counts)
    │   └── ConflictError       a client's request clashes with what the operator owns (HTTP 409)
    ├── MissingDependencyError  an optional extra is not installed (names the pip command)
    ├── BackendError            a model, index or remote endpoint failed while running
    └── WriteError              a result file could not be written (disk full, quota, a lost mount);
                                also an ``OSError`` with the OS's ``errno`` and ``strerror``

Not a ``RagrayError``: :class:`ragray.cancel.Cancelled`, the work a client or the server stopped
(a ``BaseException``, as ``KeyboardInterrupt``, so no handler of a question's errors records it).

Messages say what is wrong and where ("retrieval.top_k must be >= 1, got 0";
"data/qa.jsonl:17: 'question' is missing").
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "RagrayError",
    "ConfigError",
    "NotAllowedError",
    "LimitError",
    "InputError",
    "PromptTooLongError",
    "ConflictError",
    "MissingDependencyError",
    "BackendError",
    "WriteError",
]


class RagrayError(Exception):
    """Base class of every error ragray raises deliberately."""


class ConfigError(RagrayError, ValueError):
    """A configuration value is invalid; the message names the dotted key."""


class NotAllowedError(ConfigError):
    """A client asked for a setting that only the server's operator may set (a model, a backend,
    an endpoint or its key, a path); the message names the key and lists what a client may set."""


class LimitError(ConfigError):
    """A client of the HTTP API asked for more work than the server allows: a number over its cap
    (``serve.limits``) or more model calls than ``serve.max_calls_per_request``; the message names
    the key (or the cost), the value and the cap."""


class InputError(RagrayError, ValueError):
    """User input (dataset file, row, CLI argument) is invalid; the message names file and line."""


class PromptTooLongError(InputError):
    """A prompt (question and passages) has more tokens than the model takes."""

    def __init__(self, prompt_tokens: int, limit: int, what: str = "the prompt") -> None:
        self.prompt_tokens, self.limit = prompt_tokens, limit
        super().__init__(f"{what} has {prompt_tokens} tokens; the model takes at most {limit}: send fewer or "
                         "shorter passages, or ask for a smaller top_k_docs")


class ConflictError(InputError):
    """A client's request clashes with the server's own material (a file preset of that name: the
    operator's, read-only over HTTP)."""


class MissingDependencyError(RagrayError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str, feature: str, install: str | None = None) -> None:
        self.package = package
        self.extra = extra
        install = install or f"pip install 'ragray[{extra}]'"
        super().__init__(f"{feature} needs the '{package}' package: {install}")


class BackendError(RagrayError, RuntimeError):
    """A model, index or endpoint failed while running."""


class WriteError(RagrayError, OSError):
    """Writing the result file ``path`` failed (no space left, a quota, a read-only or lost mount).
    What the run wrote before stays as it was: files are replaced whole, and the progress log
    keeps its finished questions, so ``--resume`` continues once the cause is fixed."""

    def __init__(self, path: str | os.PathLike[str], cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.path = str(path)
        self.filename = self.path

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.strerror}"

    def __reduce__(self) -> tuple[Any, ...]:  # OSError's would call WriteError(errno, strerror)
        return (WriteError, (self.path, OSError(self.errno, self.strerror)))
