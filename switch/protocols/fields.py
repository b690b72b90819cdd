"""Typed reads of a client's JSON body, for the three request parsers.

A client body is outside input: any value may have any JSON type. Each parser checks the type of
every field it reads where it reads it, and a wrong one becomes a `RequestFormatError` naming the
field's path (`messages[2].content[0].tool_use_id must be a string, not an integer`), so the
caller gets a 400 in its own format instead of a crash. Paths are only built on the error branch.
"""

from __future__ import annotations

from typing import Any

from switch.protocols.ir import RequestFormatError

# Token counts must also survive arithmetic and re-encoding as a 64-bit JSON integer; no model
# comes near this limit.
MAX_TOKEN_COUNT = 2**31 - 1


# bool before int: a JSON boolean decodes to a Python bool, which is also an int.
_KIND_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def kind_of(value: Any) -> str:
    """The JSON type of `value`, as an error message names it."""
    if value is None:
        return "null"
    for kind, name in _KIND_NAMES:
        if isinstance(value, kind):
            return name
    return type(value).__name__


def wrong_type(path: str, expected: str, value: Any) -> RequestFormatError:
    """The error for a field at `path` holding the wrong type."""
    return RequestFormatError(f"{path} must be {expected}, not {kind_of(value)}", param=path)


def missing(path: str) -> RequestFormatError:
    """The error for a required field that is absent."""
    return RequestFormatError(f"{path} is required", param=path)


def optional_str(body: dict[str, Any], key: str) -> str | None:
    """`body[key]` when it is a string, None when absent or null; any other type is a 400."""
    value = body.get(key)
    if value is None or isinstance(value, str):
        return value
    raise wrong_type(key, "a string", value)


def optional_bool(body: dict[str, Any], key: str) -> bool | None:
    """`body[key]` when it is a boolean, None when absent or null; any other type is a 400."""
    value = body.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise wrong_type(key, "a boolean", value)


def optional_number(body: dict[str, Any], key: str) -> float | None:
    """`body[key]` as a float when it is a number, None when absent or null; any other type is a 400."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise wrong_type(key, "a number", value)


def optional_dict(body: dict[str, Any], key: str) -> dict[str, Any] | None:
    """`body[key]` when it is an object, None when absent or null; any other type is a 400."""
    value = body.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise wrong_type(key, "an object", value)


def optional_list(body: dict[str, Any], key: str) -> list[Any] | None:
    """`body[key]` when it is an array, None when absent or null; any other type is a 400."""
    value = body.get(key)
    if value is None or isinstance(value, list):
        return value
    raise wrong_type(key, "an array", value)


def token_count(value: Any, path: str, minimum: int = 1) -> int | None:
    """A token count (None when absent or null); a non-integer or one out of range is a 400."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise wrong_type(path, "an integer", value)
    if not minimum <= value <= MAX_TOKEN_COUNT:
        raise RequestFormatError(f"{path} must be between {minimum} and {MAX_TOKEN_COUNT}, not {value}", param=path)
    return value


def string_list(value: Any, path: str) -> tuple[str, ...]:
    """An array of strings (empty when absent or null); anything else is a 400."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise wrong_type(path, "an array of strings", value)
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise wrong_type(f"{path}[{index}]", "a string", item)
    return tuple(value)


# Content-block readers take the path of their container and build a block's own path only when raising.


def block_type(block: Any, container: str, index: int) -> str:
    """The `type` of the content block at `container[index]`, which must be an object."""
    if not isinstance(block, dict):
        raise wrong_type(f"{container}[{index}]", "an object", block)
    kind = block.get("type")
    if not isinstance(kind, str):
        raise wrong_type(f"{container}[{index}].type", "a string", kind)
    return kind


def field_str(block: dict[str, Any], key: str, container: str, index: int) -> str:
    """A required string field of the block at `container[index]`."""
    value = block.get(key)
    if not isinstance(value, str):
        raise wrong_type(f"{container}[{index}].{key}", "a string", value)
    return value


def optional_field_str(block: dict[str, Any], key: str, container: str, index: int) -> str | None:
    """An optional string field of the block at `container[index]` (None when absent or null)."""
    value = block.get(key)
    if value is None or isinstance(value, str):
        return value
    raise wrong_type(f"{container}[{index}].{key}", "a string", value)
