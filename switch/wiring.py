"""Turning harnesses on and off: edits to the user's own config files that can be undone exactly.

Each `on` records, in `$SWITCH_HOME/wiring/<harness>.json`, the file's original bytes and the
original value of every key it sets. `off` restores the original bytes when the file is exactly as
`on` left it; when the user changed something since, it restores only the keys switch set (and only
those still holding switch's values), leaving every other change alone. A malformed file is
reported and never written.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from switch import locations
from switch.errors import SwitchError
from switch.files import atomic_write, digest
from switch.routing.classify import CLASSIFYING_MODEL, ROLES

ABSENT = "__switch_absent__"


class WiringError(SwitchError):
    """A harness config file cannot be changed safely."""


def claude_settings_path() -> Path:
    """Claude Code's user settings file."""
    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(base).expanduser() if base else Path.home() / ".claude") / "settings.json"


def codex_config_path() -> Path:
    """Codex's config.toml."""
    base = os.environ.get("CODEX_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".codex") / "config.toml"


def deepagents_config_path() -> Path:
    """deepagents-code's config.toml."""
    return Path.home() / ".deepagents" / "config.toml"


def _record_path(harness: str) -> Path:
    return locations.ensure_private_dir(locations.home() / "wiring") / f"{harness}.json"


def _load_record(harness: str) -> dict[str, Any] | None:
    path = _record_path(harness)
    if not path.exists():
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _save_record(harness: str, record: dict[str, Any]) -> None:
    atomic_write(_record_path(harness), json.dumps(record, indent=2).encode())


def proxy_url(port: int) -> str:
    """The proxy's base URL."""
    return f"http://127.0.0.1:{port}"


def hook_argv(command: str) -> list[str]:
    """How a harness runs a switch hook (`statusline`, `codex-notify`) after every message: this Python
    without `site` (which costs as much start-up time as the hook itself) and without the working directory
    on its path, told where switch lives; the hooks need nothing but the standard library and switch."""
    import switch

    root = str(Path(switch.__file__).resolve().parent.parent)
    code = f"import sys; sys.path.insert(0, {root!r}); from switch.cli import main; main()"
    return [sys.executable, "-S", "-P", "-c", code, command]


STATUSLINE_REFRESH_SECONDS = 5


def claude_statusline() -> dict[str, Any]:
    """The `statusLine` setting that shows switch's line in Claude Code.

    Claude Code runs it when a message arrives, which can be before the recorder has committed that
    message's call (it batches for 0.2 s); `refreshInterval` re-runs it so the line catches up."""
    return {
        "type": "command",
        "command": shlex.join(hook_argv("statusline")),
        "padding": 0,
        "refreshInterval": STATUSLINE_REFRESH_SECONDS,
    }


# ---- Claude Code: the `env` block of settings.json -------------------------------------------------


def claude_env(port: int) -> dict[str, str]:
    """The environment Claude Code needs to go through switch."""
    return {"ANTHROPIC_BASE_URL": proxy_url(port), "CLAUDE_CODE_ENABLE_GATEWAY_MODEL_DISCOVERY": "1"}


def _read_json(path: Path) -> tuple[bytes | None, dict[str, Any]]:
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


def _indent_of(raw: bytes | None) -> int:
    if raw:
        for line in raw.decode("utf-8", "replace").splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped:
                return max(1, len(line) - len(stripped))
    return 2


def claude_on(port: int, statusline: bool = True) -> tuple[Path, str]:
    """Point Claude Code at switch (idempotent), and unless told not to, show switch's status line.

    Returns the file and what happened to the status line: `installed`, `kept` (the user has their own,
    which switch never replaces) or `skipped`."""
    path = claude_settings_path()
    raw, settings = _read_json(path)
    record = _load_record("claude")
    wanted = claude_env(port)
    env = settings.get("env")
    if env is not None and not isinstance(env, dict):
        raise WiringError(f"{path}: 'env' must be an object; switch did not change it")
    if record is None:
        record = {
            "path": str(path),
            "original": raw.decode("utf-8") if raw is not None else None,
            "env_existed": env is not None,
            "before": {key: (env or {}).get(key, ABSENT) for key in wanted},
        }
        _save_record("claude", record)
    env = dict(env or {})
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
    data = (json.dumps(settings, indent=_indent_of(raw), ensure_ascii=False) + "\n").encode()
    atomic_write(path, data)
    record["written"] = digest(data)
    record["values"] = wanted
    record["statusline"] = ours
    _save_record("claude", record)
    return path, outcome


def claude_off() -> Path | None:
    """Undo `claude_on`; returns the file restored, or None when switch had not wired it."""
    record = _load_record("claude")
    if record is None:
        return None
    path = Path(record["path"])
    raw, settings = _read_json(path)
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
                before = record["before"].get(key, ABSENT)
                if before == ABSENT:
                    env.pop(key, None)
                else:
                    env[key] = before
            if not env and not record.get("env_existed"):
                settings.pop("env", None)
        if record.get("statusline") is not None and settings.get("statusLine") == record["statusline"]:
            del settings["statusLine"]  # still switch's line (switch only adds one where there was none)
            changed = True
        if changed:
            atomic_write(path, (json.dumps(settings, indent=_indent_of(raw), ensure_ascii=False) + "\n").encode())
    _record_path("claude").unlink()
    return path


# ---- TOML files: Codex and deepagents ----------------------------------------------------------


def _read_toml(path: Path) -> tuple[str | None, tomlkit.TOMLDocument]:
    if not path.exists():
        return None, tomlkit.document()
    text = path.read_text(encoding="utf-8")
    try:
        return text, tomlkit.parse(text)
    except TOMLKitError as exc:
        raise WiringError(f"{path} is not valid TOML ({exc}); switch did not change it") from exc


def _set_table(document: Any, dotted: tuple[str, ...], values: dict[str, Any]) -> None:
    table = document
    for part in dotted[:-1]:
        if part not in table:
            table[part] = tomlkit.table(is_super_table=True)
        table = table[part]
    fresh = tomlkit.table()
    for key, value in values.items():
        fresh[key] = value
    table[dotted[-1]] = fresh


def _remove_table(document: Any, dotted: tuple[str, ...], values: dict[str, Any]) -> None:
    table = document
    for part in dotted[:-1]:
        if part not in table:
            return
        table = table[part]
    current = table.get(dotted[-1])
    if current is not None and current.unwrap() == values:
        del table[dotted[-1]]
        if len(dotted) > 1 and not table:
            _remove_table(document, dotted[:-1], {})


def _toml_on(
    harness: str, path: Path, tables: dict[tuple[str, ...], dict[str, Any]], keys: dict[str, Any] | None = None
) -> tuple[Path, list[str]]:
    """Write `tables`, and each top-level key of `keys` the user has not set themselves; returns the file
    and the keys left alone because the user holds their own value (switch never replaces those)."""
    text, document = _read_toml(path)
    record = _load_record(harness)
    if record is None:
        record = {"path": str(path), "original": text}
    for dotted, values in tables.items():
        _set_table(document, dotted, values)
    previously: dict[str, Any] = record.get("keys", {})
    written: dict[str, Any] = {}
    kept: list[str] = []
    for key, value in (keys or {}).items():
        current = document.get(key)
        if current is not None and current.unwrap() != previously.get(key):
            kept.append(key)
            continue
        document[key] = value
        written[key] = value
    for key in set(previously) - set(written) - set(kept):
        if key in document:
            del document[key]  # switch's own value from an earlier `on`, now declined
    data = tomlkit.dumps(document).encode()
    state = {**record, "tables": [[list(k), v] for k, v in tables.items()], "keys": written}
    _save_record(harness, state)
    atomic_write(path, data)
    _save_record(harness, {**state, "written": digest(data)})
    return path, kept


def _toml_off(harness: str) -> Path | None:
    record = _load_record(harness)
    if record is None:
        return None
    path = Path(record["path"])
    text, document = _read_toml(path)
    if text is not None and digest(text.encode()) == record.get("written"):
        if record["original"] is None:
            path.unlink()
        else:
            atomic_write(path, record["original"].encode("utf-8"))
    elif text is not None:
        for dotted, values in record.get("tables", []):
            _remove_table(document, tuple(dotted), values)
        for key, value in record.get("keys", {}).items():
            current = document.get(key)
            if current is not None and current.unwrap() == value:
                del document[key]
        atomic_write(path, tomlkit.dumps(document).encode())
    _record_path(harness).unlink()
    return path


def codex_tables(port: int, model: str = "gpt-5.5") -> dict[tuple[str, ...], dict[str, Any]]:
    """The provider and profile that send `codex --profile switch` through the proxy."""
    return {
        ("model_providers", "switch"): {
            "name": "switch",
            "base_url": proxy_url(port) + "/v1",
            "wire_api": "responses",
            "requires_openai_auth": False,
        },
        ("profiles", "switch"): {"model_provider": "switch", "model": model},
    }


def codex_notify_argv(chained: list[str] | None = None) -> list[str]:
    """Codex's `notify` program: switch's per-turn summary, then the user's own program if they have one."""
    return [*hook_argv("codex-notify"), *(chained or [])]


def codex_user_notify() -> list[str] | None:
    """The `notify` program in the user's Codex config that is not switch's own, if any."""
    path = codex_config_path()
    try:
        _text, document = _read_toml(path)
    except (WiringError, OSError):
        return None
    value = document.get("notify")
    record = _load_record("codex")
    if value is None or (record is not None and value.unwrap() == record.get("keys", {}).get("notify")):
        return None
    unwrapped = value.unwrap()
    return [str(part) for part in unwrapped] if isinstance(unwrapped, list) else None


def codex_on(port: int, notify: bool = True) -> tuple[Path, bool]:
    """Add the `switch` provider and profile to Codex's config.toml (idempotent) and, unless told not to or
    the user has their own, the per-turn `notify` summary; returns the file and whether a user's notify
    program was left in place."""
    path, kept = _toml_on(
        "codex", codex_config_path(), codex_tables(port), {"notify": codex_notify_argv()} if notify else {}
    )
    return path, "notify" in kept


def codex_off() -> Path | None:
    """Undo `codex_on`."""
    return _toml_off("codex")


# ChatOpenAI will not start without a non-empty key, and an `api_key_env` would make dcode demand that
# variable first. Switch serves routed calls with its own provider keys, so a stand-in given to the
# `switch` provider alone is all the client needs, and the user's own OPENAI_API_KEY stays untouched.
_PLACEHOLDER_KEY = "unused-placeholder"
DEEPAGENTS_MODEL = "switch:" + CLASSIFYING_MODEL
_ROLE_MODELS = [f"switch/{role}" for role in ROLES]


def deepagents_tables(port: int) -> dict[tuple[str, ...], dict[str, Any]]:
    """A deepagents-code provider that goes through switch over chat completions."""
    return {
        ("models", "providers", "switch"): {
            "base_url": proxy_url(port) + "/v1",
            "models": [CLASSIFYING_MODEL, *_ROLE_MODELS],
            "class_path": "langchain_openai:ChatOpenAI",
            "params": {"use_responses_api": False, "api_key": _PLACEHOLDER_KEY},
        }
    }


def langchain_on(port: int) -> Path:
    """Add a `switch` provider to deepagents-code's config (idempotent)."""
    return _toml_on("langchain", deepagents_config_path(), deepagents_tables(port))[0]


def langchain_off() -> Path | None:
    """Undo `langchain_on`."""
    return _toml_off("langchain")


_CLIENT_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


def langchain_env(port: int) -> dict[str, str]:
    """Exports for plain LangChain scripts: base URLs only, never a key."""
    return {"OPENAI_BASE_URL": proxy_url(port) + "/v1", "ANTHROPIC_BASE_URL": proxy_url(port)}


def langchain_env_notes() -> list[str]:
    """Comment lines printed after `langchain_env`'s exports."""
    roles = ", ".join(_ROLE_MODELS)
    return [
        f"# Use the model name {CLASSIFYING_MODEL}: switch then routes each call by its role"
        f" ({roles} force one role for every call).",
        "# Your OPENAI_API_KEY and ANTHROPIC_API_KEY are left as they are (native routes pass them on)."
        " If one is unset and the client refuses to start, set it yourself to any non-empty text:"
        " routes to other providers use the keys from `switch keys`.",
    ]


def langchain_child_env(port: int, environ: Mapping[str, str]) -> dict[str, str]:
    """What `switch run dcode` adds to the child's environment: base URLs, and a stand-in key only where none is set."""
    added = langchain_env(port)
    for variable in _CLIENT_KEY_VARIABLES:
        if not environ.get(variable):
            # The clients refuse an empty key; routed calls never use it, native ones fail as they would anyway.
            added[variable] = _PLACEHOLDER_KEY
    return added


def state(harness: str) -> str:
    """`on`, `off`, or `stale` (switch's record exists but the file no longer carries its values)."""
    record = _load_record(harness)
    if record is None:
        return "off"
    path = Path(record["path"])
    if not path.exists():
        return "stale"
    if harness == "claude":
        try:
            _raw, settings = _read_json(path)
        except WiringError:
            return "stale"
        env = settings.get("env") or {}
        return "on" if all(env.get(k) == v for k, v in record.get("values", {}).items()) else "stale"
    try:
        _text, document = _read_toml(path)
    except WiringError:
        return "stale"
    for dotted, values in record.get("tables", []):
        table: Any = document
        for part in dotted:
            table = table.get(part) if hasattr(table, "get") else None
            if table is None:
                return "stale"
        if table.unwrap() != values:
            return "stale"
    return "on"
