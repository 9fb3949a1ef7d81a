"""Import optional heavy dependencies lazily, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from ragray.errors import MissingDependencyError


def require(module: str, *, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependencyError` naming ``ragray[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package or module.split(".")[0], extra, feature) from exc
