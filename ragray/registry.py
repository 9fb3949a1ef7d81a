"""Name → class registries for the pluggable parts (retriever, reranker, chunker, loader ...).

A registry knows its built-in components by name and module (``builtins``), like entry points:
the module is imported, and registers its class with ``@REGISTRY.register(name)``, the first time
the name is looked up. So checking a name (config validation) imports no component code, and the
config module, which the components import for their settings, imports none of them.
"""

from __future__ import annotations

import importlib
from abc import ABC
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Self

from ragray.catalog import CATALOG, LIVE
from ragray.errors import ConfigError

T = TypeVar("T")

__all__ = ["Component", "Registry"]


class Component(ABC):
    """Base of a pluggable part: registered under :attr:`name`, built from its config section."""

    name: ClassVar[str]

    @classmethod
    def from_config(cls, config: Any) -> Self:
        """Build (and load) the component from its config section; one without settings is
        built with no arguments (this default)."""
        return cls()


class Registry(Generic[T]):
    """A registry of one kind of component; unknown names raise an error listing valid ones."""

    def __init__(self, kind: str, builtins: Mapping[str, str] | None = None, *, modules: Sequence[str] = ()) -> None:
        """``builtins``: name -> the module that registers it (imported on first lookup); by
        default the kind's entries in :data:`ragray.catalog.CATALOG`. ``modules``: modules whose
        classes register under the names they declare themselves (``cls.name``), all imported on the
        first lookup: the names live in the classes only."""
        self.kind = kind
        self._items: dict[str, type[T]] = {}
        self._builtins = dict(builtins if builtins is not None else CATALOG.get(kind, {}))
        self._modules = tuple(modules)
        self._pending = bool(self._modules)
        LIVE[kind] = self  # config validation asks it about names registered at run time

    def register(self, name: str | None = None) -> Callable[[type[T]], type[T]]:
        """Class decorator registering ``cls`` under ``name`` (None: the name it declares, ``cls.name``)."""

        def decorate(cls: type[T]) -> type[T]:
            key = name if name is not None else cls.name  # type: ignore[attr-defined]
            if key in self._items:
                raise ValueError(f"{self.kind} '{key}' is registered twice")
            self._items[key] = cls
            return cls

        return decorate

    def _load_modules(self) -> None:
        if self._pending:
            self._pending = False
            for module in self._modules:
                importlib.import_module(module)

    def registered(self) -> list[type[T]]:
        """Every component of the ``modules`` and the built-ins, loaded: those of ``modules`` in their
        order, each module's in the order it defines them, then the rest as registered."""
        self._load_modules()
        for name in self._builtins:
            self.get(name)
        rank = {m: i for i, m in enumerate(self._modules)}
        items = list(self._items.values())
        return sorted(items, key=lambda cls: rank.get(cls.__module__, len(rank)))

    def get(self, name: str) -> type[T]:
        if name not in self._items:
            self._load_modules()
        if name not in self._items and name in self._builtins:
            importlib.import_module(self._builtins[name])
            if name not in self._items:
                raise RuntimeError(f"{self._builtins[name]} does not register {self.kind} '{name}'")
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} '{name}'; valid: {', '.join(self.names())}") from None

    def check(self, name: str) -> str:
        """``name`` when it is registered (imports nothing), else the error ``get`` raises."""
        if name not in self:
            raise ConfigError(f"unknown {self.kind} '{name}'; valid: {', '.join(self.names())}")
        return name

    def names(self) -> list[str]:
        self._load_modules()
        return sorted({*self._items, *self._builtins})

    def load_all(self) -> dict[str, type[T]]:
        """Every component, its module imported (listing them: docs, tests)."""
        return {name: self.get(name) for name in self.names()}

    def __contains__(self, name: object) -> bool:
        if name not in self._items and name not in self._builtins:
            self._load_modules()
        return name in self._items or name in self._builtins

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
