"""Name -> factory registries (instead of if/elif chains)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Registry[T]:
    """A named collection of factories, filled by a decorator beside each implementation.

    Example:
        >>> TASKS = Registry("task")
        >>> @TASKS.register("reach")
        ... class Reach: ...
        >>> TASKS.get("reach")
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``name`` as ``"package.module:attr"``, imported on first :meth:`get` (heavy imports)."""
        if name in self._items:
            raise KeyError(f"{self.kind} {name!r} is already registered")
        self._lazy[name] = target

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (a name may be registered once)."""

        def deco(obj: T) -> T:
            self._lazy.pop(name, None)
            if name in self._items and self._items[name] is not obj:
                raise KeyError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        """Return the entry for ``name``; an unknown name raises and lists the known ones."""
        if name not in self._items and name in self._lazy:
            module, attr = self._lazy[name].split(":")
            obj = getattr(importlib.import_module(module), attr)  # its decorator registers it
            self._items.setdefault(name, obj)
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(self.names()) or "(none)"
            raise KeyError(f"unknown {self.kind} {name!r}; registered: {known}") from None

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._lazy))

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
