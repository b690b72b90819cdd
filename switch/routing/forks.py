"""Claude Code forks that carry no hint header, recognised against their session's orchestrator.

A fork (`subagent_type: "fork"`) is a subagent that continues its parent's conversation: it sends the
orchestrator's system prompt (all but the billing block, which says `cc_is_subagent=true`) and tools, the
parent's history, and a last user turn holding a `<fork-boilerplate>` block. Without
`CLAUDE_CODE_GATEWAY_HINT_HEADERS=1` nothing in the headers says so, so switch keeps, per session, what the
orchestrator last sent and compares a subagent call that carries the marker against it.

What is kept per session is what the comparison reads: the system texts (the body's own strings, not
copies) and the tool names. The tools themselves, whose JSON schemas parse to several times their tens of
KB, are let go with the call. The comparison runs only on a subagent call whose last user turn carries the
marker, which is the fork's first call. Its later turns end in tool results instead, so the agent ids found
to be forks are remembered too.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from typing import Any

from switch.routing.classify import CallInfo

FORK_MARKER = "<fork-boilerplate>"
_BILLING_PREFIX = "x-anthropic-billing-header:"
# A live session is a few; each entry holds one request's system texts and tool names (tens of KB).
_SESSIONS = 64
_FORK_AGENTS = 1024


def _prompt(body: dict[str, Any]) -> tuple[str, ...] | None:
    """The system texts after Claude Code's billing block, or None when the system is not a list of texts."""
    system = body.get("system")
    if isinstance(system, str):
        return (system,)
    if not isinstance(system, list):
        return None
    texts = tuple(str(block.get("text", "")) for block in system if isinstance(block, dict))
    if texts and texts[0].startswith(_BILLING_PREFIX):
        texts = texts[1:]
    return texts


def _tool_names(body: dict[str, Any]) -> tuple[str, ...]:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return ()
    return tuple(str(tool.get("name")) for tool in tools if isinstance(tool, dict))


def _carries_marker(body: dict[str, Any]) -> bool:
    """Whether the last user turn has a text block that opens with the fork marker."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "user":
        return False
    content = last.get("content")
    if isinstance(content, str):
        return content.startswith(FORK_MARKER)
    if not isinstance(content, list):
        return False
    return any(
        isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"].startswith(FORK_MARKER)
        for block in content
    )


class ForkMatcher:
    """Remembers each Claude Code session's orchestrator prompt and marks matching marked subagents as forks."""

    def __init__(self, sessions: int = _SESSIONS) -> None:
        self.sessions = sessions
        self._orchestrators: OrderedDict[str, tuple[tuple[str, ...] | None, tuple[str, ...]]] = OrderedDict()
        self._forks: OrderedDict[tuple[str, str], None] = OrderedDict()

    def refine(self, info: CallInfo, body: Any) -> CallInfo:
        """`info`, with kind `fork` when it is an unhinted fork of its session's orchestrator."""
        if info.harness != "claude-code" or info.session_id is None or not isinstance(body, dict):
            return info
        if info.role == "orchestrator" and info.kind is None:
            self._orchestrators[info.session_id] = (_prompt(body), _tool_names(body))
            self._orchestrators.move_to_end(info.session_id)
            while len(self._orchestrators) > self.sessions:
                self._orchestrators.popitem(last=False)
            return info
        if info.role != "subagent" or info.kind is not None:
            return info
        if info.agent_id is not None and (info.session_id, info.agent_id) in self._forks:
            return replace(info, kind="fork")
        if not _carries_marker(body):
            return info
        remembered = self._orchestrators.get(info.session_id)
        if remembered is None:
            return info
        prompt, tool_names = remembered
        if _prompt(body) != prompt or _tool_names(body) != tool_names:
            return info
        if info.agent_id is not None:
            self._forks[(info.session_id, info.agent_id)] = None
            while len(self._forks) > _FORK_AGENTS:
                self._forks.popitem(last=False)
        return replace(info, kind="fork")


def route_owner(info: CallInfo) -> str | None:
    """The agent whose pinned routes a call shares: a fork's parent (None: the main thread), else its own agent."""
    return info.parent_agent_id if info.kind == "fork" else info.agent_id
