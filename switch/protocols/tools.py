"""What every translator needs to know about a request's tools, computed once per request.

* names: the upstream may only take 64-character names; shortened names map back to the caller's.
* custom tools (Responses `custom`, free text input) travel through function-only APIs as a
  function with one string argument `input`; their calls are unwrapped back to the raw text.
* namespaced tools (Responses `namespace`) travel flattened as `namespace__name`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

import orjson

from switch.protocols.carry import short_tool_name
from switch.protocols.ir import Response, StopReason, StreamSink, ToolCallPart, ToolSpec, Usage
from switch.values import value

NAMESPACE_SEPARATOR = "__"
CUSTOM_ARGUMENT = "input"


def flat_name(namespace: str | None, name: str) -> str:
    """The flattened name of a tool inside a namespace."""
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


@value
class ToolIndex:
    """Lookups derived from a request's tool list."""

    long_names: dict[str, str] = field(default_factory=dict)
    custom: frozenset[str] = frozenset()
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: tuple[ToolSpec, ...]) -> ToolIndex:
        """Build the index for `tools`."""
        if not tools:
            return _EMPTY
        return cls(
            {short_tool_name(t.name): t.name for t in tools if len(t.name) > 64},
            frozenset(t.name for t in tools if t.kind == "custom"),
            {t.name: (t.namespace, t.name[len(t.namespace) + 2 :]) for t in tools if t.namespace},
        )

    def caller_name(self, upstream_name: str) -> str:
        """The caller's name for a name the upstream used."""
        return self.long_names.get(upstream_name, upstream_name)

    def split(self, name: str) -> tuple[str | None, str]:
        """(namespace, name) for a flattened name."""
        return self.namespaces.get(name, (None, name))


_EMPTY = ToolIndex()


def unwrap_custom_input(arguments: str) -> str:
    """The raw text a custom tool call carries inside its `{"input": ...}` wrapper."""
    try:
        value: Any = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(value, dict) and isinstance(value.get(CUSTOM_ARGUMENT), str):
        return str(value[CUSTOM_ARGUMENT])
    return arguments


def unwrap_response(response: Response, index: ToolIndex) -> Response:
    """Mark custom and namespaced calls in a complete response (from a function-only upstream)."""
    if not index.custom and not index.namespaces:
        return response
    parts = []
    for part in response.parts:
        if isinstance(part, ToolCallPart) and (part.name in index.custom or part.name in index.namespaces):
            namespace, _ = index.split(part.name)
            if part.name in index.custom:
                part = ToolCallPart(part.call_id, part.name, unwrap_custom_input(part.arguments), "custom", namespace)
            else:
                part = ToolCallPart(part.call_id, part.name, part.arguments, part.kind, namespace)
        parts.append(part)
    return Response(
        response.id,
        response.model,
        tuple(parts),
        response.stop_reason,
        response.usage,
        response.stop_sequence,
    )


class CustomCallUnwrapper:
    """A `StreamSink` in front of another that turns wrapped custom-tool arguments back into text.

    The wrapped JSON cannot be unwrapped fragment by fragment, so a custom call's fragments are
    held until the call ends (the next call starts, or the model finishes), then sent as one delta.
    """

    def __init__(self, sink: StreamSink, index: ToolIndex) -> None:
        self.sink = sink
        self.index = index
        self._held: tuple[int, list[str]] | None = None

    def _release(self) -> None:
        if self._held is not None:
            tool_index, fragments = self._held
            self._held = None
            self.sink.tool_call_delta(tool_index, unwrap_custom_input("".join(fragments)))

    def reasoning_delta(self, text: str) -> None:
        self._release()
        self.sink.reasoning_delta(text)

    def text_delta(self, text: str) -> None:
        self._release()
        self.sink.text_delta(text)

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        self._release()
        self.sink.tool_call_start(index, call_id, name)
        if name in self.index.custom:
            self._held = (index, [])

    def tool_call_delta(self, index: int, fragment: str) -> None:
        if self._held is not None and self._held[0] == index:
            self._held[1].append(fragment)
        else:
            self.sink.tool_call_delta(index, fragment)

    def usage(self, usage: Usage) -> None:
        self.sink.usage(usage)

    def finish(self, stop_reason: StopReason, stop_sequence: str | None = None) -> None:
        self._release()
        self.sink.finish(stop_reason, stop_sequence)
