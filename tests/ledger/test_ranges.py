"""The one range split both report stores use: every call of [since, until) is counted exactly once, from
the rollup when its whole bucket is inside the range, else from the calls at the edges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from switch.ledger.ranges import range_conditions, split_range

TIMES = st.one_of(st.none(), st.floats(min_value=0, max_value=2e9, allow_nan=False))
WIDTHS = st.sampled_from([900, 86400, 7])


def _times_in(low: float | None, high: float | None, t: float) -> bool:
    return (low is None or t >= low) and (high is None or t < high)


@given(since=TIMES, until=TIMES, width=WIDTHS, calls=st.lists(st.floats(min_value=0, max_value=2e9), max_size=30))
def test_each_call_in_the_range_is_counted_once_and_no_other(
    since: float | None, until: float | None, width: int, calls: list[float]
) -> None:
    whole, edges = split_range(since, until, width)
    if whole is not None:
        first, last = whole
        assert first is None or first % width == 0
        assert last is None or last % width == 0
    for low, high in edges:
        assert low is not None and high is not None and low < high  # only bounded, non-empty edges
    extra = [value for value in (since, until) if value is not None]
    for t in [*calls, *extra, *(value - 1e-3 for value in extra)]:
        bucket = t // width * width  # how the writer files a call (rollups.bucket_of)
        from_rollup = whole is not None and _times_in(whole[0], whole[1], bucket)
        from_edges = sum(_times_in(low, high, t) for low, high in edges)
        assert from_rollup + from_edges == (1 if _times_in(since, until, t) else 0), (t, whole, edges)


def test_the_conditions_take_each_store_s_placeholder() -> None:
    assert range_conditions("started_at", 1.0, None) == (["started_at >= ?"], [1.0])
    assert range_conditions("day", "a", "b", "%s") == (["day >= %s", "day < %s"], ["a", "b"])
    assert range_conditions("bucket", None, None) == ([], [])
