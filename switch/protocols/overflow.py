"""Recognising an upstream's "the prompt does not fit the context window" answer, and saying it the way
each harness understands.

Upstreams phrase it differently and answer it with 400, 413 or 422 (see docs/protocols/long-sessions.md):
OpenAI's `context_length_exceeded`, vLLM's and SGLang's "maximum context length", Kimi's "exceeded model
token limit", Anthropic's "prompt is too long". Claude Code compacts on several of these, but only
Anthropic's exact `prompt is too long: N tokens > M maximum` tells it how much to cut, so every one is
rewritten to that for an Anthropic caller, and to OpenAI's `context_length_exceeded` for an OpenAI caller.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OVERFLOW_STATUSES = (400, 413, 422)
"""Statuses an upstream refuses an over-long prompt with."""

_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "context_window",
    "prompt is too long",
    "model token limit",
    "input is too long",
    "too many input tokens",
    "input tokens exceed",
    "exceeds the maximum number of tokens",
    "maximum number of tokens allowed",
    "prompt length",
    "string_above_max_length",
    "reduce the length of the messages",
    "`inputs` tokens + `max_new_tokens`",
)
# What a number in the message stands for, by the words before it. A limit and a count both come as
# "N tokens"; these say which is which in the phrasings upstreams use.
_LIMIT_PATTERNS = (
    re.compile(r"maximum context length (?:is|of) (\d[\d,]*)"),
    re.compile(r"context length \((\d[\d,]*) tokens?\)"),
    re.compile(r"(?:token )?limit(?: of|:| is)? (\d[\d,]*)"),
    re.compile(r"tokens > (\d[\d,]*) maximum"),
    re.compile(r"maximum number of tokens allowed \((\d[\d,]*)\)"),
    re.compile(r"context window (?:of|is) (\d[\d,]*)"),
    re.compile(r"must be <= (\d[\d,]*)"),
    re.compile(r"exceeds (?:the )?(?:model'?s? )?(?:max(?:imum)? )?(?:context )?(?:length )?(?:of )?(\d[\d,]*)"),
)
_COUNT_PATTERNS = (
    re.compile(r"prompt is too long: (\d[\d,]*) tokens"),
    re.compile(r"resulted in (\d[\d,]*) tokens"),
    re.compile(r"requested (?:a total of )?(\d[\d,]*) tokens"),
    re.compile(r"the input \((\d[\d,]*) tokens?\)"),
    re.compile(r"input token count \((\d[\d,]*)\)"),
    re.compile(r"(?:your request|request|prompt|input) has (\d[\d,]*) (?:input )?tokens"),
    re.compile(r"prompt (?:length|contains) (\d[\d,]*)"),
    re.compile(r"(\d[\d,]*) input tokens"),
    re.compile(r"given: (\d[\d,]*) `inputs` tokens"),
)


@dataclass(frozen=True, slots=True)
class Overflow:
    """An upstream's context-overflow answer: the prompt's size and the window it named, where it did."""

    prompt_tokens: int | None
    limit: int | None


def _number(text: str) -> int | None:
    digits = text.replace(",", "")
    # Upstream text: a run of digits too long to be a token count is not taken as one.
    return int(digits) if digits.isdigit() and len(digits) <= 12 else None


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match is not None:
            value = _number(match.group(1))
            if value is not None:
                return value
    return None


def overflow_of(status: int, message: str) -> Overflow | None:
    """The overflow an upstream's error answer reports, or None when it is about something else.

    A 413 is an overflow whatever its words: an upstream refusing the body's size refuses the prompt."""
    lowered = message[:4000].lower()
    if status == 413:
        return Overflow(_first(_COUNT_PATTERNS, lowered), _first(_LIMIT_PATTERNS, lowered))
    if status not in OVERFLOW_STATUSES or not any(marker in lowered for marker in _MARKERS):
        return None
    # "max_tokens is too large" names the window only to say the output does not fit: still an overflow.
    return Overflow(_first(_COUNT_PATTERNS, lowered), _first(_LIMIT_PATTERNS, lowered))


def anthropic_overflow_message(prompt_tokens: int, limit: int) -> str:
    """Anthropic's own wording, the one Claude Code reads the size of the cut from."""
    return f"prompt is too long: {prompt_tokens} tokens > {limit} maximum"


def openai_overflow_message(prompt_tokens: int, limit: int) -> str:
    """OpenAI's wording for the same refusal (its `code` is `context_length_exceeded`)."""
    return (
        f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
        f"{prompt_tokens} tokens. Please reduce the length of the messages."
    )


def sizes(overflow: Overflow | None, estimate: int, window: int | None) -> tuple[int, int]:
    """The N and M to report: the prompt's size (the upstream's figure, else switch's estimate) and the
    window (the target's, else the upstream's figure, else the estimate), with N > M always, since the
    harness cuts N - M tokens and a cut of nothing would compact nothing."""
    reported = overflow.prompt_tokens if overflow is not None else None
    stated = overflow.limit if overflow is not None else None
    limit = window or stated or estimate
    prompt = reported or estimate
    return max(prompt, limit + 1), limit


CONTEXT_LENGTH_CODE = "context_length_exceeded"
"""OpenAI's error code for a prompt over the model's window."""

__all__ = [
    "CONTEXT_LENGTH_CODE",
    "OVERFLOW_STATUSES",
    "Overflow",
    "anthropic_overflow_message",
    "openai_overflow_message",
    "overflow_of",
    "sizes",
]
