"""The caches of reasoning and of stored Responses conversations stay bounded in characters, not only entries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.ir import Message, TextPart, ToolCallPart, ToolResultPart
from switch.proxy.state import ReasoningCache, ResponseStore, conversation_chars


def test_long_reasonings_are_bounded_in_characters_and_the_newest_are_kept() -> None:
    cache = ReasoningCache()  # as the relay makes it
    for number in range(4096):
        cache.put(f"call_{number}", f"{number}:" + "x" * 20_000)
    # 4,096 reasonings of 20 KB were 80 MB held; the cache keeps what fits in 4 MiB characters, newest first.
    held = [text for number in range(4096) if (text := cache.get(f"call_{number}")) is not None]
    assert sum(map(len, held)) <= 4 * 1024 * 1024
    assert len(held) == len(cache) > 200
    newest = cache.get("call_4095")
    assert newest is not None and newest.startswith("4095:")
    assert cache.get("call_0") is None


def test_a_reasoning_bigger_than_the_bound_is_still_kept_for_the_next_turn() -> None:
    cache = ReasoningCache(max_chars=100)
    cache.put("small", "a")
    cache.put("big", "b" * 1000)
    assert cache.get("big") == "b" * 1000
    assert cache.get("small") is None
    assert cache.chars == 1000


@given(
    st.lists(st.tuples(st.sampled_from([f"call_{n}" for n in range(12)]), st.text(max_size=40)), max_size=80),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=120),
)
def test_any_sequence_of_puts_keeps_both_bounds_and_the_newest(
    puts: list[tuple[str, str]], capacity: int, max_chars: int
) -> None:
    cache = ReasoningCache(capacity=capacity, max_chars=max_chars)
    for call_id, reasoning in puts:
        cache.put(call_id, reasoning)
        assert cache.get(call_id) == reasoning
        held = [cache.get(f"call_{n}") for n in range(12)]
        assert cache.chars == sum(len(text) for text in held if text is not None)
        assert len(cache) <= capacity
        assert len(cache) == 1 or cache.chars <= max_chars


def _conversation(number: int, chars: int) -> tuple[Message, ...]:
    return (
        Message("user", (TextPart(f"{number}:" + "u" * chars),)),
        Message("assistant", (ToolCallPart(f"call_{number}", "read", '{"path": "a"}'),)),
        Message("user", (ToolResultPart(f"call_{number}", (TextPart("r" * 100),)),)),
    )


def test_stored_responses_of_long_conversations_are_bounded_in_characters() -> None:
    store = ResponseStore()  # as the relay makes it
    # A harness sending its whole 1 MB conversation on every call with `store` on: 128 kept were 128 MB.
    for number in range(128):
        store.put(f"resp_{number}", _conversation(number, 1024 * 1024))
    held = [found for number in range(128) if (found := store.get(f"resp_{number}")) is not None]
    assert sum(map(conversation_chars, held)) <= 32 * 1024 * 1024
    assert len(held) == 31
    newest = store.get("resp_127")
    assert newest is not None and newest[0].parts[0] == TextPart("127:" + "u" * 1024 * 1024)


def test_a_chained_conversation_continues_from_the_newest_response() -> None:
    store = ResponseStore(max_chars=1000)
    history: tuple[Message, ...] = ()
    for number in range(20):
        history = (*history, *_conversation(number, 10))
        store.put(f"resp_{number}", history)
    assert store.get("resp_19") == history
    assert store.get("resp_0") is None
    assert store.chars == sum(conversation_chars(found) for n in range(20) if (found := store.get(f"resp_{n}")))


@given(
    st.lists(st.tuples(st.integers(min_value=0, max_value=9), st.integers(min_value=0, max_value=50)), max_size=60),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=0, max_value=400),
)
def test_any_sequence_of_stored_responses_keeps_both_bounds_and_the_newest(
    puts: list[tuple[int, int]], capacity: int, max_chars: int
) -> None:
    store = ResponseStore(capacity=capacity, max_chars=max_chars)
    for number, chars in puts:
        conversation = _conversation(number, chars)
        store.put(f"resp_{number}", conversation)
        assert store.get(f"resp_{number}") == conversation
        held = [found for n in range(10) if (found := store.get(f"resp_{n}")) is not None]
        assert store.chars == sum(map(conversation_chars, held))
        assert len(held) <= capacity
        assert len(held) == 1 or store.chars <= max_chars
