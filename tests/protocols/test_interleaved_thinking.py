"""Claude history with interleaved thinking, sent to a chat upstream that wants one `reasoning_content`."""

from __future__ import annotations

from switch.protocols.anthropic_messages.inbound import request_to_ir
from switch.protocols.openai_chat.outbound import request_from_ir
from switch.routing.resolve import ChatTarget


def test_thinking_blocks_are_separated_by_a_newline() -> None:
    body = {
        "model": "claude-opus-5-5",
        "max_tokens": 1024,
        "messages": [
            {"role": "user", "content": "list the files"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should look first.", "signature": "sig-a"},
                    {"type": "text", "text": "Looking."},
                    {"type": "thinking", "thinking": "Then run ls.", "signature": "sig-b"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]},
        ],
    }
    sent = request_from_ir(request_to_ir(body), ChatTarget(model="kimi-test"))
    assistant = next(m for m in sent["messages"] if m["role"] == "assistant")
    assert assistant["reasoning_content"] == "I should look first.\nThen run ls."
