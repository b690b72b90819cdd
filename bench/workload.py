"""Benchmark payloads: a 52 KB Claude Code request and a Codex-shaped Responses request.

Captured requests have their long prompt texts elided (`…[N chars elided]`); the elided
characters are restored with prose of the same length so the request has its real size.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

CAPTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "captures"
_ELIDED = re.compile(r" ?…\[(\d+) chars elided\]")
_PROSE = (
    "When you run a command, explain what it does and why. Prefer editing existing files to creating "
    "new ones; keep changes small and reviewable; read a file before changing it. Use `rg` to search "
    "and never guess paths. Report what you verified and what you did not. "
)


def _restore(value: Any) -> Any:
    if isinstance(value, str):
        return _ELIDED.sub(lambda m: " " + (_PROSE * (int(m.group(1)) // len(_PROSE) + 1))[: int(m.group(1))], value)
    if isinstance(value, list):
        return [_restore(item) for item in value]
    if isinstance(value, dict):
        return {key: _restore(item) for key, item in value.items()}
    return value


def claude_code_request(target_bytes: int = 52 * 1024, stream: bool = True) -> dict[str, Any]:
    """A Claude Code tool-loop request restored to full size and padded to `target_bytes`."""
    capture = orjson.loads((CAPTURES / "claude_code_bash_tool" / "02_POST_v1_messages.json").read_bytes())
    body: dict[str, Any] = _restore(capture["body"])
    body["stream"] = stream
    missing = target_bytes - len(orjson.dumps(body))
    if missing > 0:
        body["messages"].append({"role": "assistant", "content": "Noted."})
        body["messages"].append(
            {"role": "user", "content": (_PROSE * (missing // len(_PROSE) + 1))[: max(missing - 80, 1)]}
        )
    return body


def codex_request(stream: bool = True) -> dict[str, Any]:
    """A Codex function-call turn (Responses API) restored to full size."""
    capture = orjson.loads((CAPTURES / "codex_function_call" / "02_POST_v1_responses.json").read_bytes())
    body: dict[str, Any] = _restore(capture["body"])
    body["stream"] = stream
    return body
