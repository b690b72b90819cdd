"""The SSE decoder survives any split of its input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.ir import UpstreamFormatError
from switch.protocols.sse import SseDecoder, SseEvent, encode_data, encode_event

STREAM = (
    b": comment\n"
    b"event: message_start\r\n"
    b'data: {"text":"caf\xc3\xa9 \xf0\x9f\x91\x8b"}\r\n\r\n'
    b"data: line one\n"
    b"data: line two\n\n"
    b"event: ping\rdata:{}\r\r"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    SseEvent("message_start", '{"text":"café 👋"}'.encode()),
    SseEvent(None, b"line one\nline two"),
    SseEvent("ping", b"{}"),
    SseEvent(None, b"[DONE]"),
]


def decode_in_pieces(pieces: list[bytes]) -> list[SseEvent]:
    decoder = SseDecoder()
    events: list[SseEvent] = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.flush())
    return events


def test_whole_stream_decodes() -> None:
    assert decode_in_pieces([STREAM]) == EXPECTED


def test_every_two_way_split_decodes_the_same() -> None:
    for cut in range(len(STREAM) + 1):
        assert decode_in_pieces([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


def test_byte_by_byte_decodes_the_same() -> None:
    assert decode_in_pieces([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_unterminated_last_event_is_flushed() -> None:
    assert decode_in_pieces([b"data: tail"]) == [SseEvent(None, b"tail")]


def test_encoders_round_trip() -> None:
    stream = encode_event("message_stop", b'{"type":"message_stop"}') + encode_data(b"[DONE]")
    assert decode_in_pieces([stream]) == [
        SseEvent("message_stop", b'{"type":"message_stop"}'),
        SseEvent(None, b"[DONE]"),
    ]


def decode_cut(data: bytes, cuts: list[int], limit: int) -> list[SseEvent]:
    decoder = SseDecoder(limit)
    events: list[SseEvent] = []
    start = 0
    for cut in sorted(set(cuts)):
        events += decoder.feed(data[start:cut])
        start = cut
    events += decoder.feed(data[start:])
    return events + decoder.flush()


LINES = st.lists(
    st.one_of(
        st.builds(lambda n: b"data: " + b"z" * n, st.integers(0, 300)),
        st.sampled_from([b"", b"event: e", b": note", b"data:", b"\r"]),
    ),
    max_size=12,
)


@given(lines=LINES, cuts=st.lists(st.integers(0, 4000), max_size=30), newline=st.sampled_from([b"\n", b"\r\n"]))
def test_the_line_and_event_cap_holds_however_the_stream_is_cut(
    lines: list[bytes], cuts: list[int], newline: bytes
) -> None:
    limit = 200
    data = newline.join(lines) + newline + newline
    whole = SseDecoder(limit=1 << 30)
    expected = whole.feed(data) + whole.flush()
    try:
        events = decode_cut(data, [c % (len(data) + 1) for c in cuts], limit)
    except UpstreamFormatError as exc:
        assert f"longer than {limit} bytes" in exc.message
        assert len(data) > limit  # refused only for a stream with something over the cap in it
        return
    assert events == expected
    assert all(len(event.data) <= limit for event in events)


def test_an_endless_line_is_refused_once_past_the_cap_and_held_in_pieces() -> None:
    decoder = SseDecoder(limit=1 << 20)
    piece = b"x" * 4096
    assert decoder.feed(b"data: ") == []
    for _ in range((1 << 20) // len(piece) - 1):
        assert decoder.feed(piece) == []
    with pytest.raises(UpstreamFormatError, match="longer than 1048576 bytes"):
        for _ in range(4):
            decoder.feed(piece)
