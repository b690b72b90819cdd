"""Typed reads of a client's JSON body, for the three request parsers.

A client body is outside input: any value may have any JSON type. Each parser checks the type of
every field it reads where it reads it, and a wrong one becomes a `RequestFormatError` naming the
field's path (`messages[2].content[0].tool_use_id must be a string, not an integer`), so the
caller gets a 400 in its own format instead of a crash. Paths are only built on the error branch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switch.protocols.ir import REASONING_EFFORTS, ReasoningEffort, RequestFormatError, ToolChoice, ToolSpec
from switch.protocols.tools import flat_name

# Token counts must also survive arithmetic and re-encoding as a 64-bit JSON integer; no model
# comes near this limit.
MAX_TOKEN_COUNT = 2**31 - 1
EFFORTS: dict[str, ReasoningEffort] = {effort: effort for effort in REASONING_EFFORTS}
# OpenAI's `tool_choice` strings; an object names one tool.
CHOICE_MODES = {"auto": ToolChoice("auto"), "none": ToolChoice("none"), "required": ToolChoice("required")}


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


# Element readers: every tool, input item and content block of every request is read through
# them, so they take the path of the element's container and its index, plus `within` (the path
# of an object inside the element, like "function."), and join these into a path only when raising.


def block_type(block: Any, container: str, index: int) -> str:
    """The `type` of the content block at `container[index]`, which must be an object."""
    if not isinstance(block, dict):
        raise wrong_type(f"{container}[{index}]", "an object", block)
    kind = block.get("type")
    if not isinstance(kind, str):
        raise wrong_type(f"{container}[{index}].type", "a string", kind)
    return kind


def field_str(element: dict[str, Any], key: str, container: str, index: int, within: str = "") -> str:
    """A required string field of the element at `container[index]`."""
    value = element.get(key)
    if not isinstance(value, str):
        raise wrong_type(f"{container}[{index}].{within}{key}", "a string", value)
    return value


def optional_field_str(element: dict[str, Any], key: str, container: str, index: int, within: str = "") -> str | None:
    """An optional string field of the element at `container[index]` (None when absent or null)."""
    value = element.get(key)
    if value is None or isinstance(value, str):
        return value
    raise wrong_type(f"{container}[{index}].{within}{key}", "a string", value)


def optional_field_bool(element: dict[str, Any], key: str, container: str, index: int) -> bool | None:
    """An optional boolean field of the element at `container[index]` (None when absent or null)."""
    value = element.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise wrong_type(f"{container}[{index}].{key}", "a boolean", value)


def field_object(element: dict[str, Any], key: str, container: str, index: int) -> dict[str, Any]:
    """A required object field of the element at `container[index]`."""
    value = element.get(key)
    if not isinstance(value, dict):
        raise wrong_type(f"{container}[{index}].{key}", "an object", value)
    return value


def optional_field_object(element: dict[str, Any], key: str, container: str, index: int) -> dict[str, Any] | None:
    """An optional object field of the element at `container[index]` (None when absent or null)."""
    value = element.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise wrong_type(f"{container}[{index}].{key}", "an object", value)


def not_one_of(path: str, expected: str, value: Any) -> RequestFormatError:
    """The error for a field at `path` that must be one of the values listed in `expected`."""
    if not isinstance(value, str):
        return wrong_type(path, expected, value)
    return RequestFormatError(f"{path} must be {expected}, not '{value}'", param=path)


def openai_tool_choice(value: Any, named: Callable[[dict[str, Any]], ToolChoice | None]) -> ToolChoice | None:
    """OpenAI's `tool_choice`: a mode string, or an object naming one tool, which `named` reads."""
    if value is None:
        return None
    if isinstance(value, str):
        return CHOICE_MODES.get(value)
    if not isinstance(value, dict):
        raise wrong_type("tool_choice", "a string or an object", value)
    return named(value)


def read_tools(
    raw: list[Any],
    container: str,
    into: list[ToolSpec],
    schema_key: str,
    client_types: tuple[str | None, ...] | None = None,
    other: Callable[[dict[str, Any], Any, int], None] | None = None,
    start: int = 0,
    grammar: bool = False,
    namespace: str | None = None,
    namespace_description: str | None = None,
) -> None:
    """Append to `into` the tools declared in `raw` (at `container`, from index `start`) that the client runs.

    A tool's type must be one of `client_types`, or it goes to `other` with its type and index;
    without `client_types` (chat) a tool has no type and keeps its fields in `function`. With
    `grammar`, the tools are free-text (custom) ones and `schema_key` holds their grammar.
    """
    # One loop for the three APIs with each field checked inline, and what varies by call decided
    # once per call: every request declares all its tools again.
    within = "function." if client_types is None else ""
    plain = namespace is None and not grammar
    for index, tool in enumerate(raw, start):
        if not isinstance(tool, dict):
            raise wrong_type(f"{container}[{index}]", "an object", tool)
        if client_types is not None:
            tool_type = tool.get("type")
            if tool_type not in client_types:
                if other is not None:
                    other(tool, tool_type, index)
                continue
        else:
            # Chat: the fields are in the tool's `function` object.
            tool = tool.get("function")
            if not isinstance(tool, dict):
                raise wrong_type(f"{container}[{index}].function", "an object", tool)
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise wrong_type(f"{container}[{index}].{within}name", "a non-empty string", name)
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise wrong_type(f"{container}[{index}].{within}description", "a string", description)
        schema = tool.get(schema_key)
        if schema is not None and not isinstance(schema, dict):
            raise wrong_type(f"{container}[{index}].{within}{schema_key}", "an object", schema)
        if plain:
            into.append(ToolSpec(name, description, schema))
            continue
        flat = flat_name(namespace, name)
        if grammar:
            into.append(ToolSpec(flat, description, None, "custom", schema, namespace, namespace_description))
        else:
            into.append(ToolSpec(flat, description, schema, "function", None, namespace, namespace_description))
