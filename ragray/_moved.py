"""Old import paths of modules that moved, kept for one release as deprecated aliases.

The adapters (the CLI, HTTP, Tune, Ray Data, the dashboard) moved under :mod:`ragray.adapters`.
``import ragray.serving.app`` (a Serve config's ``import_path``, a user's script) still works: it
returns the module at its new path (the same module object, so classes and registries are shared)
with one :class:`DeprecationWarning` per old path that names the new path and the release that
removes the old one (:data:`REMOVED_IN`, also in CHANGELOG.md). The real module is left as it was:
its ``__spec__``, ``__name__`` and loader stay the new path's. Installed by ``import ragray``; it
imports nothing until an old path is asked for.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["MOVED", "REMOVED_IN", "install", "new_name"]

#: the release that removes the old paths
REMOVED_IN = "0.2.0"

#: old package or module -> where it lives now
MOVED = {f"ragray.{name}": f"ragray.adapters.{name}"
         for name in ("cli", "commands", "serving", "sweep", "execution", "dashboard")}


def new_name(fullname: str) -> str | None:
    """The module's name now, where ``fullname`` is an old path (or under one); else None."""
    for old, new in MOVED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _Alias:
    """Finds an old path and loads it as the module at the new one (a meta path finder and its
    loader, by the protocols ``importlib.abc`` describes; not subclassed: that import is slow)."""

    def __init__(self) -> None:
        self._own_specs: dict[str, ModuleSpec] = {}  # new name -> the real module's spec

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        from importlib.util import find_spec

        found = find_spec(new)  # imports the new path's parents only, not the module
        if found is None:
            raise ModuleNotFoundError(f"No module named {new!r} (asked for as {fullname!r})", name=new)
        return ModuleSpec(fullname, self, is_package=found.submodule_search_locations is not None)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        _warn(spec.name)
        module = importlib.import_module(new_name(spec.name))  # the module itself: its names stay the new ones
        self._own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Runs nothing (the module ran when it was imported at its new path); gives the module back
        its own spec, which the import system set to the alias's before calling this."""
        module.__spec__ = self._own_specs.pop(module.__name__, module.__spec__)

    def get_code(self, fullname: str) -> object:
        """The new module's code (``python -m ragray.cli`` runs it as ``__main__``)."""
        from importlib.util import find_spec

        _warn(fullname)
        new = new_name(fullname)
        return find_spec(new).loader.get_code(new)


_WARNED: set[str] = set()


def _warn(fullname: str) -> None:
    """Once per old path and process."""
    if fullname in _WARNED:
        return
    _WARNED.add(fullname)
    warnings.warn(f"{fullname} moved to {new_name(fullname)}; the old path is removed in ragray {REMOVED_IN}",
                  DeprecationWarning, stacklevel=3)


def install() -> None:
    """Put the alias finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
