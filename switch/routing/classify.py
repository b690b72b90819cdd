"""Who is calling, in which role: harness, role, session and agent of one call.

Signals, most reliable first:
1. explicit: an `x-switch-role` header, or a `switch/<role>` (or `claude-switch-<role>`) model alias;
   `switch/auto` (`CLASSIFYING_MODEL`) forces nothing, so the signals below decide;
2. harness headers: Claude Code's `x-claude-code-agent-id` and, when it sends them
   (`CLAUDE_CODE_GATEWAY_HINT_HEADERS=1`), its hint headers `x-claude-code-request-class` and
   `x-claude-code-agent-type`; Codex's `x-openai-subagent`;
   Codex's request kind and parent thread come from its turn metadata (`codex_purpose`); a compaction
   turn of Codex's main thread is counted as `orchestrator`, so it stays on the conversation's target;
3. body markers: Claude Code's billing block `cc_is_subagent=true`; deepagents' subagent preamble,
   or a deepagents request without the `task` tool;
4. known background prompts (titles, summaries, warm-ups) and haiku-class model names.

A call's kind says what a turn is for beyond its role: Claude Code's forks (`fork`, a subagent that
carries its parent's whole history) and compaction turns (`compaction`). Forks without a hint header
are recognised against the session's orchestrator in `switch.routing.forks`, which needs memory.

Pure: reads headers (lower-case names) and the parsed body; no I/O. The body may be anything a
client sent (it is classified before it is validated, so a rejected call is still attributed): every
read checks its type, and an odd value only means that signal is absent.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson

from switch.values import value

Harness = Literal["claude-code", "codex", "langchain", "other"]
Role = Literal["orchestrator", "subagent", "background"]
ROLES: tuple[Role, ...] = ("orchestrator", "subagent", "background")
HARNESSES: tuple[Harness, ...] = ("claude-code", "codex", "langchain", "other")
FAMILIES = ("opus", "sonnet", "haiku", "fable")

_ALIAS = re.compile(r"^(?:switch/|claude-switch-)(orchestrator|subagent|background)$")
# The model name switch offers deepagents-code and LangChain: it names no role, so the call is classified
# like any other and deepagents' subagents (which reuse their parent's model) still reach the subagent route.
CLASSIFYING_MODEL = "switch/auto"
# Only switch's LangChain wiring hands out `switch/...` names; they identify a caller whose client
# sends nothing else that does (the plain OpenAI SDK inside ChatOpenAI).
_LANGCHAIN_PREFIX = "switch/"
_CODEX_ROLES: dict[str, Role] = {
    "collab_spawn": "subagent",
    "review": "subagent",
    # Older builds' compaction call, a background call as before; Codex 0.171 marks its compaction turns in
    # the turn metadata instead, and those keep the main thread's role (see `codex_purpose`).
    "compact": "background",
    "memory_consolidation": "background",
}
# The request kind older Codex builds named only in `x-openai-subagent`.
_CODEX_LEGACY_KINDS = {"compact": "compaction", "review": "review", "memory_consolidation": "memory_consolidation"}
# Codex's `request_kind` for an ordinary turn: recorded as no kind, like every other harness's ordinary call.
_CODEX_ORDINARY_KIND = "turn"
# Kinds and ids come from the client: only short plain tokens are recorded.
_PLAIN_TOKEN = re.compile(r"^[A-Za-z0-9_.:/-]{1,80}$")
_BACKGROUND_MARKERS = (
    "Please write a 5-10 word title for the following conversation",
    "Generate a concise, sentence-case title",
    "Analyze if this message indicates a new conversation topic",
    "Summarize this coding conversation",
)
_DEEPAGENTS_MARKERS = ("Deep Agents", "You are a deep agent")
_DEEPAGENTS_SUBAGENT_PREAMBLE = "[The messages above are a prior conversation you are continu"
# Claude Code's compaction prompt (2.1.332) opens with this line and names the <summary> block it wants
# within its first few hundred characters.
_CLAUDE_COMPACTION_OPENING = "CRITICAL: Respond with TEXT ONLY"
_CLAUDE_COMPACTION_BLOCK = "<summary>"
# Markers sit at the start of the prompts they identify; looking only there keeps classification
# cheap on 20 KB system prompts.
_MARKER_WINDOW = 600


def _has_marker(texts: list[str], markers: tuple[str, ...]) -> bool:
    for text in texts:
        opening = text[:_MARKER_WINDOW]
        for marker in markers:
            if marker in opening:
                return True
    return False


@value
class CallInfo:
    """The classification of one call."""

    harness: Harness
    role: Role
    session_id: str | None
    agent_id: str | None
    family: str | None
    # What the harness said the call is for ("compaction", "fork", "review", ...), None for an ordinary turn.
    kind: str | None = None
    # The agent or thread that spawned this call's agent, as the harness names it.
    parent_agent_id: str | None = None


def model_family(model: str) -> str | None:
    """`opus`, `sonnet`, `haiku` or `fable` when the model name is of that Claude family."""
    lowered = model.lower()
    for family in FAMILIES:
        if family in lowered:
            return family
    return None


def _system_texts(body: dict[str, Any]) -> list[str]:
    system = body.get("system")
    texts: list[str] = []
    if isinstance(system, str):
        texts.append(system)
    elif isinstance(system, list):
        texts.extend(str(b.get("text", "")) for b in system if isinstance(b, dict))
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        texts.append(instructions)
    for message in (
        (body.get("messages") or body.get("input") or [])[:2]
        if isinstance(body.get("messages") or body.get("input"), list)
        else []
    ):
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            texts.extend(_texts_of(message.get("content")))
    return texts


def _texts_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b]
    return []


def _user_texts(body: dict[str, Any]) -> list[str]:
    messages = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if not isinstance(messages, list):
        return [messages] if isinstance(messages, str) else []
    texts: list[str] = []
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            texts.extend(_texts_of(message.get("content")))
    return texts


def _last_user_text(body: dict[str, Any]) -> str | None:
    messages = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if not isinstance(messages, list):
        return messages if isinstance(messages, str) else None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            texts = _texts_of(message.get("content"))
            return texts[-1] if texts else None
    return None


def _tool_names(body: dict[str, Any]) -> set[str]:
    tools = body.get("tools")
    names: set[str] = set()
    if not isinstance(tools, list):
        return names
    for tool in tools:
        if isinstance(tool, dict):
            name = tool.get("name")
            function = tool.get("function")
            if not name and isinstance(function, dict):
                name = function.get("name")
            if isinstance(name, str):
                names.add(name)
    return names


def _harness(headers: dict[str, str], system: list[str]) -> Harness:
    named = headers.get("x-switch-harness")
    if named in HARNESSES:
        return named
    agent = headers.get("user-agent", "").lower()
    if "x-claude-code-session-id" in headers or agent.startswith("claude-cli/") or headers.get("x-app") == "cli":
        return "claude-code"
    if headers.get("originator", "").startswith("codex") or agent.startswith("codex") or "x-openai-subagent" in headers:
        return "codex"
    if agent.startswith("langchain") or _has_marker(system, _DEEPAGENTS_MARKERS):
        return "langchain"
    if system and system[0].startswith("x-anthropic-billing-header:"):
        return "claude-code"
    return "other"


def _session(headers: dict[str, str], body: dict[str, Any]) -> str | None:
    for name in (
        "x-claude-code-session-id",
        "x-claude-session-id",
        "session-id",
        "session_id",
        "x-switch-session",
    ):
        if headers.get(name):
            return headers[name]
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user_id, str) and user_id:
        if user_id.startswith("{"):
            try:
                parsed = orjson.loads(user_id)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict) and isinstance(parsed.get("session_id"), str):
                return str(parsed["session_id"])
        if "_session_" in user_id:
            return user_id.rsplit("_session_", 1)[1] or None
    cache_key = body.get("prompt_cache_key")
    return cache_key if isinstance(cache_key, str) and cache_key else None


def _claude_hinted(headers: dict[str, str]) -> bool:
    """Whether Claude Code sent its hint headers (`CLAUDE_CODE_GATEWAY_HINT_HEADERS=1`) on this call."""
    return "x-claude-code-request-class" in headers


def _claude_subagent(headers: dict[str, str], system: list[str]) -> bool:
    """Whether a Claude Code call comes from a delegated agent: the hint header when sent, else the agent id
    header or the billing block's `cc_is_subagent=true`."""
    if _claude_hinted(headers):
        request_class = headers["x-claude-code-request-class"]
        # A compaction turn names no agent in its class: it is a subagent's when that agent's id comes with it.
        return request_class == "subagent" or (
            request_class == "compaction" and bool(headers.get("x-claude-code-agent-id"))
        )
    billing = system[0] if system and system[0].startswith("x-anthropic-billing-header:") else ""
    return bool(headers.get("x-claude-code-agent-id")) or "cc_is_subagent=true" in billing


def _claude_kind(headers: dict[str, str], body: dict[str, Any]) -> str | None:
    """`fork` or `compaction` for a Claude Code call that is one, from the hint headers when sent, else from
    the compaction prompt (forks without hints need the session's memory: `switch.routing.forks`)."""
    if headers.get("x-claude-code-agent-type") == "fork":
        return "fork"
    if headers.get("x-claude-code-request-class") == "compaction" or headers.get("x-claude-code-compaction"):
        return "compaction"
    if _claude_hinted(headers):
        return None
    last = _last_user_text(body)
    if (
        last is not None
        and last.startswith(_CLAUDE_COMPACTION_OPENING)
        and _CLAUDE_COMPACTION_BLOCK in last[:_MARKER_WINDOW]
    ):
        return "compaction"
    return None


# Most Codex requests are ordinary turns of the main thread; spotting those in the raw text skips parsing
# about 1 KB of JSON per call.
_ORDINARY_TURN = '"request_kind":"turn"'
_PARENT_KEY = '"parent_thread_id"'


def _codex_turn_metadata(headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """Codex 0.171's per-request JSON (`x-codex-turn-metadata`, also inside the body's `client_metadata`)."""
    client = body.get("client_metadata")
    header = headers.get("x-codex-turn-metadata")
    if header is not None and _ORDINARY_TURN in header and _PARENT_KEY not in header:
        return {"request_kind": "turn"}
    for raw in (
        headers.get("x-codex-turn-metadata"),
        client.get("x-codex-turn-metadata") if isinstance(client, dict) else None,
    ):
        if isinstance(raw, str) and raw.startswith("{"):
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(parsed, dict):
                return parsed
    return {}


def _plain(value: Any) -> str | None:
    return value if isinstance(value, str) and _PLAIN_TOKEN.match(value) else None


def codex_purpose(headers: dict[str, str], body: dict[str, Any]) -> tuple[str | None, str | None]:
    """(request kind, parent thread) of a Codex request: `request_kind` ("compaction", "review", ...; None for
    an ordinary turn) and `parent_thread_id` from its turn metadata or `client_metadata`, else the legacy
    `x-openai-subagent` value and the `x-codex-parent-thread-id` header."""
    metadata = _codex_turn_metadata(headers, body)
    client = body.get("client_metadata")
    client = client if isinstance(client, dict) else {}
    kind = _plain(metadata.get("request_kind")) or _plain(client.get("request_kind"))
    if kind is None:
        kind = _CODEX_LEGACY_KINDS.get(headers.get("x-openai-subagent", ""))
    if kind == _CODEX_ORDINARY_KIND:
        kind = None
    parent = (
        _plain(metadata.get("parent_thread_id"))
        or _plain(client.get("parent_thread_id"))
        or _plain(headers.get("x-codex-parent-thread-id"))
    )
    return kind, parent


def forced_role(model: str) -> Role | None:
    """The role a `switch/<role>` or `claude-switch-<role>` model name forces on every call, else None."""
    alias = _ALIAS.match(model)
    return alias.group(1) if alias else None  # type: ignore[return-value]


def classify(headers: dict[str, str], body: Any) -> CallInfo:
    """Classify one call from its headers (lower-case names) and parsed JSON body (any shape, even none)."""
    if not isinstance(body, dict):
        body = {}
    model = body.get("model")
    if not isinstance(model, str):
        model = ""
    system = _system_texts(body)
    harness = _harness(headers, system)
    if harness == "other" and model.startswith(_LANGCHAIN_PREFIX):
        harness = "langchain"
    session = _session(headers, body)
    family = model_family(model)
    agent_id = headers.get("x-claude-code-agent-id") or None
    if agent_id is None and headers.get("thread-id") and headers.get("thread-id") != headers.get("session-id"):
        agent_id = headers["thread-id"]
    kind: str | None = None
    parent: str | None = None
    if harness == "claude-code":
        kind = _claude_kind(headers, body)
        parent = headers.get("x-claude-code-parent-agent-id") or None
    elif harness == "codex":
        kind, parent = codex_purpose(headers, body)
    named = headers.get("x-switch-role")
    if named in ROLES:
        return CallInfo(harness, named, session, agent_id, family, kind, parent)
    forced = forced_role(model)
    if forced is not None:
        return CallInfo(harness, forced, session, agent_id, family, kind, parent)

    role: Role = "orchestrator"
    if harness == "claude-code":
        if _claude_subagent(headers, system) or kind == "fork":
            role = "subagent"
    elif harness == "codex":
        role = _CODEX_ROLES.get(headers.get("x-openai-subagent", ""), "orchestrator")
    elif harness == "langchain" and _has_marker(system, _DEEPAGENTS_MARKERS):
        tools = _tool_names(body)
        user = _user_texts(body)
        if any(text.startswith(_DEEPAGENTS_SUBAGENT_PREAMBLE) for text in user) or (tools and "task" not in tools):
            role = "subagent"
    if role == "orchestrator" and kind is None:
        if family == "haiku" or _has_marker(system, _BACKGROUND_MARKERS):
            role = "background"
        elif _last_user_text(body) == "Warmup":
            role = "background"
    return CallInfo(harness, role, session, agent_id, family, kind, parent)
