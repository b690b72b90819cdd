"""The reasoning cache, which gives reasoning back to a model whose client dropped it, stays bounded in bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from switch.proxy.state import ReasoningCache


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
