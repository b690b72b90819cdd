"""The demo's scripted workload: harness-shaped calls in all three inbound APIs, sent over plain HTTP.

The shapes follow real captures (tests/fixtures/captures): Claude Code's headers and billing block on
Anthropic Messages, Codex's headers on Responses, a deepagents-style conversation (its system prompt and
subagent preamble) on Chat Completions. Each orchestrator runs a tool round trip, so the reasoning that
Kimi requires back on the second turn must survive switch's translation: from Anthropic's thinking
signature, Responses' `encrypted_content`, and (for chat, where LangChain drops it) switch's own cache.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

CLAUDE_VERSION = "2.1.332"
CODEX_VERSION = "0.171.0"
CLAUDE_SYSTEM = (
    "You are Claude Code, Anthropic's official CLI for Claude. You are an interactive agent that helps users "
    "with software engineering tasks. (switch demo: a short stand-in for Claude Code's system prompt.)"
)
CODEX_INSTRUCTIONS = (
    "You are a coding agent running in the Codex CLI, a terminal-based coding assistant. "
    "(switch demo: a short stand-in for Codex's instructions.)"
)
DEEPAGENTS_SYSTEM = (
    "# Deep Agents Code (dcode)\n\nYou are a deep agent, an AI assistant that helps with coding tasks. "
    "(switch demo: a short stand-in for deepagents' system prompt.)"
)
DEEPAGENTS_PREAMBLE = (
    "[The messages above are a prior conversation you are continuing as a subagent.] "
    "Summarise what the README says about presets."
)
TITLE_PROMPT = "Please write a 5-10 word title for the following conversation:"


@dataclass
class Sent:
    """One workload call and what came back."""

    api: str
    what: str
    status: int


def _billing(subagent: bool) -> dict[str, Any]:
    extra = " cc_is_subagent=true;" if subagent else ""
    return {
        "type": "text",
        "text": f"x-anthropic-billing-header: cc_version={CLAUDE_VERSION}; cc_entrypoint=cli;{extra}",
    }


def _sse(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                yield json.loads(data)


def _anthropic_content(response: httpx.Response) -> list[dict[str, Any]]:
    """The content blocks of a streamed Messages answer, assembled as Claude Code does."""
    blocks: list[dict[str, Any]] = []
    partial_json: dict[int, str] = {}
    for event in _sse(response):
        kind = event.get("type")
        if kind == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial_json[event["index"]] = partial_json.get(event["index"], "") + delta["partial_json"]
    for index, text in partial_json.items():
        blocks[index]["input"] = json.loads(text or "{}")
    return blocks


class Workload:
    """Sends the scripted calls to a switch proxy at `base_url`."""

    def __init__(self, base_url: str) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=60.0)
        self.sent: list[Sent] = []

    def close(self) -> None:
        """Close the HTTP client."""
        self.client.close()

    def run(self) -> list[Sent]:
        """Every scripted call, in order; the list of what was sent and its status."""
        self.claude_code()
        self.codex()
        self.deepagents()
        return self.sent

    def _stream(self, api: str, what: str, path: str, headers: dict[str, str], body: dict[str, Any]) -> Any:
        with self.client.stream("POST", path, headers=headers, json=body) as response:
            if response.status_code != 200:
                response.read()
                self.sent.append(Sent(api, what, response.status_code))
                return None
            if api == "anthropic":
                result: Any = _anthropic_content(response)
            elif api == "openai-responses":
                result = next(
                    (e["response"] for e in _sse(response) if e.get("type") == "response.completed"), {"output": []}
                )
            else:
                result = list(_sse(response))
        self.sent.append(Sent(api, what, 200))
        return result

    def claude_code(self) -> None:
        """A Claude Code session: a tool round trip, a subagent and a title (a haiku-class background call)."""
        session = str(uuid.uuid4())
        headers = {
            "user-agent": f"claude-cli/{CLAUDE_VERSION} (external, cli)",
            "x-claude-code-session-id": session,
            "anthropic-version": "2023-06-01",
            "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
            "x-app": "cli",
            "x-api-key": "demo-client-key",
        }
        tools = [
            {
                "name": "Bash",
                "description": "Run a shell command.",
                "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
            }
        ]
        system = [_billing(False), {"type": "text", "text": CLAUDE_SYSTEM, "cache_control": {"type": "ephemeral"}}]
        ask = {"role": "user", "content": [{"type": "text", "text": "What is in this repository?"}]}
        body: dict[str, Any] = {
            "model": "claude-opus-5-5",
            "max_tokens": 32000,
            "stream": True,
            "thinking": {"type": "adaptive"},
            "system": system,
            "tools": tools,
            "messages": [ask],
            "metadata": {"user_id": json.dumps({"session_id": session})},
        }
        blocks = self._stream("anthropic", "orchestrator: tool call", "/v1/messages?beta=true", headers, body)
        if blocks:
            tool_use = next((b for b in blocks if b.get("type") == "tool_use"), None)
            result = {
                "type": "tool_result",
                "tool_use_id": tool_use["id"] if tool_use else "none",
                "content": "README.md\nswitch/\ntests/",
            }
            body["messages"] = [ask, {"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]
            self._stream("anthropic", "orchestrator: after the tool", "/v1/messages?beta=true", headers, body)
        subagent = {
            **body,
            "system": [_billing(True), {"type": "text", "text": CLAUDE_SYSTEM}],
            "tools": [],
            "messages": [{"role": "user", "content": "Find where prices are defined."}],
        }
        self._stream(
            "anthropic",
            "subagent",
            "/v1/messages?beta=true",
            {**headers, "x-claude-code-agent-id": "demo-agent"},
            subagent,
        )
        title = {
            "model": "claude-haiku-4-5",
            "max_tokens": 512,
            "stream": True,
            "system": [_billing(False), {"type": "text", "text": TITLE_PROMPT}],
            "messages": [{"role": "user", "content": "What is in this repository?"}],
        }
        self._stream("anthropic", "background: title", "/v1/messages?beta=true", headers, title)

    def codex(self) -> None:
        """A Codex session: a tool round trip, a spawned subagent and a memory consolidation (background; a
        compaction would stay on the orchestrator's target, which keeps its prompt cache)."""
        session = str(uuid.uuid4())
        headers = {
            "user-agent": f"codex_exec/{CODEX_VERSION} (Linux; x86_64) (codex_exec; {CODEX_VERSION})",
            "originator": "codex_exec",
            "session-id": session,
            "thread-id": session,
            "authorization": "Bearer demo-client-key",
            "accept": "text/event-stream",
        }
        tools = [
            {
                "type": "function",
                "name": "exec_command",
                "description": "Runs a command in a PTY.",
                "strict": False,
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
            }
        ]
        ask = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run the tests."}]}
        body: dict[str, Any] = {
            "model": "gpt-5.5",
            "instructions": CODEX_INSTRUCTIONS,
            "input": [ask],
            "tools": tools,
            "tool_choice": "auto",
            "parallel_tool_calls": True,
            "reasoning": {"summary": "auto"},
            "store": False,
            "stream": True,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": session,
        }
        response = self._stream("openai-responses", "orchestrator: tool call", "/v1/responses", headers, body)
        if response:
            output = list(response.get("output", []))
            call = next((item for item in output if item.get("type") == "function_call"), None)
            result = {"type": "function_call_output", "call_id": call["call_id"] if call else "none", "output": "ok"}
            body["input"] = [ask, *output, result]
            self._stream("openai-responses", "orchestrator: after the tool", "/v1/responses", headers, body)
        subagent = {**body, "tools": [], "input": [{"role": "user", "content": "Review the diff."}]}
        spawn = {**headers, "x-openai-subagent": "collab_spawn", "thread-id": str(uuid.uuid4())}
        self._stream("openai-responses", "subagent", "/v1/responses", spawn, subagent)
        memory = {**body, "tools": [], "input": [{"role": "user", "content": "Consolidate what to remember."}]}
        self._stream(
            "openai-responses",
            "background: memory consolidation",
            "/v1/responses",
            {**headers, "x-openai-subagent": "memory_consolidation"},
            memory,
        )

    def deepagents(self) -> None:
        """A deepagents-style session on Chat Completions (as LangChain sends it): tool round trip, subagent, title."""
        session = str(uuid.uuid4())
        headers = {"user-agent": "OpenAI/Python 1.109.1", "authorization": "Bearer demo-client-key"}
        tools = [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"The {name} tool.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
            for name in ("ls", "read_file", "task")
        ]
        system = {"role": "system", "content": DEEPAGENTS_SYSTEM}
        ask = {"role": "user", "content": "Which files describe presets?"}
        body: dict[str, Any] = {
            "model": "switch/auto",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [system, ask],
            "tools": tools,
            "user": f"demo_session_{session}",
        }
        chunks = self._stream("openai-chat", "orchestrator: tool call", "/v1/chat/completions", headers, body)
        if chunks:
            calls: dict[int, dict[str, Any]] = {}
            for chunk in chunks:
                for choice in chunk.get("choices", []):
                    for call in choice.get("delta", {}).get("tool_calls") or []:
                        entry = calls.setdefault(
                            call["index"], {"type": "function", "function": {"name": "", "arguments": ""}}
                        )
                        entry["id"] = call.get("id") or entry.get("id")
                        function = call.get("function") or {}
                        entry["function"]["name"] += function.get("name") or ""
                        entry["function"]["arguments"] += function.get("arguments") or ""
            # LangChain keeps no reasoning_content on the assistant turn it sends back: switch restores it.
            assistant = {"role": "assistant", "content": None, "tool_calls": list(calls.values())}
            results = [{"role": "tool", "tool_call_id": c["id"], "content": "harness_presets/"} for c in calls.values()]
            body["messages"] = [system, ask, assistant, *results]
            self._stream("openai-chat", "orchestrator: after the tool", "/v1/chat/completions", headers, body)
        subagent = {**body, "messages": [system, ask, {"role": "user", "content": DEEPAGENTS_PREAMBLE}]}
        subagent.pop("tools")
        self._stream("openai-chat", "subagent", "/v1/chat/completions", headers, subagent)
        title = {**body, "messages": [{"role": "system", "content": TITLE_PROMPT}, ask]}
        title.pop("tools")
        self._stream("openai-chat", "background: title", "/v1/chat/completions", headers, title)
