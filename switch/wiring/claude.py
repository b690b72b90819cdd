"""Claude Code: the `env` block and `statusLine` of its settings.json."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from switch.files import atomic_write, digest
from switch.wiring.gateway import chain_gateway, unchain_gateway
from switch.wiring.records import ABSENT, WiringError, hook_argv, load_record, proxy_url, record_path, save_record


def claude_settings_path() -> Path:
    """Claude Code's user settings file."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "settings.json"


STATUSLINE_REFRESH_SECONDS = 5


def claude_statusline() -> dict[str, Any]:
    """The `statusLine` setting that shows switch's line in Claude Code.

    Claude Code runs it when a message arrives, which can be before the recorder has committed that
    message's call (it batches for 0.2 s); `refreshInterval` re-runs it so the line catches up."""
    return {
        "type": "command",
        # Errors to /dev/null, first so the command still ends in `statusline`: an interpreter that is gone
        # (switch uninstalled) leaves Claude Code's status line empty rather than showing the shell's error.
        "command": "2>/dev/null " + shlex.join(hook_argv("statusline")),
        "padding": 0,
        "refreshInterval": STATUSLINE_REFRESH_SECONDS,
    }


# Claude Code then says on each request what it is (main turn, subagent, fork, compaction): switch routes and
# records by it instead of guessing from the body.
HINT_HEADERS = {"CLAUDE_CODE_GATEWAY_HINT_HEADERS": "1"}


def claude_env(port: int) -> dict[str, str]:
    """The environment Claude Code needs to go through switch."""
    return {"ANTHROPIC_BASE_URL": proxy_url(port), "CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY": "1", **HINT_HEADERS}


def read_json(path: Path) -> tuple[bytes | None, dict[str, Any]]:
    """The file's bytes (None when missing) and its object; WiringError when it is not a JSON object."""
    if not path.exists():
        return None, {}
    raw = path.read_bytes()
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise WiringError(
            f"{path} is not valid JSON (line {exc.lineno}): fix it first; switch did not change it"
        ) from exc
    if not isinstance(parsed, dict):
        raise WiringError(f"{path} must hold a JSON object; switch did not change it")
    return raw, parsed


def indent_of(raw: bytes | None) -> int:
    """The indent the user's file uses, so a rewrite keeps their layout."""
    if raw:
        for line in raw.decode("utf-8", "replace").splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped:
                return max(1, len(line) - len(stripped))
    return 2


def claude_on(port: int, statusline: bool = True, model_env: dict[str, str] | None = None) -> tuple[Path, str]:
    """Point Claude Code at switch (idempotent), and unless told not to, show switch's status line.

    `model_env` is what switch tells Claude Code about the model serving it (`switch.wiring.windows`); a
    setting an earlier `on` wrote and this one does not want goes back to the user's value.
    Returns the file and what happened to the status line: `installed`, `kept` (the user has their own,
    which switch never replaces) or `skipped`."""
    path = claude_settings_path()
    raw, settings = read_json(path)
    record = load_record("claude")
    wanted = {**claude_env(port), **(model_env or {})}
    env = settings.get("env")
    if env is not None and not isinstance(env, dict):
        raise WiringError(f"{path}: 'env' must be an object; switch did not change it")
    if record is None:
        # Before settings.json changes: a config.toml that cannot take the gateway leaves both files as they are.
        chain_gateway((env or {}).get("ANTHROPIC_BASE_URL"), wanted["ANTHROPIC_BASE_URL"])
        record = {
            "path": str(path),
            "original": raw.decode("utf-8") if raw is not None else None,
            "env_existed": env is not None,
            "before": {},
            "values": {},
        }
    env = dict(env or {})
    previous: dict[str, str] = record.get("values", {})
    before: dict[str, str] = record["before"]
    for key in wanted:
        if key not in before:
            # First set by this `on`: what the user had is what `off` gives back.
            before[key] = env.get(key, ABSENT)
    for key, value in previous.items():
        if key not in wanted and env.get(key) == value:
            _restore(env, key, before.get(key, ABSENT))
    record["values"] = previous
    save_record("claude", record)
    env.update(wanted)
    settings["env"] = env
    current = settings.get("statusLine", ABSENT)
    ours = record.get("statusline")
    if current != ABSENT and current != ours:
        outcome = "kept"
    elif statusline:
        ours = settings["statusLine"] = claude_statusline()
        outcome = "installed"
    else:
        if current != ABSENT:  # switch's own line from an earlier `on`, now declined
            del settings["statusLine"]
        ours, outcome = None, "skipped"
    data = (json.dumps(settings, indent=indent_of(raw), ensure_ascii=False) + "\n").encode()
    atomic_write(path, data)
    record["written"] = digest(data)
    record["values"] = wanted
    record["statusline"] = ours
    save_record("claude", record)
    return path, outcome


def _restore(env: dict[str, Any], key: str, before: str) -> None:
    """Give `key` back its value from before switch set it (or remove it, when it had none)."""
    if before == ABSENT:
        env.pop(key, None)
    else:
        env[key] = before


def claude_off() -> Path | None:
    """Undo `claude_on`; returns the file restored, or None when switch had not wired it."""
    record = load_record("claude")
    if record is None:
        return None
    path = Path(record["path"])
    raw, settings = read_json(path)
    if raw is not None and digest(raw) == record.get("written"):
        original = record["original"]
        if original is None:
            path.unlink()
        else:
            atomic_write(path, original.encode("utf-8"))
    elif raw is not None:
        changed = False
        env = settings.get("env")
        if isinstance(env, dict):
            for key, value in record.get("values", {}).items():
                if env.get(key) != value:
                    continue  # the user changed it since: leave their value
                changed = True
                _restore(env, key, record["before"].get(key, ABSENT))
            if not env and not record.get("env_existed"):
                settings.pop("env", None)
        if record.get("statusline") is not None and settings.get("statusLine") == record["statusline"]:
            del settings["statusLine"]  # still switch's line (switch only adds one where there was none)
            changed = True
        if changed:
            atomic_write(path, (json.dumps(settings, indent=indent_of(raw), ensure_ascii=False) + "\n").encode())
    record_path("claude").unlink()
    unchain_gateway()
    return path


def claude_state(record: dict[str, Any], path: Path) -> str:
    """`on` when settings.json still carries switch's env values, else `stale`."""
    try:
        _raw, settings = read_json(path)
    except WiringError:
        return "stale"
    env = settings.get("env") or {}
    return "on" if all(env.get(k) == v for k, v in record.get("values", {}).items()) else "stale"
