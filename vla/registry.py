"""Name -> factory registries (instead of if/elif chains)."""

from __future__ import annotations

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

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register ``obj`` under ``name`` (a name may be registered once)."""

        def deco(obj: T) -> T:
            if name in self._items and self._items[name] is not obj:
                raise KeyError(f"{self.kind} {name!r} is already registered")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        """Return the entry for ``name``; an unknown name raises and lists the known ones."""
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "(none)"
            raise KeyError(f"unknown {self.kind} {name!r}; registered: {known}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
