"""The internal model every wire API translates to and from.

Requests and responses are frozen, slotted dataclasses of plain values. Streams are not objects:
a stream decoder drives a `StreamSink` with one method call per event, so translating a chunk
allocates nothing beyond what parsing it already did.

Token usage keeps four disjoint counts (uncached input, cache reads, cache writes, output), which
every wire convention can be derived from without guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from switch.values import value

Role = Literal["user", "assistant"]
StopReason = Literal["end_turn", "max_tokens", "tool_use", "stop_sequence", "refusal", "pause"]
ToolKind = Literal["function", "custom"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
# Least to most thinking.
REASONING_EFFORTS: tuple[ReasoningEffort, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


@value
class TextPart:
    """Plain text."""

    text: str


@value
class ImagePart:
    """An image given inline (base64 `data` with `media_type`) or by `url`."""

    media_type: str | None = None
    data: str | None = None
    url: str | None = None


def image_from_url(url: str) -> ImagePart:
    """An image from an OpenAI-style URL: `data:<type>;base64,<data>` inline, anything else by reference."""
    if url.startswith("data:") and ";base64," in url:
        media_type, _, data = url[5:].partition(";base64,")
        return ImagePart(media_type=media_type, data=data)
    return ImagePart(url=url)


@value
class DocumentPart:
    """A document: inline base64 `data` (a PDF, …), plain `text`, or a `url` or `file_id` reference.

    `name` is its title or filename. `problem` says why it cannot be read when its source is one
    switch does not know. `anthropic_block` is the block as an Anthropic client sent it, so an
    Anthropic upstream gets it unchanged.
    """

    media_type: str | None = None
    data: str | None = None
    text: str | None = None
    url: str | None = None
    file_id: str | None = None
    name: str | None = None
    problem: str | None = None
    anthropic_block: dict[str, Any] | None = None


@value
class ReasoningPart:
    """Model reasoning text, with the opaque token its API needs to accept it back, if any."""

    text: str
    signature: str | None = None
    redacted_data: str | None = None


@value
class ToolCallPart:
    """A call the model made; `arguments` is the JSON text (or free text for custom tools).

    Tools inside a Responses `namespace` carry it in `namespace`; `name` is then the flattened
    `namespace__name` every other API sees.
    """

    call_id: str
    name: str
    arguments: str
    kind: ToolKind = "function"
    namespace: str | None = None


@value
class ToolResultPart:
    """The caller's answer to a tool call."""

    call_id: str
    content: tuple[TextPart | ImagePart | DocumentPart, ...]
    is_error: bool = False
    kind: ToolKind = "function"


Part = TextPart | ImagePart | DocumentPart | ReasoningPart | ToolCallPart | ToolResultPart


@value
class Message:
    """One turn; system text that arrives mid-conversation is kept as a `system` message."""

    role: Literal["user", "assistant", "system"]
    parts: tuple[Part, ...]


@value
class ToolSpec:
    """A tool the model may call; custom (freeform) tools carry their format in `grammar`."""

    name: str
    description: str | None
    parameters: dict[str, Any] | None
    kind: ToolKind = "function"
    grammar: dict[str, Any] | None = None
    namespace: str | None = None
    namespace_description: str | None = None


@value
class ToolChoice:
    """`auto`, `required` (any tool), `none`, or one `tool` by name."""

    mode: Literal["auto", "required", "none", "tool"]
    name: str | None = None


@value
class Reasoning:
    """What the caller asked of the model's thinking."""

    enabled: bool
    effort: ReasoningEffort | None = None
    budget_tokens: int | None = None


@value
class OutputFormat:
    """Structured output the caller asked for, in place of free text.

    `kind` is `json_schema` (JSON matching `schema`), `json_object` (any JSON object), or another
    type the caller's API named (vLLM's `regex`, …), which only an upstream that knows it can take.
    `name`, `strict` and `description` are OpenAI's; Anthropic's format has none of them.
    """

    kind: str
    schema: dict[str, Any] | None = None
    name: str | None = None
    strict: bool | None = None
    description: str | None = None


@value
class Request:
    """A model call, independent of the API it came in on."""

    model: str
    system: tuple[TextPart, ...]
    messages: tuple[Message, ...]
    max_output_tokens: int | None = None
    stream: bool = False
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    reasoning: Reasoning | None = None
    user: str | None = None
    cache_key: str | None = None
    output_format: OutputFormat | None = None
    provider_data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Usage:
    """Token counts in four disjoint buckets; `reasoning_tokens` is a subset of `output_tokens`."""

    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """All input tokens, cached or not (the OpenAI convention)."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


class ProtocolError(Exception):
    """Wire content a protocol cannot read or represent; the proxy maps each kind to an outcome and status."""

    def __init__(self, message: str, *, param: str | None = None, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.usage = usage


class RequestFormatError(ProtocolError):
    """The client's body does not follow its API (answered 400, naming `param`)."""


class UnsupportedFeatureError(RequestFormatError):
    """The request uses something the chosen upstream API cannot represent (answered 400)."""


class UpstreamFormatError(ProtocolError):
    """The upstream's response does not follow its API; `usage` is what it reported before that."""


class UpstreamReportedError(ProtocolError):
    """The upstream reported a failure inside a well-formed response (an in-band `error` event)."""


@value
class Response:
    """A complete (non-streamed) answer."""

    id: str
    model: str
    parts: tuple[Part, ...]
    stop_reason: StopReason
    usage: Usage
    stop_sequence: str | None = None


class StreamSink(Protocol):
    """The stream events of the IR, as calls; an encoder implements them and buffers bytes."""

    def reasoning_delta(self, text: str) -> None:
        """More reasoning text."""

    def text_delta(self, text: str) -> None:
        """More answer text."""

    def tool_call_start(self, index: int, call_id: str, name: str) -> None:
        """A new tool call begins; `index` identifies it in later deltas."""

    def tool_call_delta(self, index: int, fragment: str) -> None:
        """More argument text for the tool call at `index`."""

    def usage(self, usage: Usage) -> None:
        """The upstream reported usage (may be called more than once; the last one wins)."""

    def finish(self, stop_reason: StopReason, stop_sequence: str | None = None) -> None:
        """The model stopped; usage may still follow."""
