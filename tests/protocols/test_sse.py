"""The SSE decoder survives any split of its input."""

from __future__ import annotations

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
