"""A local token estimate for `count_tokens`: characters over a ratio typical of code and prose.

Claude Code uses the figure to decide when to compact, so an honest estimate (never 0) matters
more than tokenizer exactness, which no single tokenizer gives across upstream models anyway.
"""

from __future__ import annotations

import orjson

from switch.protocols.ir import (
    ImagePart,
    Message,
    ReasoningPart,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

CHARS_PER_TOKEN = 3.6
PER_MESSAGE = 4
PER_TOOL = 12
PER_IMAGE = 1600


def _message_chars(message: Message) -> tuple[int, int]:
    chars = 0
    images = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            chars += len(part.text)
        elif isinstance(part, ReasoningPart):
            chars += len(part.text)
        elif isinstance(part, ToolCallPart):
            chars += len(part.name) + len(part.arguments)
        elif isinstance(part, ToolResultPart):
            for item in part.content:
                if isinstance(item, TextPart):
                    chars += len(item.text)
                else:
                    images += 1
        elif isinstance(part, ImagePart):
            images += 1
    return chars, images


def estimate_input_tokens(request: Request) -> int:
    """Estimated input tokens of system, messages and tools (at least 1)."""
    chars = sum(len(part.text) for part in request.system)
    images = 0
    for message in request.messages:
        message_chars, message_images = _message_chars(message)
        chars += message_chars
        images += message_images
    for tool in request.tools:
        chars += len(tool.name) + len(tool.description or "")
        if tool.parameters:
            chars += len(orjson.dumps(tool.parameters))
    estimate = (
        chars / CHARS_PER_TOKEN
        + PER_MESSAGE * len(request.messages)
        + PER_TOOL * len(request.tools)
        + PER_IMAGE * images
    )
    return max(1, round(estimate))
