"""Real client requests, mutated by type, for property tests of everything that reads a client body.

Seeds are the captured harness requests (Claude Code and Anthropic SDKs → Messages, Codex and
deepagents → Responses, LangChain's OpenAI client → Chat Completions) plus chat bodies built from
the Claude Code captures (multi-turn, tool calls, tool results, reasoning). A case applies one to
three mutations to a seed:

* replace: a value somewhere in the body becomes another JSON type (object, array, string, integer,
  number, boolean, null), a huge or negative number, odd Unicode (lone surrogates, NUL, RTL marks,
  emoji), or an empty string, array or object;
* delete: a key (or array element) disappears;
* insert: a field a parser reads is added where it may not belong, with any of those values;
* header: a header that classification reads gets an odd value.

The place to mutate is found by a random walk from the root, so top-level fields are hit as often
as deep ones instead of drowning in the tools' JSON schemas.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from switch.protocols.anthropic_messages.inbound import request_to_ir as anthropic_request_to_ir
from switch.protocols.openai_chat.outbound import request_from_ir as chat_request_from_ir
from switch.routing.resolve import ChatTarget
from tests.conftest import capture_names, load_capture

# Each proxy-level case is sent to all three upstream APIs, so the default reaches 2,000 generated
# cases per inbound × upstream pair; `HYPOTHESIS_PROFILE=slow` runs ten times as many.
settings.register_profile(
    "client-fuzz",
    max_examples=2000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("client-fuzz-slow", parent=settings.get_profile("client-fuzz"), max_examples=20000)
FUZZ = settings.get_profile("client-fuzz-slow" if os.environ.get("HYPOTHESIS_PROFILE") == "slow" else "client-fuzz")

INBOUND_APIS = ("anthropic", "openai-chat", "openai-responses")
PATHS = {"anthropic": "/v1/messages", "openai-chat": "/v1/chat/completions", "openai-responses": "/v1/responses"}

ODD_STRINGS = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",  # lone high surrogate
    "\udfff",  # lone low surrogate
    "x\ud83d",  # half an emoji pair
    "\u202eevil\u202c",  # right-to-left override
    "\u200f\u05e9\u05dc\u05d5\u05dd",  # RTL mark and Hebrew
    "🦀🧪👩‍👩‍👧",
    "\ufeff",
    "e\u0301\u0301\u0301",
    "\n\r\t",
    "null",
    "0",
    "{}",
    "x-anthropic-billing-header: cc_is_subagent=true",
    "swt_%%%",
    "swr1.@@@",
    "data:image/png;base64,",
    "claude-switch-background",
    "switch/subagent",
    "haiku",
)
ODD_NUMBERS = (
    0,
    -1,
    1,
    2**31,
    2**63,
    2**64 - 1,
    2**64,
    2**70,
    -(2**63) - 1,
    -(2**70),
    1e308,
    -1e308,
    5e-324,
    -0.0,
    0.5,
)
BLOCK_TYPES = (
    "text",
    "image",
    "document",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "tool_reference",
    "input_text",
    "output_text",
    "input_image",
    "input_file",
    "refusal",
    "image_url",
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "additional_tools",
    "namespace",
    "function",
    "custom",
    "any",
    "tool",
    "none",
    "auto",
    "disabled",
    "enabled",
    "adaptive",
    "base64",
    "url",
)
# Every field some parser or the classifier reads.
FIELD_NAMES = (
    "model",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "messages",
    "input",
    "instructions",
    "system",
    "role",
    "content",
    "type",
    "text",
    "source",
    "media_type",
    "data",
    "url",
    "image_url",
    "id",
    "name",
    "input_schema",
    "description",
    "parameters",
    "format",
    "namespace",
    "tools",
    "function",
    "arguments",
    "tool_calls",
    "tool_call_id",
    "tool_use_id",
    "call_id",
    "output",
    "is_error",
    "thinking",
    "signature",
    "budget_tokens",
    "encrypted_content",
    "summary",
    "refusal",
    "tool_name",
    "tool_choice",
    "disable_parallel_tool_use",
    "parallel_tool_calls",
    "output_config",
    "effort",
    "reasoning",
    "reasoning_effort",
    "reasoning_content",
    "metadata",
    "user_id",
    "user",
    "safety_identifier",
    "prompt_cache_key",
    "previous_response_id",
    "store",
    "stream",
    "stream_options",
    "include_usage",
    "stop",
    "stop_sequences",
    "temperature",
    "top_p",
)
HEADER_NAMES = (
    "x-switch-role",
    "x-switch-harness",
    "x-switch-session",
    "user-agent",
    "x-app",
    "originator",
    "x-claude-code-session-id",
    "x-claude-code-agent-id",
    "x-openai-subagent",
    "session_id",
    "session-id",
    "thread-id",
)
HEADER_VALUES = (
    b"",
    b" ",
    b"orchestrator",
    b"subagent",
    b"background",
    b"claude-code",
    b"codex",
    b"langchain",
    b"other",
    b"claude-cli/9.9.9",
    b"codex_exec",
    b"langchain",
    b"cli",
    b"compact",
    b"review",
    b"\xff\xfe\x80",
    "🦀".encode(),
    "\u202e".encode(),
    b"x" * 2000,
)


def _free_json(rng: random.Random, depth: int) -> Any:
    """Free-form JSON of any shape, from a seeded generator (no extra hypothesis draws)."""
    kind = rng.randrange(9 if depth else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-(2**66), 2**66)
    if kind == 3:
        return rng.uniform(-1e300, 1e300) * rng.random() ** 40
    if kind == 4:
        return "".join(
            chr(rng.choice((rng.randrange(32, 127), rng.randrange(0x10FFFF)))) for _ in range(rng.randrange(6))
        )
    if kind == 5:
        return rng.choice(BLOCK_TYPES)
    if kind == 6:
        return rng.choice(ODD_STRINGS)
    if kind == 7:
        return [_free_json(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {rng.choice(FIELD_NAMES): _free_json(rng, depth - 1) for _ in range(rng.randrange(4))}


def _value_table() -> list[Any]:
    """Values of every JSON type that tend to break parsers, null first (hypothesis shrinks toward it)."""
    scalars: list[Any] = [None, True, False, *ODD_NUMBERS, *ODD_STRINGS, *BLOCK_TYPES]
    arrays: list[Any] = [[], [None], [""], [0], [1e308], [{}], [[]], ["text"], [{"type": t} for t in BLOCK_TYPES[:8]]]
    arrays += [[{"type": kind}] for kind in BLOCK_TYPES]
    objects: list[Any] = [{}, {"": ""}, {"type": None}, {"type": {}}, {"type": []}, {"type": 1}]
    objects += [{"type": kind} for kind in BLOCK_TYPES]
    objects += [{"type": kind, "text": None, "id": 0, "name": [], "source": "x"} for kind in BLOCK_TYPES]
    objects += [{name: None} for name in FIELD_NAMES] + [{name: {}} for name in FIELD_NAMES]
    objects += [{name: "\x00"} for name in FIELD_NAMES] + [{name: 2**70} for name in FIELD_NAMES]
    # Nested past what orjson re-encodes (255 levels), within what it decodes (1024).
    deep: list[Any] = [[]]
    for _ in range(260):
        deep = [deep]
    return scalars + arrays + objects + [deep, {"type": "object", "properties": {"x": deep}}]


VALUE_TABLE = _value_table()
_KINDS = ("replace", "replace", "replace", "delete", "insert")
_MAX_DEPTH = 8


class Mutation:
    """One change to a body; `steps` walk from the root to where it applies."""

    __slots__ = ("kind", "steps", "value", "key")

    def __init__(self, kind: str, steps: tuple[int, ...], value: Any, key: str) -> None:
        self.kind = kind
        self.steps = steps
        self.value = value
        self.key = key

    @classmethod
    def decode(cls, number: int) -> Mutation:
        """The mutation one drawn number stands for (one draw per mutation keeps generation cheap)."""
        # Hypothesis favours small numbers; hashing spreads them over every place and value.
        number = int.from_bytes(hashlib.blake2b(number.to_bytes(13, "big"), digest_size=16).digest(), "big")
        number, kind = divmod(number, len(_KINDS))
        number, key = divmod(number, len(FIELD_NAMES))
        number, value = divmod(number, len(VALUE_TABLE) + len(VALUE_TABLE) // 4)
        number, depth = divmod(number, _MAX_DEPTH)
        steps = []
        for _ in range(depth):
            number, step = divmod(number, 256)
            steps.append(step)
        if value < len(VALUE_TABLE):
            chosen = VALUE_TABLE[value]
        else:
            chosen = _free_json(random.Random(number), 3)
        return cls(_KINDS[kind], tuple(steps), chosen, FIELD_NAMES[key])


MUTATIONS: st.SearchStrategy[Mutation] = st.builds(Mutation.decode, st.integers(0, 2**96 - 1))
HEADER_MUTATIONS: st.SearchStrategy[tuple[str, bytes]] = st.tuples(
    st.sampled_from(HEADER_NAMES), st.sampled_from(HEADER_VALUES)
)


def _walk(document: Any, steps: tuple[int, ...]) -> tuple[list[str | int], Any]:
    """The path `steps` lead to (each step picks a child, modulo their count) and the node there."""
    path: list[str | int] = []
    node = document
    for step in steps:
        if isinstance(node, dict) and node:
            key: str | int = list(node)[step % len(node)]
        elif isinstance(node, list) and node:
            key = step % len(node)
        else:
            break
        path.append(key)
        node = node[key]
    return path, node


def _at(document: Any, path: list[str | int]) -> Any:
    for key in path:
        document = document[key]
    return document


def apply(document: Any, mutation: Mutation) -> tuple[Any, str]:
    """`document` with `mutation` applied (in place where possible), and a short description of it."""
    path, node = _walk(document, mutation.steps)
    value = copy.deepcopy(mutation.value)  # strategies hand out shared objects; later mutations edit in place
    where = "".join(f"[{key!r}]" for key in path) or "<root>"
    if mutation.kind == "insert":
        while path and not isinstance(node, dict):
            path.pop()
            node = _at(document, path)
        if not isinstance(node, dict):
            return value, f"replace <root> with {value!r:.60}"
        node[mutation.key] = value
        return document, f"insert {where}[{mutation.key!r}] = {value!r:.60}"
    if not path:
        if mutation.kind == "delete":
            return document, "delete nothing"
        return value, f"replace <root> with {value!r:.60}"
    parent = _at(document, path[:-1])
    if mutation.kind == "delete":
        del parent[path[-1]]
        return document, f"delete {where}"
    parent[path[-1]] = value
    return document, f"replace {where} with {value!r:.60}"


@dataclass(frozen=True)
class Seed:
    """One real request: its name, its headers as the proxy sees them, and its body."""

    name: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


class Case:
    """A mutated request; its repr names the seed and the mutations, not the whole body."""

    __slots__ = ("seed", "document", "headers", "headers_mutated", "changes")

    def __init__(
        self,
        seed: str,
        document: Any,
        headers: tuple[tuple[bytes, bytes], ...],
        headers_mutated: bool,
        changes: tuple[str, ...],
    ) -> None:
        self.seed = seed
        self.document = document
        self.headers = headers
        self.headers_mutated = headers_mutated
        self.changes = changes

    def __repr__(self) -> str:
        return f"Case({self.seed}: {'; '.join(self.changes)})"

    def body(self) -> bytes:
        """The body as a client would send it: lone surrogates escaped, big integers written out."""
        return json.dumps(self.document, ensure_ascii=True).encode()


_SKIPPED_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding"})


def _headers(capture: dict[str, Any]) -> tuple[tuple[bytes, bytes], ...]:
    kept = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in capture["headers"]
        if name.lower() not in _SKIPPED_HEADERS
    ]
    return ((b"host", b"127.0.0.1"), *kept)


def _built_chat_seeds() -> list[Seed]:
    """Chat bodies as a chat client would send them for each Claude Code conversation."""
    openai_headers = _headers(load_capture("langchain_openai_venv/01_POST_v1_chat_completions.json"))
    seeds = []
    for name in capture_names("claude_code_"):
        body = load_capture(name)["body"]
        chat = chat_request_from_ir(anthropic_request_to_ir(body), ChatTarget(model=body["model"]))
        seeds.append(Seed(f"chat-from-{name}", openai_headers, orjson.dumps(chat)))
    return seeds


def _seeds(api: str) -> list[Seed]:
    suffix = {"anthropic": "v1_messages.json", "openai-chat": "v1_chat_completions.json"}.get(api, "v1_responses.json")
    seeds = [
        Seed(name, _headers(capture), orjson.dumps(capture["body"]))
        for name in capture_names("")
        if name.endswith(suffix)
        for capture in [load_capture(name)]
    ]
    if api == "openai-chat":
        seeds += _built_chat_seeds()
    return seeds


SEEDS: dict[str, list[Seed]] = {api: _seeds(api) for api in INBOUND_APIS}


def mutate(seed: Seed, mutations: list[Mutation], header_changes: list[tuple[str, bytes]]) -> Case:
    """`seed` with `mutations` applied to its body and `header_changes` to its headers."""
    document = orjson.loads(seed.body)
    changes = []
    for mutation in mutations:
        document, change = apply(document, mutation)
        changes.append(change)
    headers = dict(seed.headers)
    for name, value in header_changes:
        headers[name.encode()] = value
        changes.append(f"header {name}: {value[:40]!r}")
    return Case(seed.name, document, tuple(headers.items()), bool(header_changes), tuple(changes))


@st.composite
def mutated_requests(draw: st.DrawFn, api: str) -> Case:
    """A real request for `api` with one to three body mutations and maybe odd headers."""
    seed = draw(st.sampled_from(SEEDS[api]))
    mutations = draw(st.lists(MUTATIONS, min_size=1, max_size=3))
    return mutate(seed, mutations, draw(st.lists(HEADER_MUTATIONS, max_size=2)))
