"""Checking a TOML table against a settings dataclass: types, ranges, allowed keys.

The settings (switch.config, config_budgets, config_team) are plain dataclasses: pydantic and its models
cost the proxy ~9 MB of RSS for a file read once. A field's type annotation says what a table may hold;
`rules(...)` in its metadata adds a range, a length or a check, and a class's `_check(self)` checks across
its fields. Every type is strict, as TOML values are typed: a string or a float is never an int, a bool is
never a number; an int is a float (as 1.0). `validate` raises `SchemaError` at the first wrong key, with its
location and what is allowed there, never the value (it may be a token).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Loc = tuple[int | str, ...]
Kind = Literal["unknown", "missing", "invalid", "check"]
Checker = Callable[[Any, Loc], Any]


class SchemaError(Exception):
    """The first wrong key of a table: where, which kind of mistake, and what is allowed (never the value)."""

    def __init__(self, loc: Loc, kind: Kind, reason: str, allowed: tuple[str, ...] = ()) -> None:
        super().__init__(f"{dotted(loc)}: {reason}")
        self.loc = loc
        self.kind = kind
        self.reason = reason
        self.allowed = allowed
        """With kind `unknown`: the keys the table allows, sorted."""


def dotted(loc: Loc) -> str:
    """A location as config.toml's dotted key (`budgets.0.actions.1.at`)."""
    return ".".join(str(part) for part in loc)


def rules(
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    finite: bool = False,
    min_length: int | None = None,
    max_length: int | None = None,
    check: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """A field's metadata: its range, its length, and a check raising ValueError with the fix."""
    given = {"ge": ge, "gt": gt, "le": le, "min_length": min_length, "max_length": max_length, "check": check}
    found: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    if finite:
        found["finite"] = True
    return found


def validate(cls: type[T], data: Any, loc: Loc = ()) -> T:
    """An instance of the settings dataclass `cls` from a table, or SchemaError at the first wrong key."""
    return typing.cast(T, _plan(cls)(data, loc))


def field_names(cls: type[Any]) -> list[str]:
    """The keys the table of settings dataclass `cls` allows, in declaration order."""
    return [field.name for field in dataclasses.fields(cls)]


def to_dict(value: Any, *, exclude_none: bool = False) -> dict[str, Any]:
    """A settings dataclass as plain TOML/JSON values, nested tables too (`exclude_none`: leave unset keys out)."""
    plain = _plain(value, exclude_none)
    if not isinstance(plain, dict):
        raise TypeError(f"{type(value).__name__} is not a settings dataclass")
    return plain


def _plain(value: Any, exclude_none: bool) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        pairs = ((field.name, getattr(value, field.name)) for field in dataclasses.fields(value))
        return {name: _plain(item, exclude_none) for name, item in pairs if not (exclude_none and item is None)}
    if isinstance(value, list):
        return [_plain(item, exclude_none) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item, exclude_none) for key, item in value.items()}
    return value


# One compiled checker per settings class, built on first use (type hints are resolved only then).
_PLANS: dict[type[Any], Checker] = {}


def _plan(cls: type[Any]) -> Checker:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _compile(cls)
    return plan


def _compile(cls: type[Any]) -> Checker:
    hints = typing.get_type_hints(cls)
    fields = [
        (
            field.name,
            _with_rules(hints[field.name], field.metadata),
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING,
        )
        for field in dataclasses.fields(cls)
    ]
    allowed = tuple(sorted(name for name, _check, _required in fields))
    names = set(allowed)

    def build(data: Any, loc: Loc) -> Any:
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise SchemaError(loc, "invalid", "must be a table")
        values: dict[str, Any] = {}
        # Fields in declaration order first, then unknown keys: the first error is the one reported.
        for name, check, required in fields:
            if name in data:
                values[name] = check(data[name], (*loc, name))
            elif required:
                raise SchemaError((*loc, name), "missing", "is required")
        for key in data:
            if key not in names:
                raise SchemaError((*loc, key), "unknown", "is not a key of this table", allowed)
        made = cls(**values)
        across = getattr(made, "_check", None)
        if across is not None:
            try:
                across()
            except ValueError as exc:
                raise SchemaError(loc, "check", str(exc)) from None
        return made

    return build


def _checker(hint: Any) -> Checker:
    """What checks (and converts) a value of type `hint`."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        return _choice(typing.get_args(hint))
    if origin is typing.Union or origin is types.UnionType:
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(options) != 1:
            raise TypeError(f"only `X | None` unions are settings types, not {hint!r}")
        inner = _checker(options[0])
        return lambda value, loc: None if value is None else inner(value, loc)
    if origin is list:
        (item_type,) = typing.get_args(hint)
        item = _checker(item_type)

        def items(value: Any, loc: Loc) -> list[Any]:
            if not isinstance(value, list):
                raise SchemaError(loc, "invalid", "must be a list")
            return [item(entry, (*loc, index)) for index, entry in enumerate(value)]

        return items
    if origin is dict:
        _key_type, value_type = typing.get_args(hint)
        entry = _checker(value_type)

        def table(value: Any, loc: Loc) -> dict[str, Any]:
            if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
                raise SchemaError(loc, "invalid", "must be a table")
            return {key: entry(item, (*loc, key)) for key, item in value.items()}

        return table
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda value, loc: _plan(hint)(value, loc)
    if hint in _SCALARS:
        return _SCALARS[hint]
    raise TypeError(f"{hint!r} is not a settings type")


def _choice(choices: tuple[Any, ...]) -> Checker:
    shown = [repr(choice) for choice in choices]
    reason = "must be " + (shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1])

    def check(value: Any, loc: Loc) -> Any:
        # Compared with its type too: `True == 1`, but a bool is no choice of a text Literal.
        if not any(type(value) is type(choice) and value == choice for choice in choices):
            raise SchemaError(loc, "invalid", reason)
        return value

    return check


def _text(value: Any, loc: Loc) -> str:
    if not isinstance(value, str):
        raise SchemaError(loc, "invalid", "must be text (in quotes)")
    return value


def _flag(value: Any, loc: Loc) -> bool:
    if not isinstance(value, bool):
        raise SchemaError(loc, "invalid", "must be true or false")
    return value


def _whole(value: Any, loc: Loc) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(loc, "invalid", "must be a whole number")
    return value


def _number(value: Any, loc: Loc) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchemaError(loc, "invalid", "must be a number")
    return float(value)


_SCALARS: dict[Any, Checker] = {str: _text, bool: _flag, int: _whole, float: _number}


def _shown(bound: float) -> str:
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


def _bare(hint: Any) -> Any:
    """`X` of `X | None`."""
    options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return options[0] if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(options) == 1 else hint


def _with_rules(hint: Any, metadata: typing.Mapping[str, Any]) -> Checker:
    """The check of type `hint`, then the field's range, length and own check, each failing with what is allowed."""
    check = _checker(hint)
    if not metadata:
        return check
    ge, gt, le = metadata.get("ge"), metadata.get("gt"), metadata.get("le")
    finite = bool(metadata.get("finite"))
    shortest, longest = metadata.get("min_length"), metadata.get("max_length")
    own: Callable[[Any], None] | None = metadata.get("check")
    ranged = ge is not None or gt is not None or le is not None or finite
    range_reason = _range_reason(_bare(hint) is int, ge, gt, le, finite)
    length_reason = _length_reason(_bare(hint) is str, shortest, longest)

    def checked(value: Any, loc: Loc) -> Any:
        try:
            value = check(value, loc)
        except SchemaError as exc:
            # A wrong type at a ranged key says the whole rule, not only the type.
            if exc.loc == loc and ranged:
                raise SchemaError(loc, "invalid", range_reason) from None
            raise
        if value is None:
            return value
        if ranged and not _in_range(value, ge, gt, le, finite):
            raise SchemaError(loc, "invalid", range_reason)
        if (shortest is not None and len(value) < shortest) or (longest is not None and len(value) > longest):
            raise SchemaError(loc, "invalid", length_reason)
        if own is not None:
            try:
                own(value)
            except ValueError as exc:
                raise SchemaError(loc, "check", str(exc)) from None
        return value

    return checked


def _in_range(value: float, ge: float | None, gt: float | None, le: float | None, finite: bool) -> bool:
    # Written as `not (value >= ge)` and so on: a nan compares false with everything, so it is out of range.
    if finite and not math.isfinite(value):
        return False
    if ge is not None and not value >= ge:
        return False
    if gt is not None and not value > gt:
        return False
    return le is None or value <= le


def _range_reason(whole: bool, ge: float | None, gt: float | None, le: float | None, finite: bool) -> str:
    what = "a whole number" if whole else "a finite number" if finite else "a number"
    if ge is not None and le is not None:
        return f"must be {what} from {_shown(ge)} to {_shown(le)}"
    parts = []
    if ge is not None:
        parts.append(f"at least {_shown(ge)}")
    if gt is not None:
        parts.append(f"greater than {_shown(gt)}")
    if le is not None:
        parts.append(f"at most {_shown(le)}")
    return f"must be {what} " + " and ".join(parts) if parts else f"must be {what}"


def _length_reason(text: bool, shortest: int | None, longest: int | None) -> str:
    unit = "characters" if text else "items"
    what = "text" if text else "a list"
    if shortest is not None and longest is not None:
        return f"must be {what} of {shortest} to {longest} {unit}"
    if shortest is not None:
        return f"must be {what} of at least {shortest} {unit[:-1] if shortest == 1 else unit}"
    return f"must be {what} of at most {longest} {unit}"
