"""The spill file: JSON lines that wait for the database, appended whole and cut once replayed.

Two kinds of line: a priced row (the writer's batch when the database refused it, fsynced), and a
record marked `_unpriced_record` (appended by `submit` past the queue bound, priced when replayed).
Every line read back is checked against the calls table before it is inserted, so a damaged line is
skipped instead of failing its whole replay.

The file is never shared: the descriptor that appends holds an `flock` on it, and a second writer
(another process, or another recorder on the same path) can neither append to it nor replay it; its
rows stay with it (in memory, retried) while the holder replays its own. With one proxy per home
(`switch.home_lock`) that never happens in use; the lock is what makes it impossible.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

import orjson

from switch import locations
from switch.ledger.columns import COLUMN_KINDS, COLUMNS
from switch.ledger.record import CallRecord

RECORD_MARK = "_unpriced_record"
_RECORD_FIELDS = tuple(CallRecord.__dataclass_fields__)
# Numbers stay within 2**53, which SQLite and the rollup sums hold without overflow.
_NUMBER_LIMIT = 2**53


def default_path() -> Path:
    """Where rows wait for the database by default."""
    return locations.home() / "ledger.spill.jsonl"


def storable(row: dict[str, Any]) -> bool:
    """Whether `row` (read back from the spill file) fits the calls table."""
    for column, (kinds, required) in COLUMN_KINDS.items():
        value = row.get(column)
        if value is None:
            if required:
                return False
        elif not isinstance(value, kinds):
            return False
        elif isinstance(value, int | float) and not -_NUMBER_LIMIT <= value <= _NUMBER_LIMIT:
            return False
    return True


def encode_rows(rows: list[dict[str, Any]]) -> bytes:
    """Priced rows as spill lines."""
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def encode_record(record: CallRecord) -> bytes:
    """One unpriced record as a spill line."""
    return orjson.dumps({RECORD_MARK: True, **{name: getattr(record, name) for name in _RECORD_FIELDS}}) + b"\n"


def decode_line(line: bytes) -> dict[str, Any] | CallRecord | None:
    """A spill line back as a row or a record to price; None for a damaged line."""
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None  # a line cut short by a crash mid-write
    if not isinstance(item, dict):
        return None
    if item.get(RECORD_MARK) is True:
        try:
            return CallRecord(**{name: item[name] for name in _RECORD_FIELDS if name in item})
        except TypeError:
            return None
    row = {column: item.get(column) for column in COLUMNS}
    # The budget hold the call took, released when the row is committed (not a column).
    hold = item.get("budget_hold")
    row["budget_hold"] = hold if type(hold) is int else 0
    return row


class SpillFile:
    """Appends whole lines, reads back what waits, and cuts what the database took; thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Held while the file is appended to, read for replay, or cut: `submit` (past the queue bound)
        # and the writer thread both append.
        self.lock = threading.Lock()
        self.offset = 0  # bytes at the head of the file already in the database
        self.rows = 0  # lines in the file, as of the last append or read
        self._descriptor: int | None = None
        self._end = 0  # where the next append starts

    def size(self) -> int:
        """The file's size in bytes (0 when there is none)."""
        try:
            status = self.path.stat()
        except OSError:
            return 0
        return status.st_size if stat.S_ISREG(status.st_mode) else 0

    def pending(self) -> bool:
        """Whether rows are waiting in the file."""
        return self.size() > self.offset

    def append(self, data: bytes, lines: int, durable: bool) -> None:
        """Append whole lines, all or nothing; raises OSError with the file as it was."""
        with self.lock:
            self._append(data, durable)
            self.rows += lines

    def _append(self, data: bytes, durable: bool) -> None:
        if self._descriptor is None:
            # Opened once and kept while appends work: past the queue bound, one write per call.
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
            try:
                descriptor = os.open(self.path, flags, 0o600)
            except FileNotFoundError:
                locations.ensure_private_dir(self.path.parent)
                descriptor = os.open(self.path, flags, 0o600)
            try:
                _lock(descriptor, self.path)
                size = os.fstat(descriptor).st_size
                if size and os.pread(descriptor, 1, size - 1) != b"\n":
                    os.write(descriptor, b"\n")  # end a line cut short by a crash, so ours stay whole
                    size += 1
            except OSError:
                os.close(descriptor)
                raise
            self._descriptor, self._end = descriptor, size
        descriptor = self._descriptor
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            if durable:
                os.fsync(descriptor)
        except OSError:
            # No half-written rows: they are kept whole in memory and retried, never doubled.
            try:
                os.ftruncate(descriptor, self._end)
            except OSError:
                pass
            self._close()
            raise
        self._end += len(data)

    def read_pending(self) -> tuple[list[bytes], int, int] | None:
        """The non-empty lines waiting, the offset they end at and how many lines that was; None when none."""
        with self.lock:  # appends hold it too: what is read here is whole lines
            if self._descriptor is None and self.size() > self.offset:
                self._append(b"", durable=False)  # takes the file's flock (OSError while another holds it)
            end = self.size()
            if end <= self.offset:
                if end == 0 and self.path.is_file():
                    self._close()
                    self.path.unlink()  # left empty (by a crash, say): nothing waits
                return None
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(end - self.offset)
            self.rows = data.count(b"\n")
        return [line for line in data.splitlines() if line.strip()], end, self.rows

    def forget(self, end: int, lines: int) -> None:
        """Drop the file's first `end` bytes (`lines` lines), now in the database.

        Raises OSError when the file cannot be cut; those rows are then skipped from now on."""
        with self.lock:
            self.rows -= lines
            self._close()
            try:
                if self.size() <= end:
                    self.path.unlink(missing_ok=True)
                else:  # `submit` appended while the rows were replayed: keep only what it added
                    with open(self.path, "rb") as handle:
                        handle.seek(end)
                        tail = handle.read()
                    partial = self.path.with_name(self.path.name + ".part")
                    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(descriptor, "wb") as handle:
                        handle.write(tail)
                        handle.flush()
                        os.fsync(handle.fileno())
                    os.replace(partial, self.path)
                self.offset = 0
            except OSError:
                self.offset = end
                raise

    def close(self) -> None:
        """Let go of the append descriptor."""
        with self.lock:
            self._close()

    def _close(self) -> None:
        # Before the file is cut or replaced, so no append lands in a file that is gone.
        if self._descriptor is not None:
            try:
                os.close(self._descriptor)
            except OSError:
                pass
            self._descriptor = None


def _lock(descriptor: int, path: Path) -> None:
    """Take the spill file's exclusive flock; OSError (EWOULDBLOCK) while another writer holds it."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one proxy per home is all there is
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise OSError(errno.EWOULDBLOCK, "another ledger writer holds this spill file", str(path)) from None
