"""Reading what an upstream sent without trusting its types.

Decoders read upstream JSON through these checks: a value of the wrong type is an
`UpstreamFormatError` naming the field (never its content), so the relay can end the client's
call with a proper error instead of crashing halfway through a stream. Absent and `null` fields
read as empty, since APIs send both for "nothing here".

Token counts are forgiving instead: a count that is not a plausible non-negative integer reads
as 0 (unknown), because a broken usage figure should not cost the user an otherwise good answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switch.protocols.ir import Response, UpstreamFormatError, Usage

if TYPE_CHECKING:
    from switch.protocols.tools import ToolIndex

# Counts above this are not token counts (and would overflow SQLite's 64-bit integers).
MAX_COUNT = 1 << 53


def malformed(where: str, expected: str) -> UpstreamFormatError:
    """The error for a field `where` that is not `expected`."""
    return UpstreamFormatError(f"upstream sent a malformed response: {where} is not {expected}")


def count(value: Any) -> int:
    """A token count, or 0 when `value` is not one."""
    if type(value) is int:
        return value if 0 <= value <= MAX_COUNT else 0
    if type(value) is float and value.is_integer() and 0 <= value <= MAX_COUNT:
        return int(value)
    return 0


def obj(value: Any, where: str) -> dict[str, Any]:
    """`value` as a JSON object; absent or null reads as empty."""
    if type(value) is dict:
        return value
    if value is None:
        return {}
    raise malformed(where, "an object")


def array(value: Any, where: str) -> list[Any]:
    """`value` as a JSON array; absent or null reads as empty."""
    if type(value) is list:
        return value
    if value is None:
        return []
    raise malformed(where, "an array")


def text(value: Any, where: str) -> str:
    """`value` as a string; absent or null reads as empty."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise malformed(where, "a string")


def name(value: Any, where: str) -> str:
    """A required non-empty string, such as a tool's name."""
    if type(value) is str and value:
        return value
    raise malformed(where, "a non-empty string")


def optional_text(value: Any, where: str) -> str | None:
    """`value` as a string, or None when absent or null."""
    if value is None or type(value) is str:
        return value
    raise malformed(where, "a string")


def array_index(value: Any, where: str, default: int = 0) -> int:
    """A non-negative array position (tool-call or block index); absent or null reads as `default`."""
    if value is None:
        return default
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    raise malformed(where, "a non-negative integer")


def label(value: Any) -> str | None:
    """A short string worth recording (a stop reason, an id), or None for anything else."""
    return value[:100] if type(value) is str else None


def response_with_usage(
    body: dict[str, Any],
    index: ToolIndex,
    usage_to_ir: Callable[[dict[str, Any]], Usage],
    parse: Callable[[dict[str, Any], ToolIndex, Usage], Response],
) -> Response:
    """`parse(body)` with its usage read first, so a malformed body still reports what it cost."""
    raw_usage = body.get("usage")
    usage = usage_to_ir(raw_usage) if type(raw_usage) is dict else Usage()
    try:
        return parse(body, index, usage)
    except UpstreamFormatError as exc:
        if type(raw_usage) is dict:
            exc.usage = usage
        raise
