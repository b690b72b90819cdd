"""Every captured Claude Code request translates to a valid upstream request and completes."""

from __future__ import annotations

import httpx
import pytest

from tests.anthropic_grammar import assert_valid_anthropic_stream
from tests.chat_grammar import assert_valid_chat_request
from tests.conftest import Proxy, capture_names, load_capture
from tests.fake_upstream import ToolCall, Turn

SKIPPED_HEADERS = {"host", "content-length", "connection", "accept-encoding"}


@pytest.mark.parametrize("name", capture_names("claude_code_"))
def test_claude_code_capture_completes_through_proxy(kimi_proxy: Proxy, name: str) -> None:
    assert kimi_proxy.upstream is not None
    capture = load_capture(name)
    kimi_proxy.upstream.script(
        Turn(reasoning="Let me think.", text="Done.", tool_calls=[ToolCall("Bash", '{"command":"echo hi"}')])
    )
    headers = {k: v for k, v in capture["headers"] if k.lower() not in SKIPPED_HEADERS}
    query = "?" + "&".join(f"{k}={v[0]}" for k, v in capture["query"].items()) if capture["query"] else ""
    response = httpx.post(kimi_proxy.url + capture["path"] + query, json=capture["body"], headers=headers, timeout=20)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = assert_valid_anthropic_stream(response.content)
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    upstream = kimi_proxy.upstream.received[-1].json
    assert_valid_chat_request(upstream)
    assert upstream["max_completion_tokens"] <= 262144
    assert "temperature" not in upstream
    tool_names = [tool["function"]["name"] for tool in upstream.get("tools", [])]
    assert tool_names == [tool["name"] for tool in capture["body"].get("tools", [])]
    assert upstream["reasoning_effort"] in ("low", "high", "max")
