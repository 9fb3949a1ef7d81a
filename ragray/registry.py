"""Name → class registries for the pluggable parts (retriever, reranker, chunker, loader ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ragray.errors import ConfigError

T = TypeVar("T")

__all__ = ["Registry"]


class Registry(Generic[T]):
    """A registry of one kind of component; unknown names raise an error listing valid ones."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, type[T]] = {}

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator registering ``cls`` under ``name``."""

        def decorate(cls: type[T]) -> type[T]:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is registered twice")
            self._items[name] = cls
            return cls

        return decorate

    def get(self, name: str) -> type[T]:
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(
                f"unknown {self.kind} '{name}'; valid: {', '.join(sorted(self._items))}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
