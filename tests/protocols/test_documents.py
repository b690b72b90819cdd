"""Document parts in the three request parsers and writers: any document shape a client can send is
read or refused with a 400 naming the field, and whatever is read reaches every upstream writer (after
`switch.documents` made it readable for that upstream) without an error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.documents import readable_for
from switch.protocols.anthropic_messages import outbound as anthropic_outbound
from switch.protocols.anthropic_messages.inbound import request_to_ir as anthropic_request_to_ir
from switch.protocols.documents import labelled, stand_in, unreadable
from switch.protocols.ir import DocumentPart, Request, RequestFormatError, TextPart, ToolResultPart
from switch.protocols.openai_chat.inbound import request_to_ir as chat_request_to_ir
from switch.protocols.openai_chat.outbound import request_from_ir as chat_request_from_ir
from switch.protocols.openai_responses import inbound as responses_inbound
from switch.protocols.openai_responses import outbound as responses_outbound
from switch.routing.resolve import ChatTarget
from tests.document_helpers import (
    PDF_DATA,
    anthropic_blocks,
    anthropic_body,
    chat_body,
    chat_parts,
    responses_body,
    responses_parts,
)

WRITERS: dict[str, Callable[[Request], dict[str, Any]]] = {
    "openai-chat": lambda request: chat_request_from_ir(request, ChatTarget(model="kimi-test")),
    "anthropic": lambda request: anthropic_outbound.request_from_ir(request, "claude-test"),
    "openai-responses": lambda request: responses_outbound.request_from_ir(request, "gpt-test"),
}


def check_read_or_refused(parse: Callable[[Any], Request], body: dict[str, Any]) -> None:
    """The body parses and every upstream writer encodes it, or it is refused naming a field."""
    try:
        request = parse(orjson.loads(orjson.dumps(body)))
    except RequestFormatError as exc:
        assert exc.param, exc.message
        assert exc.message.startswith(exc.param), exc.message
        return
    for api, write in WRITERS.items():
        orjson.dumps(write(readable_for(request, api)))


@given(anthropic_blocks, st.booleans())
def test_any_anthropic_document_block_is_read_or_refused_naming_the_field(block: Any, in_tool_result: bool) -> None:
    check_read_or_refused(anthropic_request_to_ir, anthropic_body(block, in_tool_result))


@given(chat_parts, st.booleans())
def test_any_chat_file_part_is_read_or_refused_naming_the_field(part: Any, in_tool_result: bool) -> None:
    check_read_or_refused(chat_request_to_ir, chat_body(part, in_tool_result))


@given(responses_parts, st.booleans())
def test_any_responses_input_file_is_read_or_refused_naming_the_field(part: Any, in_tool_result: bool) -> None:
    check_read_or_refused(responses_inbound.request_to_ir, responses_body(part, in_tool_result))


@pytest.mark.parametrize(
    ("block", "param"),
    [
        ({"type": "document"}, "messages[0].content[0].source"),
        ({"type": "document", "source": {"type": 7}}, "messages[0].content[0].source.type"),
        (
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf"}},
            "messages[0].content[0].source.data",
        ),
        ({"type": "document", "title": 3, "source": {"type": "text", "data": "x"}}, "messages[0].content[0].title"),
    ],
)
def test_a_wrongly_typed_anthropic_document_field_is_named(block: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestFormatError) as caught:
        anthropic_request_to_ir(anthropic_body(block, False))
    assert caught.value.param == param


def test_a_wrongly_typed_chat_file_field_is_named() -> None:
    with pytest.raises(RequestFormatError) as caught:
        chat_request_to_ir(chat_body({"type": "file", "file": {"filename": 5}}, False))
    assert caught.value.param == "messages[0].content[0].file.filename"


def test_a_responses_input_file_is_a_document_not_a_refusal() -> None:
    request = responses_inbound.request_to_ir(
        responses_body(
            {"type": "input_file", "file_data": "data:text/plain;base64,aGVsbG8=", "filename": "h.txt"}, False
        )
    )
    assert request.messages[0].parts == (DocumentPart("text/plain", data="aGVsbG8=", name="h.txt"),)


def test_an_unknown_anthropic_source_is_a_note_for_a_chat_upstream() -> None:
    request = anthropic_request_to_ir(anthropic_body({"type": "document", "source": {"type": "hologram"}}, False))
    body = WRITERS["openai-chat"](readable_for(request, "openai-chat"))
    assert body["messages"][0]["content"] == (
        "[document could not be read: its source type 'hologram' is not one switch knows]\nhi"
    )


def test_a_text_document_in_a_tool_result_replaces_no_output() -> None:
    request = anthropic_request_to_ir(
        anthropic_body({"type": "document", "source": {"type": "text", "data": "line"}, "title": "a.txt"}, True)
    )
    result = request.messages[2].parts[0]
    assert isinstance(result, ToolResultPart)
    body = WRITERS["openai-chat"](request)  # even with nothing extracted, the writer never says "(no output)"
    assert body["messages"][-1]["content"] == '[document "a.txt"]\nline\n[end of document "a.txt"]'


def test_labels_and_notes() -> None:
    named = DocumentPart(data="x", name='say "hi".pdf')
    assert (
        labelled(named, "body", ": from 1 page")
        == "[document \"say 'hi'.pdf\": from 1 page]\nbody\n[end of document \"say 'hi'.pdf\"]"
    )
    assert unreadable(DocumentPart(), "why") == "[document could not be read: why]"
    assert stand_in(DocumentPart(data=PDF_DATA)) == TextPart(
        "[document could not be read: this upstream cannot take it as a file]"
    )
