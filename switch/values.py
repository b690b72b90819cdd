"""`value`: the decorator for the small immutable records made on every call (IR parts, records).

`@dataclass(frozen=True)` enforces immutability at run time by routing every field of `__init__`
through `object.__setattr__`, which makes building one a few times slower than a plain slotted
dataclass; the IR of one Claude Code request is hundreds of them. So immutability is checked where
it is cheap, by mypy (`dataclass_transform` with `frozen_default`), and at run time these are
plain slotted dataclasses, hashable by value like frozen ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    """Make `cls` a slotted dataclass that type checkers treat as frozen."""
    return dataclass(slots=True, unsafe_hash=True)(cls)
