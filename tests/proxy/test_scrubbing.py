"""The caller's key masked in pass-through bytes however the stream is cut, and only a real credential."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from switch.proxy.scrubbing import MASK, StreamScrubber, client_secret

SECRET = "sk-ant-abcabd-0123456789"


@given(
    parts=st.lists(
        st.one_of(st.sampled_from([SECRET.encode(), b"sk-", b"sk-ant-abc", b"\n\n"]), st.binary(max_size=40))
    ),
    cuts=st.lists(st.integers(0, 2000), max_size=20),
)
def test_the_secret_is_masked_however_the_stream_is_cut(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    scrubber = StreamScrubber(SECRET)
    out: list[bytes] = []
    start = 0
    for cut in sorted({c % (len(data) + 1) for c in cuts}):
        out.append(scrubber.feed(data[start:cut]))
        start = cut
    out.append(scrubber.feed(data[start:]))
    out.append(scrubber.flush())
    assert b"".join(out) == data.replace(SECRET.encode(), MASK)


def test_the_credential_is_the_api_key_or_the_bearer_token_and_never_a_placeholder() -> None:
    assert client_secret({"x-api-key": SECRET}) == SECRET
    assert client_secret({"authorization": f"Bearer {SECRET}"}) == SECRET
    assert client_secret({"authorization": "Bearer x"}) is None  # too short to be a key: text stays as it is
    assert client_secret({}) is None
