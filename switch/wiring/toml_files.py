"""TOML config files (Codex, deepagents): switch's tables and keys written in, and taken out again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from switch.files import atomic_write, digest
from switch.wiring.records import WiringError, load_record, record_path, save_record


def read_toml(path: Path) -> tuple[str | None, tomlkit.TOMLDocument]:
    """The file's text (None when missing) and its document; WiringError when it is not TOML."""
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


def dotted_get(document: Any, dotted: tuple[str, ...]) -> Any:
    """The value at `dotted` in a parsed TOML document, or None when any part is missing."""
    value = document
    for part in dotted:
        value = value.get(part) if hasattr(value, "get") else None
        if value is None:
            return None
    return value


def _remove_path(document: Any, dotted: tuple[str, ...]) -> None:
    parent = dotted_get(document, dotted[:-1]) if len(dotted) > 1 else document
    if parent is not None and hasattr(parent, "get") and dotted[-1] in parent:
        del parent[dotted[-1]]
        if len(dotted) > 1 and not parent:
            _remove_path(document, dotted[:-1])


def toml_on(
    harness: str,
    path: Path,
    tables: dict[tuple[str, ...], dict[str, Any]],
    keys: dict[str, Any] | None = None,
    remove: tuple[tuple[str, ...], ...] = (),
) -> tuple[Path, list[str]]:
    """Write `tables`, and each top-level key of `keys` the user has not set themselves, after deleting each
    dotted path in `remove` (settings the harness refuses); returns the file and the keys left alone because
    the user holds their own value (switch never replaces those). `off` restores the original either way."""
    text, document = read_toml(path)
    record = load_record(harness)
    if record is None:
        record = {"path": str(path), "original": text}
    for dotted in remove:
        _remove_path(document, dotted)
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
    save_record(harness, state)
    atomic_write(path, data)
    save_record(harness, {**state, "written": digest(data)})
    return path, kept


def toml_off(harness: str) -> Path | None:
    """Undo `toml_on` for `harness`; returns the file restored, or None when switch had not wired it."""
    record = load_record(harness)
    if record is None:
        return None
    path = Path(record["path"])
    text, document = read_toml(path)
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
    record_path(harness).unlink()
    return path


def toml_state(record: dict[str, Any], path: Path) -> str:
    """`on` when the file still holds every table switch wrote, else `stale`."""
    try:
        _text, document = read_toml(path)
    except WiringError:
        return "stale"
    for dotted, values in record.get("tables", []):
        table = dotted_get(document, tuple(dotted))
        if table is None or table.unwrap() != values:
            return "stale"
    for key, value in record.get("keys", {}).items():
        current = document.get(key)
        if current is None or current.unwrap() != value:
            return "stale"
    return "on"
