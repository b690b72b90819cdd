"""Documents through the real proxy: a PDF (in a user turn or inside a tool result, as Claude Code's
Read tool sends one) reaches an upstream that cannot read PDFs as its labelled, page-marked text;
one that cannot be read becomes a note, never `(no output)` and never a 400 that repeats every
turn; upstreams that read documents get them as documents. The extractor never crashes on any bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import openai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.documents import CACHE_CHARS, CACHE_SIZE, EXTRACTIONS, MAX_CHARS, ExtractionCache, extract_pdf
from tests.conftest import FAKE_CLIENT_KEY, Proxy
from tests.document_helpers import anthropic_blocks, anthropic_body, b64, make_pdf
from tests.fake_upstream import ToolCall, Turn

REPORT = make_pdf(["Quarterly revenue rose 12 percent.", "Costs (net) fell in Europe."])
REPORT_TEXT = (
    '[document "report.pdf": text extracted by switch from its 2 PDF pages]\n'
    "--- page 1 ---\nQuarterly revenue rose 12 percent.\n"
    "--- page 2 ---\nCosts (net) fell in Europe.\n"
    '[end of document "report.pdf"]'
)
READ_TOOL = {
    "name": "Read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]},
}


def pdf_block(data: bytes, title: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(data)},
    }
    if title is not None:
        block["title"] = title
    return block


def claude(proxy: Proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key=FAKE_CLIENT_KEY, max_retries=0)


def read_pdf_history(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Claude Code's Read tool on a PDF: the tool result's content is the document block."""
    return [
        {"role": "user", "content": "Summarise docs/report.pdf"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "docs/report.pdf"}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [document]}]},
    ]


def chat_messages(proxy: Proxy, call: int = -1) -> list[dict[str, Any]]:
    assert proxy.upstream is not None
    messages: list[dict[str, Any]] = proxy.upstream.received[call].json["messages"]
    return messages


def test_a_pdf_in_a_user_turn_reaches_a_chat_upstream_as_labelled_text_with_page_markers(kimi_proxy: Proxy) -> None:
    with claude(kimi_proxy).messages.stream(
        model="claude-opus-5-5",
        max_tokens=256,
        messages=[
            {
                "role": "user",
                "content": [pdf_block(REPORT, "report.pdf"), {"type": "text", "text": "What changed?"}],
            }
        ],
    ) as stream:
        answer = stream.get_final_message()
    assert answer.content[0].type == "text"
    assert chat_messages(kimi_proxy)[-1] == {"role": "user", "content": REPORT_TEXT + "\nWhat changed?"}
    (record,) = kimi_proxy.sink.wait(1)
    assert record.outcome == "completed"


def test_a_pdf_in_a_read_tool_result_reaches_a_chat_upstream_as_text_not_no_output(kimi_proxy: Proxy) -> None:
    claude(kimi_proxy).messages.create(
        model="claude-opus-5-5", max_tokens=256, tools=[READ_TOOL], messages=read_pdf_history(pdf_block(REPORT))
    )  # type: ignore[arg-type]
    tool_message = chat_messages(kimi_proxy)[-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"] == REPORT_TEXT.replace('document "report.pdf"', "document")
    assert "(no output)" not in tool_message["content"]


def test_a_corrupt_pdf_is_a_note_and_the_next_turn_with_the_same_history_succeeds(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    corrupt = pdf_block(REPORT[: len(REPORT) // 3], "broken.pdf")
    history = read_pdf_history(corrupt)
    client = claude(kimi_proxy)
    first = client.messages.create(model="claude-opus-5-5", max_tokens=64, tools=[READ_TOOL], messages=history)  # type: ignore[arg-type]
    note = chat_messages(kimi_proxy)[-1]["content"]
    assert note.startswith('[document "broken.pdf" could not be read: it is not a readable PDF')
    history += [
        {"role": "assistant", "content": [{"type": "text", "text": first.content[0].text}]},  # type: ignore[union-attr]
        {"role": "user", "content": [pdf_block(b"%PDF-1.7 not really", "again.pdf"), {"type": "text", "text": "?"}]},
    ]
    client.messages.create(model="claude-opus-5-5", max_tokens=64, tools=[READ_TOOL], messages=history)  # type: ignore[arg-type]
    second = chat_messages(kimi_proxy)
    assert second[2] == {"role": "tool", "tool_call_id": "toolu_01", "content": note}
    assert second[-1]["content"].startswith('[document "again.pdf" could not be read: it is not a readable PDF')
    assert [r.outcome for r in kimi_proxy.sink.wait(2)] == ["completed", "completed"]


def test_an_encrypted_pdf_is_a_note_saying_so(kimi_proxy: Proxy) -> None:
    locked = make_pdf(["top secret"], password="hunter2")
    claude(kimi_proxy).messages.create(
        model="claude-opus-5-5", max_tokens=64, messages=[{"role": "user", "content": [pdf_block(locked, "vault.pdf")]}]
    )
    assert chat_messages(kimi_proxy)[-1]["content"] == (
        '[document "vault.pdf" could not be read: it is encrypted with a password]'
    )


def test_a_plain_text_document_and_unfetchable_url_reach_a_chat_upstream_as_text(kimi_proxy: Proxy) -> None:
    text_document = {
        "type": "document",
        "title": "notes.txt",
        "source": {"type": "text", "media_type": "text/plain", "data": "buy milk\ncall Bob"},
    }
    url_document = {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf?sig=abc"}}
    claude(kimi_proxy).messages.create(
        model="claude-opus-5-5",
        max_tokens=64,
        messages=[{"role": "user", "content": [text_document, url_document]}],
    )
    content = chat_messages(kimi_proxy)[-1]["content"]
    assert content == (
        '[document "notes.txt"]\nbuy milk\ncall Bob\n[end of document "notes.txt"]\n'
        "[document could not be read: it is given by URL, and switch does not fetch files for this upstream]"
    )


def test_an_anthropic_upstream_receives_the_document_blocks_unchanged(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("anthropic")
    assert proxy.upstream is not None
    block = {**pdf_block(REPORT, "report.pdf"), "context": "from the finance share", "citations": {"enabled": True}}
    history = read_pdf_history(pdf_block(REPORT))
    history[0] = {"role": "user", "content": [block, {"type": "text", "text": "Summarise"}]}
    claude(proxy).messages.create(model="claude-opus-5-5", max_tokens=64, tools=[READ_TOOL], messages=history)  # type: ignore[arg-type]
    received = proxy.upstream.received[-1]
    assert received.path.endswith("/messages")
    messages = received.json["messages"]
    assert messages[0]["content"][0] == block
    assert messages[2]["content"][0]["content"] == [pdf_block(REPORT)]


def test_a_responses_upstream_receives_pdfs_as_input_files(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("openai-responses")
    assert proxy.upstream is not None
    history = read_pdf_history(pdf_block(REPORT))
    history[0] = {"role": "user", "content": [pdf_block(REPORT, "report.pdf"), {"type": "text", "text": "Summarise"}]}
    claude(proxy).messages.create(model="claude-opus-5-5", max_tokens=64, tools=[READ_TOOL], messages=history)  # type: ignore[arg-type]
    items = proxy.upstream.received[-1].json["input"]
    data_url = "data:application/pdf;base64," + b64(REPORT)
    assert items[0]["content"][0] == {"type": "input_file", "file_data": data_url, "filename": "report.pdf"}
    (output,) = [item for item in items if item["type"] == "function_call_output"]
    assert output["output"] == [{"type": "input_file", "file_data": data_url, "filename": "document.pdf"}]


def test_chat_completions_file_parts_are_read(kimi_proxy: Proxy) -> None:
    chat = openai.OpenAI(base_url=kimi_proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    chat.chat.completions.create(
        model="m",
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "file",
                        "file": {"file_data": "data:application/pdf;base64," + b64(REPORT), "filename": "report.pdf"},
                    },
                    {"type": "text", "text": "What changed?"},
                ],
            }
        ],
    )
    assert chat_messages(kimi_proxy)[-1]["content"] == REPORT_TEXT + "\nWhat changed?"


def test_a_chat_file_part_reaches_an_anthropic_upstream_as_a_document(multi_proxy: Callable[[str], Proxy]) -> None:
    proxy = multi_proxy("anthropic")
    assert proxy.upstream is not None
    chat = openai.OpenAI(base_url=proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    # Bare base64 without a media type: the bytes say it is a PDF.
    chat.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": [{"type": "file", "file": {"file_data": b64(REPORT)}}]}],
    )
    assert proxy.upstream.received[-1].json["messages"][0]["content"] == [pdf_block(REPORT)]


def test_responses_input_file_parts_are_read(kimi_proxy: Proxy) -> None:
    client = openai.OpenAI(base_url=kimi_proxy.url + "/v1", api_key=FAKE_CLIENT_KEY, max_retries=0)
    client.responses.create(
        model="m",
        input=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "input_file",
                        "file_data": "data:application/pdf;base64," + b64(REPORT),
                        "filename": "report.pdf",
                    },
                    {"type": "input_text", "text": "What changed?"},
                ],
            }
        ],
    )
    assert chat_messages(kimi_proxy)[-1]["content"] == REPORT_TEXT + "\nWhat changed?"


def test_a_tool_turn_after_a_pdf_keeps_working(kimi_proxy: Proxy) -> None:
    """The PDF stays in the history of every later turn; each one reaches the upstream, extracted once."""
    assert kimi_proxy.upstream is not None
    misses = EXTRACTIONS.misses
    kimi_proxy.upstream.script(
        Turn(reasoning="need the file", tool_calls=[ToolCall("call_9", "Read", '{"file_path": "b.pdf"}')])
    )
    client = claude(kimi_proxy)
    history = [{"role": "user", "content": [pdf_block(REPORT, "report.pdf"), {"type": "text", "text": "and b.pdf?"}]}]
    first = client.messages.create(model="claude-opus-5-5", max_tokens=64, tools=[READ_TOOL], messages=history)  # type: ignore[arg-type]
    assert first.stop_reason == "tool_use"
    history += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": first.content[-1].id, "content": [pdf_block(REPORT)]}  # type: ignore[union-attr]
            ],
        },
    ]
    client.messages.create(model="claude-opus-5-5", max_tokens=64, tools=[READ_TOOL], messages=history)  # type: ignore[arg-type]
    messages = chat_messages(kimi_proxy)
    assert messages[-3]["content"].startswith(REPORT_TEXT)
    assert messages[-1]["content"].startswith("[document: text extracted by switch from its 2 PDF pages]")
    assert EXTRACTIONS.misses - misses <= 1  # three copies of the same file were sent


def test_huge_pdf_text_is_cut_with_a_note() -> None:
    pages, text = extract_pdf(make_pdf(["a" * 90_000, "b" * 90_000, "c" * 90_000, "d"]))
    assert pages == 4
    assert text.startswith("--- page 1 ---\naaa")
    assert len(text) < MAX_CHARS + 200
    assert text.endswith(
        f"[document text cut at {MAX_CHARS} characters by switch: page 3 is incomplete and 1 more page is not shown]"
    )


def test_a_pdf_locked_only_against_editing_is_read() -> None:
    pages, text = extract_pdf(make_pdf(["open to read"], password=""))
    assert (pages, text) == (1, "--- page 1 ---\nopen to read")


def test_extraction_is_cached_by_content_and_bounded() -> None:
    cache = ExtractionCache(2)
    first, second, third = (make_pdf([f"file {n}"]) for n in range(3))
    assert cache.extract(first) == cache.extract(bytes(first)) == (1, "--- page 1 ---\nfile 0")
    assert cache.misses == 1
    cache.extract(second)
    cache.extract(third)
    cache.extract(first)  # evicted by the other two: extracted again
    assert cache.misses == 4
    assert CACHE_SIZE >= 8


def test_the_extraction_cache_is_bounded_in_characters_too() -> None:
    texts = [f"file {n} " + "x" * 4000 for n in range(5)]
    cache = ExtractionCache(16, max_chars=10_000)
    for text in texts:
        cache.extract(make_pdf([text]))
    assert 0 < cache.chars <= 10_000
    cache.extract(make_pdf([texts[-1]]))  # the newest stays
    assert cache.misses == 5
    cache.extract(make_pdf([texts[0]]))  # the oldest was dropped for the characters, not the count
    assert cache.misses == 6 and cache.chars <= 10_000
    assert CACHE_SIZE * MAX_CHARS > CACHE_CHARS  # the default bound is the characters, not the count


@given(st.binary(max_size=2048))
def test_any_bytes_as_a_pdf_never_crash_the_extractor(raw: bytes) -> None:
    pages, text = extract_pdf(raw)
    assert pages is None and text


@given(st.integers(min_value=0, max_value=len(REPORT) - 1), st.binary(min_size=1, max_size=64))
def test_a_damaged_real_pdf_never_crashes_the_extractor(offset: int, garbage: bytes) -> None:
    damaged = REPORT[:offset] + garbage + REPORT[offset + len(garbage) :]
    pages, text = extract_pdf(damaged)
    assert (pages is None) == (not text.startswith("--- page 1 ---"))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(block=anthropic_blocks, in_tool_result=st.booleans())
def test_any_document_block_is_answered_or_refused_naming_the_field_never_a_500(
    kimi_proxy: Proxy, block: dict[str, Any], in_tool_result: bool
) -> None:
    before = len(kimi_proxy.sink.records)
    response = httpx.post(kimi_proxy.url + "/v1/messages", json=anthropic_body(block, in_tool_result), timeout=30)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith("messages["), error["message"]
    assert len(kimi_proxy.sink.wait(before + 1)) == before + 1
