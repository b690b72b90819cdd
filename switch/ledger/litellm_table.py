"""LiteLLM's bundled model table, indexed once and read one entry at a time.

The table is a JSON object of about 5,000 entries (3.5 MB); a proxy prices and sizes a handful of models.
Parsed whole, it holds ~7 MB and leaves ~5 MB of the heap fragmented even once dropped. The index keeps
only each entry's lower-cased key and where its text starts; an entry is parsed again when it is asked
for (callers memoise their lookups). Entries are walked one by one while indexing, so the peak is one
entry, not the table. One index per table file (path, size, mtime) is shared by the process.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from switch.ledger.give_way import PIECE_ROWS, give_way

_SPACE = re.compile(r"[ \t\n\r]*")
# The decoder's scanner parses one value at an offset and says where it ended (what `raw_decode` uses).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_READ_CHUNK = 16_384
_shared: dict[tuple[str, int, int], EntryIndex] = {}
_shared_lock = threading.Lock()


def _skip_space(text: str, position: int) -> int:
    match = _SPACE.match(text, position)
    return match.end() if match is not None else position


class EntryIndex:
    """Lower-cased key → (the entry, its key as the table spells it), for a JSON object's object entries."""

    def __init__(self, raw: bytes, path: Path | None = None) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        # ASCII text (as json.dump writes it) has byte offsets equal to character offsets: the file is read
        # again at an entry's offset and the text need not be kept. Any other text is kept.
        self._path = path if path is not None and text.isascii() else None
        self._text = "" if self._path is not None else text
        self._offsets: dict[str, int] = {}
        try:
            self._walk(text)
        except (ValueError, IndexError, StopIteration, RecursionError):
            self._offsets.clear()  # not a JSON object: no entries, as a table that is missing

    def _walk(self, text: str) -> None:
        position = _skip_space(text, 0)
        if text[position] != "{":
            raise ValueError("not an object")
        position = _skip_space(text, position + 1)
        if text[position] == "}":
            return
        walked = 0
        while True:
            walked += 1
            if walked % PIECE_ROWS == 0:
                give_way()  # ~35 ms of walking in all, at start: calls arriving meanwhile wait for a piece of it
            start = position
            key, position = _SCAN(text, position)
            if not isinstance(key, str):
                raise ValueError("a key that is not a string")
            position = _skip_space(text, position)
            if text[position] != ":":
                raise ValueError("no colon")
            position = _skip_space(text, position + 1)
            is_object = text[position] == "{"
            _value, position = _SCAN(text, position)
            lowered = key.lower()
            if is_object:
                self._offsets[lowered] = start
            else:
                self._offsets.pop(lowered, None)  # a later value of the same key replaces an earlier one
            position = _skip_space(text, position)
            if text[position] == "}":
                return
            if text[position] != ",":
                raise ValueError("no comma")
            position = _skip_space(text, position + 1)

    def _entry_at(self, text: str, position: int, lowered: str) -> tuple[dict[str, Any], str] | None:
        key, position = _SCAN(text, position)
        position = _skip_space(text, position)
        position = _skip_space(text, position + 1)
        value, _end = _SCAN(text, position)
        if not isinstance(key, str) or key.lower() != lowered or not isinstance(value, dict):
            return None  # the file changed since it was indexed
        return value, key

    def _read(self, offset: int, lowered: str) -> tuple[dict[str, Any], str] | None:
        if self._path is None:
            return self._entry_at(self._text, offset, lowered)
        size = _READ_CHUNK
        with self._path.open("rb") as file:
            while True:
                file.seek(offset)
                chunk = file.read(size)
                try:
                    return self._entry_at(chunk.decode("ascii"), 0, lowered)
                except (ValueError, IndexError, StopIteration):
                    if len(chunk) < size:
                        return None  # the end of the file came first: it changed since it was indexed
                    size *= 4

    def get(self, lowered: str) -> tuple[dict[str, Any], str] | None:
        """(the entry, its key as spelled) under the lower-cased key, or None."""
        offset = self._offsets.get(lowered)
        if offset is None:
            return None
        try:
            return self._read(offset, lowered)
        except (OSError, ValueError, IndexError, StopIteration, RecursionError):
            return None

    def entries(self) -> Iterator[tuple[str, tuple[dict[str, Any], str]]]:
        """Every (lower-cased key, (entry, key as spelled)), the table read once for all of them."""
        text = self._text
        if self._path is not None:
            try:
                text = self._path.read_bytes().decode("ascii")
            except (OSError, UnicodeDecodeError):
                return
        for lowered, offset in list(self._offsets.items()):
            try:
                found = self._entry_at(text, offset, lowered)
            except (ValueError, IndexError, StopIteration, RecursionError):
                found = None
            if found is not None:
                yield lowered, found

    def __len__(self) -> int:
        return len(self._offsets)


def shared_index(path: Path) -> EntryIndex:
    """The process's index of the table at `path`, built on first use and again once the file changes."""
    status = path.stat()
    identity = (str(path), status.st_size, status.st_mtime_ns)
    with _shared_lock:
        found = _shared.get(identity)
        if found is None:
            found = EntryIndex(path.read_bytes(), path)
            _shared.clear()
            _shared[identity] = found
        return found
