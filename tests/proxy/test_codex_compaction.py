"""Codex's remote compaction v2 on a translated route, and input items a chat model cannot be given.

Codex (built-in `openai` provider) ends a compaction request with `{"type": "compaction_trigger"}` and needs
exactly one `compaction` output item back, streamed or not; the item returns in later requests.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
from hypothesis import given
from hypothesis import strategies as st

from switch.protocols.openai_responses.compaction import (
    RESTORED_PREFIX,
    SUMMARY_INSTRUCTION,
    decode_summary,
    encode_summary,
)
from tests.conftest import Proxy
from tests.fake_upstream import Turn
from tests.responses_grammar import assert_valid_responses_stream

CODEX_HEADERS = {
    "originator": "codex_exec",
    "session-id": "s-1",
    "x-codex-turn-metadata": '{"session_id": "s-1", "thread_id": "s-1", "request_kind": "compaction"}',
}
TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]
HISTORY: list[dict[str, Any]] = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "make a.txt"}]},
    {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"cmd": "touch a.txt"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "exit 0"},
]
SUMMARY = "The user wants a.txt; it was created with touch. Next: nothing."


def _post(proxy: Proxy, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        proxy.url + "/v1/responses",
        json={"model": "gpt-5.5", "tools": TOOLS, "store": False, **body},
        headers={**CODEX_HEADERS, "authorization": "Bearer codex-login-key"},
        timeout=30,
    )


def _compaction_request(stream: bool) -> dict[str, Any]:
    return {"input": [*HISTORY, {"type": "compaction_trigger"}], "stream": stream}


def test_a_compaction_trigger_is_answered_with_exactly_one_compaction_item(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text=SUMMARY, reasoning="Summarise."))
    answer = _post(kimi_proxy, _compaction_request(stream=False))
    assert answer.status_code == 200, answer.text
    output = answer.json()["output"]
    assert [item["type"] for item in output] == ["compaction"] and answer.json()["status"] == "completed"
    assert decode_summary(output[0]["encrypted_content"]) == SUMMARY
    # The summary turn ran on the conversation's target: its history, then switch's instruction, no tool calls.
    sent = kimi_proxy.upstream.received[-1].json
    assert sent["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}
    assert sent["tool_choice"] == "none" and [t["function"]["name"] for t in sent["tools"]] == ["exec_command"]
    assert any(m.get("tool_calls") for m in sent["messages"]) and sent["messages"][1]["content"] == "make a.txt"
    record = kimi_proxy.sink.wait(1)[-1]
    assert (record.outcome, record.request_kind, record.role) == ("completed", "compaction", "orchestrator")


def test_a_streamed_compaction_follows_the_grammar_with_one_item(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    kimi_proxy.upstream.script(Turn(text=SUMMARY, reasoning="Think first.", fragment=4))
    answer = _post(kimi_proxy, _compaction_request(stream=True))
    assert answer.status_code == 200
    stream = assert_valid_responses_stream(answer.content)
    assert stream.status == "completed" and [item["type"] for item in stream.output] == ["compaction"]
    assert decode_summary(stream.output[0]["encrypted_content"]) == SUMMARY
    assert stream.usage is not None and stream.usage["output_tokens"] == 30
    # Nothing but the compaction item is streamed: no reasoning or message events.
    assert b"output_text.delta" not in answer.content and b"reasoning_summary" not in answer.content


def test_switchs_compaction_item_comes_back_as_the_summary(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": encode_summary(SUMMARY)}
    later = [
        HISTORY[1],
        compaction,
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "now b.txt"}]},
    ]
    answer = _post(kimi_proxy, {"input": later})
    assert answer.status_code == 200, answer.text
    messages = kimi_proxy.upstream.received[-1].json["messages"]
    assert {"role": "user", "content": RESTORED_PREFIX + SUMMARY} in messages
    assert messages[-1]["content"] == "now b.txt"


def test_openais_compaction_item_is_refused_on_a_translated_route(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    foreign = {"type": "compaction", "encrypted_content": "gAAAAABopenai-encrypted-blob"}
    answer = _post(kimi_proxy, {"input": [HISTORY[1], foreign]})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "input[1] is a 'compaction' item" in error["message"] and "only OpenAI can read" in error["message"]
    assert error["type"] == "invalid_request_error"
    assert not kimi_proxy.upstream.received  # never sent with a hole in its history
    record = kimi_proxy.sink.wait(1)[-1]
    assert (record.outcome, record.http_status) == ("rejected", 400)


def test_an_item_type_switch_cannot_carry_is_a_400_naming_it(kimi_proxy: Proxy) -> None:
    assert kimi_proxy.upstream is not None
    for item in (
        {"type": "item_reference", "id": "msg_123"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    ):
        answer = _post(kimi_proxy, {"input": [HISTORY[1], item]})
        assert answer.status_code == 400
        assert f"input[1] has type '{item['type']}'" in answer.json()["error"]["message"]
    assert not kimi_proxy.upstream.received


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: "swc1." + b.hex())))
def test_any_encrypted_content_decodes_to_a_summary_or_none(token: str) -> None:
    decoded = decode_summary(token)
    assert decoded is None or isinstance(decoded, str)


@given(st.text(max_size=2000))
def test_summaries_survive_the_round_trip(text: str) -> None:
    assert decode_summary(encode_summary(text)) == text


def test_a_packed_bomb_is_not_a_summary() -> None:
    import base64
    import zlib

    bomb = "swc1." + base64.urlsafe_b64encode(zlib.compress(b"a" * (8 * 1024 * 1024), 9)).decode().rstrip("=")
    assert decode_summary(bomb) is None
    assert orjson.dumps(decode_summary("swc1.!!!")) == b"null"


def test_codex_agent_messages_reach_the_model_as_user_messages(kimi_proxy: Proxy) -> None:
    """Multi-agent mail (a subagent's task, its final answer) is carried, not dropped and not refused."""
    assert kimi_proxy.upstream is not None
    task = {
        "type": "agent_message",
        "author": "/root",
        "recipient": "/root/check",
        "content": [
            {"type": "input_text", "text": "Message Type: NEW_TASK\nSender: /root\nPayload:\n"},
            {"type": "encrypted_content", "encrypted_content": "Report that all is good."},
        ],
    }
    answer = _post(kimi_proxy, {"input": [HISTORY[1], task]})
    assert answer.status_code == 200, answer.text
    last = kimi_proxy.upstream.received[-1].json["messages"][-1]
    assert last["role"] == "user" and "NEW_TASK" in json.dumps(last) and "Report that all is good." in json.dumps(last)


KNOWN_ITEMS = {
    "message",
    "reasoning",
    "function_call",
    "custom_tool_call",
    "function_call_output",
    "custom_tool_call_output",
    "additional_tools",
    "configuration_update",
    "compaction_trigger",
    "compaction",
    "agent_message",
}


@given(
    kinds=st.lists(
        st.one_of(st.sampled_from(["item_reference", "web_search_call", "local_shell_call"]), st.text(max_size=12)),
        min_size=1,
        max_size=4,
    )
)
def test_no_input_item_type_is_skipped_silently(kinds: list[str]) -> None:
    """Every item type switch has no reading for is noted (a 400 on translated routes), whatever its name."""
    from switch.protocols.openai_responses.compaction import UNCARRIED
    from switch.protocols.openai_responses.inbound import request_to_ir

    items: list[dict[str, Any]] = [{"type": kind, "id": "x"} for kind in kinds]
    # A compaction item without switch's content is noted too (it is OpenAI's, or damaged).
    unknown = [index for index, kind in enumerate(kinds) if kind not in KNOWN_ITEMS or kind == "compaction"]
    try:
        request = request_to_ir({"model": "m", "input": [HISTORY[1], *items]})
    except Exception as exc:  # a known item with missing fields is a format error, never a crash
        from switch.protocols.ir import RequestFormatError

        assert isinstance(exc, RequestFormatError)
        return
    if unknown:
        assert request.provider_data[UNCARRIED].startswith(f"input[{unknown[0] + 1}] ")
    else:
        assert UNCARRIED not in request.provider_data
