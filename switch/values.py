"""`value`: the decorator for the small immutable records made on every call (IR parts, records), and
`evolve`, the copy-with-changes made of them on the request path.

`@dataclass(frozen=True)` enforces immutability at run time by routing every field of `__init__`
through `object.__setattr__`, which makes building one a few times slower than a plain slotted
dataclass; the IR of one Claude Code request is hundreds of them. So immutability is checked where
it is cheap, by mypy (`dataclass_transform` with `frozen_default`), and at run time these are
plain slotted dataclasses, hashable by value like frozen ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
_copiers: dict[type, Callable[[Any], Any]] = {}


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    """Make `cls` a slotted dataclass that type checkers treat as frozen."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


def _copier(cls: type) -> Callable[[Any], Any]:
    """A function copying every field of `cls` one by one, compiled once per class as dataclasses does."""
    names = [each.name for each in fields(cls)]
    lines = ["def copy(old, new=object.__new__, cls=cls):", "    made = new(cls)"]
    lines += [f"    made.{name} = old.{name}" for name in names]
    lines.append("    return made")
    namespace: dict[str, Any] = {"cls": cls}
    exec("\n".join(lines), namespace)
    copy: Callable[[Any], Any] = namespace["copy"]
    return copy


def evolve(record: T, **changes: Any) -> T:
    """A copy of `record` (a slotted dataclass that is not frozen at run time) with `changes`.

    `dataclasses.replace` without its walk over the fields and its call of `__init__` on every copy: the
    relay makes several per call. No `__post_init__` runs (none of the classes it copies has one)."""
    cls = type(record)
    copier = _copiers.get(cls)
    if copier is None:
        copier = _copiers[cls] = _copier(cls)
    made: T = copier(record)
    for name, new in changes.items():
        setattr(made, name, new)
    return made
