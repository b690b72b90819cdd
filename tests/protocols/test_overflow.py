"""Recognising upstreams' context-overflow answers (pure): every known phrasing, any text, and the N > M rule."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.overflow import (
    Overflow,
    anthropic_overflow_message,
    openai_overflow_message,
    overflow_of,
    sizes,
)

PHRASINGS = [
    # OpenAI
    (
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. "
        "Please reduce the length of the messages.",
        Overflow(130000, 128000),
    ),
    (
        400,
        "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 300000 tokens.",
        Overflow(300000, 272000),
    ),
    # vLLM (older and newer wording)
    (
        400,
        "This model's maximum context length is 32768 tokens. However, you requested 33000 tokens "
        "(31000 in the messages, 2000 in the completion). Please reduce the length of the messages or completion.",
        Overflow(33000, 32768),
    ),
    (400, "The input (40000 tokens) is longer than the model's context length (32768 tokens).", Overflow(40000, 32768)),
    # SGLang
    (
        400,
        "Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of "
        "33000 tokens: 31000 tokens from the input messages and 2000 tokens for the completion.",
        Overflow(33000, 32768),
    ),
    # Kimi / Moonshot
    (400, "Invalid request: Your request exceeded model token limit: 262144", Overflow(None, 262144)),
    # Anthropic
    (400, "prompt is too long: 212000 tokens > 200000 maximum", Overflow(212000, 200000)),
    # Gemini (through LiteLLM)
    (
        400,
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        Overflow(1200000, 1048576),
    ),
    # Text Generation Inference
    (
        422,
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens "
        "and 200 `max_new_tokens`",
        Overflow(4000, 4096),
    ),
    # Any 413 is the prompt's size, whatever its words
    (413, "Request Entity Too Large", Overflow(None, None)),
    (413, "<html><body>413 Payload Too Large</body></html>", Overflow(None, None)),
]


@pytest.mark.parametrize(("status", "message", "expected"), PHRASINGS)
def test_each_known_phrasing_is_an_overflow_with_its_numbers(status: int, message: str, expected: Overflow) -> None:
    assert overflow_of(status, message) == expected


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "tool_use ids must be unique"),
        (400, "max_tokens: 200000 > 128000, which is the maximum allowed"),
        (401, "This model's maximum context length is 128000 tokens."),  # not a status an overflow comes with
        (500, "context length exceeded"),
        (429, "rate limit: too many input tokens per minute"),
    ],
)
def test_other_refusals_are_not_overflows(status: int, message: str) -> None:
    assert overflow_of(status, message) is None


def test_the_rewritten_messages_are_what_the_harnesses_parse() -> None:
    assert anthropic_overflow_message(131073, 131072) == "prompt is too long: 131073 tokens > 131072 maximum"
    assert overflow_of(400, anthropic_overflow_message(5, 4)) == Overflow(5, 4)
    assert overflow_of(400, openai_overflow_message(5, 4)) == Overflow(5, 4)


@given(st.integers(0, 599), st.text(max_size=300))
def test_any_upstream_text_is_read_without_error(status: int, message: str) -> None:
    found = overflow_of(status, message)
    assert found is None or isinstance(found, Overflow)
    if found is not None:
        assert status in (400, 413, 422)
        for number in (found.prompt_tokens, found.limit):
            assert number is None or number >= 0


@given(st.integers(1, 10**9), st.integers(1, 10**9))
def test_numbers_in_each_phrasing_come_back_whatever_they_are(prompt_tokens: int, limit: int) -> None:
    assert overflow_of(400, anthropic_overflow_message(prompt_tokens, limit)) == Overflow(prompt_tokens, limit)
    assert overflow_of(400, openai_overflow_message(prompt_tokens, limit)) == Overflow(prompt_tokens, limit)
    vllm = f"The input ({prompt_tokens} tokens) is longer than the model's context length ({limit} tokens)."
    assert overflow_of(400, vllm) == Overflow(prompt_tokens, limit)


@given(
    st.one_of(
        st.none(),
        st.builds(Overflow, st.one_of(st.none(), st.integers(0, 10**7)), st.one_of(st.none(), st.integers(0, 10**7))),
    ),
    st.integers(1, 10**7),
    st.one_of(st.none(), st.integers(1, 10**7)),
)
def test_the_reported_prompt_is_always_over_the_reported_window(
    overflow: Overflow | None, estimate: int, window: int | None
) -> None:
    prompt_tokens, limit = sizes(overflow, estimate, window)
    assert prompt_tokens > limit > 0
    if window is not None:
        assert limit == window  # the target's own window is what the harness is told
