"""For the document tests: real small PDFs written with pypdf (one text line per page, optionally
encrypted), and hypothesis strategies for document parts of every shape in each API's request body."""

from __future__ import annotations

import base64
import io
from typing import Any

from hypothesis import strategies as st
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[str], password: str | None = None) -> bytes:
    """A PDF whose page N shows `pages[N]` in Helvetica; encrypted with `password` when given."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for text in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        content = DecodedStreamObject()
        content.set_data(f"BT /F1 12 Tf 72 720 Td ({_escaped(text)}) Tj ET".encode("latin-1"))
        page.replace_contents(content)
    if password is not None:
        writer.encrypt(password)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def b64(data: bytes) -> str:
    """`data` as the base64 text a document block carries."""
    return base64.b64encode(data).decode()


PDF_DATA = b64(make_pdf(["one page"]))

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
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
