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
from tests.pdfs import b64, make_pdf

PDF_DATA = b64(make_pdf(["one page"]))
WRITERS: dict[str, Callable[[Request], dict[str, Any]]] = {
    "openai-chat": lambda request: chat_request_from_ir(request, ChatTarget(model="kimi-test")),
    "anthropic": lambda request: anthropic_outbound.request_from_ir(request, "claude-test"),
    "openai-responses": lambda request: responses_outbound.request_from_ir(request, "gpt-test"),
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
base64ish = st.sampled_from([PDF_DATA, "JVBERi0=", "", "!!!", "aGVsbG8="]) | st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=40
)
media_types = st.sampled_from(["application/pdf", "text/plain", "text/csv", "image/png", "application/zip", ""])
file_data = (
    base64ish | st.builds(lambda media, data: f"data:{media};base64,{data}", media_types, base64ish) | json_values
)
content_blocks = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image"])}, optional={"text": st.text(max_size=8) | json_values}
)
# One shape per source type, its main field always there (with a plausible or a random value).
anthropic_source = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("base64"), "data": base64ish | json_values}, optional={"media_type": media_types | json_values}
    ),
    st.fixed_dictionaries(
        {"type": st.just("text"), "data": st.text(max_size=12) | json_values},
        optional={"media_type": media_types | json_values},
    ),
    st.fixed_dictionaries({"type": st.just("url"), "url": st.just("https://example.com/a.pdf") | json_values}),
    st.fixed_dictionaries({"type": st.just("file"), "file_id": st.just("file_011") | json_values}),
    st.fixed_dictionaries({"type": st.just("content"), "content": st.lists(content_blocks, max_size=3) | json_values}),
    st.fixed_dictionaries({"type": st.sampled_from(["mystery", ""]) | json_values}),
    st.dictionaries(st.sampled_from(["type", "media_type", "data", "url"]), json_values, max_size=3),
)
anthropic_blocks = st.fixed_dictionaries(
    {"type": st.just("document"), "source": anthropic_source},
    optional={"title": st.text(max_size=12) | json_values, "context": json_values, "citations": json_values},
) | st.fixed_dictionaries({"type": st.just("document")}, optional={"source": json_values, "title": json_values})
openai_file_fields = st.fixed_dictionaries(
    {},
    optional={
        "file_data": file_data,
        "filename": st.sampled_from(["a.pdf", "notes.txt", 'q"uote.pdf']) | json_values,
        "file_id": st.just("file-abc") | json_values,
        "file_url": st.just("https://example.com/b.pdf") | json_values,
    },
)
chat_parts = st.fixed_dictionaries({"type": st.just("file"), "file": openai_file_fields | json_values})
responses_parts = openai_file_fields.map(lambda fields: {"type": "input_file", **fields})


def anthropic_body(block: dict[str, Any], in_tool_result: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [block, {"type": "text", "text": "hi"}]}]
    if in_tool_result:
        messages = [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [block]}]},
        ]
    return {"model": "m", "max_tokens": 10, "messages": messages}


def chat_body(part: dict[str, Any], in_tool_result: bool) -> dict[str, Any]:
    if in_tool_result:
        call = {"id": "c1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        messages = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": [part]},
        ]
        return {"model": "m", "messages": messages}
    return {"model": "m", "messages": [{"role": "user", "content": [part]}]}


def responses_body(part: dict[str, Any], in_tool_result: bool) -> dict[str, Any]:
    if in_tool_result:
        items = [
            {"type": "function_call", "call_id": "c1", "name": "Read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [part]},
        ]
        return {"model": "m", "input": items}
    return {"model": "m", "input": [{"role": "user", "content": [part]}]}


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
