"""The only writer of the ledger: a bounded queue and one supervised thread, off the request path.

`submit` never blocks and never raises. It puts the record on a queue of at most `MAX_QUEUED`
records; past that bound (a writer that is stuck or dead) it appends the record to the spill file
instead, so memory stays bounded. The writer thread takes records in batches, prices them (so no price
lookup ever runs on the request path), and inserts each batch in one transaction. When the database
cannot be written (locked by another process, read-only, full, or any other error) the rows go to the
spill file (JSON lines, flushed per batch) and are replayed once writing works again, and at the next
start. Rows that cannot even be spilled (a full disk) stay in memory and are retried: nothing is
dropped while the process lives. Each kind of failure is logged once until writing works again, and
`health()` reports it; a writer thread that dies anyway is restarted by the next `submit` or
`health()`. `close` drains the queue before it returns. Rows never hold prompts or keys.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import queue
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import orjson

from switch import locations
from switch.config import Settings
from switch.ledger.db import open_for_writing
from switch.ledger.migrations import BUCKET_SECONDS, ROLLUP_KEYS, ROLLUP_SUMS, SESSION_KEYS
from switch.ledger.pricing import PriceTable
from switch.ledger.record import CallRecord
from switch.protocols.ir import Usage

log = logging.getLogger("switch.recorder")

COLUMNS: tuple[str, ...] = (
    "started_at",
    "harness",
    "session_id",
    "agent_id",
    "role",
    "preset",
    "requested_model",
    "provider",
    "served_model",
    "inbound_api",
    "upstream_api",
    "streamed",
    "outcome",
    "http_status",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "usage_reported",
    "cost_micros",
    "native_cost_micros",
    "cache_savings_micros",
    "price_source",
    "native_price_source",
    "price_input",
    "price_cached_input",
    "price_cache_write",
    "price_output",
    "ttft_ms",
    "duration_ms",
    "output_tps",
    "fallback_attempt",
    "fallback_trigger",
    "request_bytes",
    "response_bytes",
    "error",
)
_INSERT = f"INSERT INTO calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
_STOP = object()
MAX_QUEUED = 10_000
"""Records the queue holds at most; past it `submit` appends to the spill file (about 1 KB a record)."""
_RETRY_SECONDS = 1.0
_STORAGE_STAGES = ("database:", "spill:", "replay:", "writer:")
_RECORD_MARK = "_unpriced_record"
"""Marks a spill line written by `submit` past the queue bound: a record, priced when replayed."""

# What each column accepts, so a damaged spill line is skipped instead of failing its whole replay.
# Numbers stay within 2**53, which SQLite and the rollup sums hold without overflow.
_TEXT, _INTEGER, _NUMBER = (str,), (int,), (int, float)
_COLUMN_KINDS: dict[str, tuple[tuple[type, ...], bool]] = {
    **dict.fromkeys(
        (
            "harness",
            "role",
            "preset",
            "requested_model",
            "provider",
            "served_model",
            "inbound_api",
            "upstream_api",
            "outcome",
        ),
        (_TEXT, True),
    ),
    **dict.fromkeys(
        ("session_id", "agent_id", "stop_reason", "price_source", "native_price_source", "fallback_trigger", "error"),
        (_TEXT, False),
    ),
    **dict.fromkeys(
        (
            "streamed",
            "http_status",
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "usage_reported",
            "fallback_attempt",
            "request_bytes",
            "response_bytes",
        ),
        (_INTEGER, True),
    ),
    **dict.fromkeys(("cost_micros", "native_cost_micros", "cache_savings_micros"), (_INTEGER, False)),
    "started_at": (_NUMBER, True),
    "duration_ms": (_NUMBER, True),
    **dict.fromkeys(
        ("price_input", "price_cached_input", "price_cache_write", "price_output", "ttft_ms", "output_tps"),
        (_NUMBER, False),
    ),
}
_NUMBER_LIMIT = 2**53


def storable(row: dict[str, Any]) -> bool:
    """Whether `row` (read back from the spill file) fits the calls table."""
    for column, (kinds, required) in _COLUMN_KINDS.items():
        value = row.get(column)
        if value is None:
            if required:
                return False
        elif not isinstance(value, kinds):
            return False
        elif isinstance(value, int | float) and not -_NUMBER_LIMIT <= value <= _NUMBER_LIMIT:
            return False
    return True


def _upsert(table: str, keys: tuple[str, ...]) -> str:
    return (
        f"INSERT INTO {table} ({', '.join(keys)}, {', '.join(ROLLUP_SUMS)}, first_at, last_at) "
        f"VALUES ({', '.join('?' for _ in (*keys, *ROLLUP_SUMS))}, ?, ?) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
        + ", ".join(f"{name} = {name} + excluded.{name}" for name in ROLLUP_SUMS)
        + ", first_at = MIN(first_at, excluded.first_at), last_at = MAX(last_at, excluded.last_at)"
    )


_UPSERT_ROLLUP = _upsert("rollup", ROLLUP_KEYS)
_UPSERT_SESSION = _upsert("rollup_session", SESSION_KEYS)


def _sums(rows: list[dict[str, Any]], key_of: Any) -> list[tuple[Any, ...]]:
    sums: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = key_of(row)
        cost, native = row["cost_micros"], row["native_cost_micros"]
        values = (
            1,
            int(row["outcome"] != "completed"),
            int(row["fallback_attempt"] > 0),
            cost or 0,
            int(cost is None),
            native or 0,
            native - cost if cost is not None and native is not None else 0,
            row["input_tokens"],
            row["cache_read_tokens"],
            row["cache_write_tokens"],
            row["output_tokens"],
            row["cache_savings_micros"] or 0,
        )
        current = sums.get(key)
        if current is None:
            sums[key] = [*values, row["started_at"], row["started_at"]]
        else:
            for position, value in enumerate(values):
                current[position] += value
            current[-2] = min(current[-2], row["started_at"])
            current[-1] = max(current[-1], row["started_at"])
    return [(*key, *value) for key, value in sums.items()]


def rollup_deltas(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per-bucket sums of a batch of rows, keyed like the `rollup` table."""
    return _sums(
        rows,
        lambda row: (
            int(row["started_at"] // BUCKET_SECONDS) * BUCKET_SECONDS,
            row["harness"],
            row["role"],
            row["preset"],
            row["provider"],
            row["served_model"],
            row["requested_model"],
        ),
    )


def session_deltas(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per-bucket sums of a batch of rows by session, keyed like the `rollup_session` table."""
    return _sums(
        rows,
        lambda row: (
            int(row["started_at"] // BUCKET_SECONDS) * BUCKET_SECONDS,
            row["session_id"] or "",
            row["harness"],
        ),
    )


_RECORD_FIELDS = tuple(field.name for field in fields(CallRecord))


def spill_file() -> Path:
    """Rows waiting for the database."""
    return locations.home() / "ledger.spill.jsonl"


class Pricer:
    """Turns a `CallRecord` into a priced row (a dict over `COLUMNS`)."""

    def __init__(self, settings: Settings, table: PriceTable | None = None) -> None:
        self.settings = settings
        self._table = table

    @property
    def table(self) -> PriceTable:
        """The price table, loaded on first use."""
        if self._table is None:
            self._table = PriceTable(self.settings.prices)
        return self._table

    def row(self, record: CallRecord) -> dict[str, Any]:
        """The ledger row for one record, with costs at today's prices stored alongside."""
        row = {name: getattr(record, name) for name in _RECORD_FIELDS}
        usage = Usage(
            record.input_tokens,
            record.cache_read_tokens,
            record.cache_write_tokens,
            record.output_tokens,
            record.reasoning_tokens,
        )
        price = self.table.lookup(record.provider, record.served_model) if record.provider else None
        row["cost_micros"] = price.cost_micros(usage) if price else None
        row["cache_savings_micros"] = price.cache_savings_micros(usage) if price else None
        row["price_source"] = price.source if price else None
        per_million = price.per_million() if price else {}
        row["price_input"] = per_million.get("input")
        row["price_cached_input"] = per_million.get("cached_input")
        row["price_cache_write"] = per_million.get("cache_write")
        row["price_output"] = per_million.get("output")
        native_provider = "anthropic" if record.inbound_api == "anthropic" else "openai"
        baseline = (
            self.settings.pricing.baseline_anthropic
            if native_provider == "anthropic"
            else self.settings.pricing.baseline_openai
        )
        native = self.table.lookup(native_provider, record.requested_model) or self.table.lookup(
            native_provider, baseline
        )
        row["native_cost_micros"] = native.cost_micros(usage) if native else None
        row["native_price_source"] = native.source if native else None
        generating_ms = (record.duration_ms - record.ttft_ms) if record.ttft_ms is not None else None
        row["output_tps"] = (
            record.output_tokens / (generating_ms / 1000) if generating_ms and record.output_tokens > 0 else None
        )
        row["streamed"] = int(record.streamed)
        row["usage_reported"] = int(record.usage_reported)
        return {column: row.get(column) for column in COLUMNS}


class Recorder:
    """Queue + supervised writer thread + spill file. Use `start()` once and `close()` at shutdown."""

    def __init__(
        self,
        settings: Settings,
        database: Path | None = None,
        spill: Path | None = None,
        batch_size: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        batch_window: float = 0.2,
        max_queued: int = MAX_QUEUED,
        pricer: Pricer | None = None,
    ) -> None:
        self.pricer = pricer or Pricer(settings)
        self.database = database or locations.ledger_file()
        self.spill = spill or spill_file()
        self.batch_size = batch_size
        self.batch_window = batch_window
        self.max_queued = max_queued
        self._clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Held while the spill file is appended to, read for replay, or cut: `submit` (past the
        # queue bound) and the writer both append to it.
        self._spill_lock = threading.Lock()
        self._supervisor_lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self._alive = False
        self._started = False
        self._finished = False
        self._connection: sqlite3.Connection | None = None
        self._next_replay = 0.0
        self._database_ok = False  # whether the last attempt to write the database worked
        self._spill_offset = 0  # bytes at the head of the spill file already in the database
        self._spill_descriptor: int | None = None
        self._spill_end = 0  # where the next append starts
        self._spill_rows = 0
        # Records and rows on their way: attributes, not locals, so that a writer thread that dies
        # leaves them to the one that replaces it.
        self._taken: list[CallRecord] = []
        self._unsaved: list[dict[str, Any]] = []
        self._overflow: collections.deque[CallRecord] = collections.deque()
        self._reported: set[str] = set()
        self._report_lock = threading.Lock()
        self.last_error: str | None = None
        self.restarts = 0
        self.written = 0
        self.spilled = 0

    def start(self) -> None:
        """Start the writer thread (which first replays any spill file)."""
        self._started = True
        self._launch()

    def submit(self, record: CallRecord) -> None:
        """Queue one record; never blocks, never raises (past the queue bound it goes to the spill file)."""
        try:
            if not self._alive:
                self._supervise()
            if self._queue.qsize() < self.max_queued:
                self._queue.put_nowait(record)
            else:
                self._spill_record(record)
        except Exception as exc:  # the request path never sees a ledger failure; the record is kept
            self._overflow.append(record)
            self._failed("submit", exc, "the call is kept in memory and retried")

    def close(self, timeout: float = 10.0) -> None:
        """Write everything queued, then stop (a dead writer is restarted to do it)."""
        deadline = time.monotonic() + timeout
        self._stop_requested.set()
        self._queue.put_nowait(_STOP)
        if not self._started:
            self.start()
        while True:
            if not self._alive and not self._finished:
                self._supervise(closing=True)
            if self._thread is not None:
                self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._finished or time.monotonic() >= deadline:
                break
            if not self._alive:
                self._queue.put_nowait(_STOP)  # the thread that died may have taken the first one

    def health(self) -> dict[str, Any]:
        """The writer's state for /healthz and `switch status` (no secrets); revives a dead writer."""
        alive = self._alive
        spill_bytes = max(0, self._spill_size() - self._spill_offset)
        unsaved = len(self._unsaved) + len(self._overflow)
        report = {
            "ok": alive and not spill_bytes and not unsaved,
            "writer_alive": alive,
            "restarts": self.restarts,
            "queued": self._queue.qsize() + len(self._taken),
            "unsaved": unsaved,
            "spilled_rows": self._spill_rows if spill_bytes else 0,
            "spill_bytes": spill_bytes,
            "written": self.written,
            "last_error": self.last_error,
        }
        if not alive:
            self._supervise()
        return report

    def spill_pending(self) -> bool:
        """Whether rows are waiting in the spill file."""
        return self._spill_size() > self._spill_offset

    # ---- supervision ---------------------------------------------------------------------------

    def _launch(self) -> None:
        thread = threading.Thread(target=self._run, name="switch-ledger-writer", daemon=True)
        self._alive = True
        self._thread = thread
        try:
            thread.start()
        except RuntimeError as exc:  # no thread to be had right now: the next check tries again
            self._alive = False
            self._failed("writer", exc, "calls wait in the queue")

    def _supervise(self, closing: bool = False) -> None:
        # Once `close` began, only `close` restarts a writer: it then stops it again by itself.
        if not self._started or self._finished or (self._stop_requested.is_set() and not closing):
            return
        with self._supervisor_lock:
            if self._alive:
                return
            self.restarts += 1
            log.error("the ledger writer thread had stopped (%s); started a new one", self.last_error or "no error")
            self._launch()

    def _failed(self, stage: str, exc: BaseException, consequence: str) -> None:
        """Remember why `stage` failed; log it once per kind until writing works again."""
        name = type(exc).__name__
        code = errno.errorcode.get(exc.errno, "") if isinstance(exc, OSError) and exc.errno else ""
        kind = f"{stage}:{name}({code})" if code else f"{stage}:{name}"
        with self._report_lock:
            self.last_error = kind
            if kind in self._reported:
                return
            self._reported.add(kind)
        log.warning("ledger %s failed (%s: %s); %s", stage, name, exc, consequence)

    # ---- writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # the thread ends either way: say why; the supervisor restarts it
            self._failed("writer", exc, "the writer thread stopped; the next call restarts it")
        finally:
            self._drop_connection()
            self._alive = False

    def _serve(self) -> None:
        self._replay()
        while True:
            stopping = self._gather()
            try:
                self._flush()
            except Exception as exc:  # whatever it was, the rows stay in memory and are retried
                self._failed("writer", exc, "the rows are kept and retried")
            if stopping:
                break
        if self.spill_pending():
            self._replay()  # rows spilled past the queue bound need not wait for the next start
        with self._spill_lock:
            self._close_spill()
        left = len(self._taken) + len(self._unsaved) + len(self._overflow)
        if left:
            log.error("%d calls could not be recorded: the ledger and its spill file both failed", left)
        self._finished = True

    def _gather(self) -> bool:
        """Take the next batch off the queue; True once `close` asked to stop."""
        if len(self._taken) + len(self._unsaved) >= self.batch_size:
            # The last batch is still unsaved: retry it before taking more, so the queue's bound
            # (and the spill file past it) keeps memory in check.
            if not self._stop_requested.wait(_RETRY_SECONDS):
                return False
            timeout: float | None = None
        else:
            timeout = _RETRY_SECONDS
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return False
        if item is not _STOP and self.batch_window and self._queue.qsize() < self.batch_size:
            # Let the calls of the next moment join this one: one transaction for all of them,
            # and no wake-up of this thread (and fight for the GIL) per proxied call. A backlog
            # of a full batch is written at once.
            time.sleep(self.batch_window)
        stopping = False
        while True:
            if item is _STOP:
                stopping = True
            else:
                self._taken.append(item)
            if len(self._taken) >= self.batch_size and not stopping:
                break
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        return stopping

    def _flush(self) -> None:
        while self._overflow:
            self._taken.append(self._overflow.popleft())
        if self._taken:
            rows = [self._price(record) for record in self._taken]
            self._unsaved.extend(rows)
            self._taken.clear()
        if self._unsaved:
            if self._write(self._unsaved):
                self._unsaved = []
        elif self.spill_pending() and self._clock() >= self._next_replay:
            self._replay()

    def _price(self, record: CallRecord) -> dict[str, Any]:
        try:
            return self.pricer.row(record)
        except Exception as exc:
            self._failed("pricing", exc, "the call is recorded unpriced")
            return self._unpriced(record)

    def _unpriced(self, record: CallRecord) -> dict[str, Any]:
        row = asdict(record)
        row["streamed"] = int(record.streamed)
        row["usage_reported"] = int(record.usage_reported)
        return {column: row.get(column) for column in COLUMNS}

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = open_for_writing(self.database)
        return self._connection

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        connection = self._connect()
        with connection:
            connection.executemany(_INSERT, [tuple(row[c] for c in COLUMNS) for row in rows])
            connection.executemany(_UPSERT_ROLLUP, rollup_deltas(rows))
            connection.executemany(_UPSERT_SESSION, session_deltas(rows))
        self.written += len(rows)
        self._database_ok = True
        with self._report_lock:
            troubles = {kind for kind in self._reported if kind.startswith(_STORAGE_STAGES)}
            self._reported -= troubles  # a new failure of the same kind is news again
        if troubles:
            log.info("the ledger is written again")

    def _write(self, rows: list[dict[str, Any]]) -> bool:
        """Put `rows` in the database, else in the spill file; False when neither took them."""
        # While the database takes rows, spilled ones (past the queue bound) go in first at once;
        # while it does not, it is tried once a second, not once a batch.
        if self.spill_pending() and (self._database_ok or self._clock() >= self._next_replay):
            self._replay()
        if not self.spill_pending():
            try:
                self._insert(rows)
                return True
            except Exception as exc:
                self._failed("database", exc, f"rows go to {self.spill}")
                self._database_ok = False
                self._drop_connection()
        try:
            self._spill(rows)
        except Exception as exc:
            self._failed("spill", exc, "rows stay in memory and are retried")
            return False
        return True

    def _drop_connection(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except sqlite3.Error:
                pass
            self._connection = None

    # ---- spill file ----------------------------------------------------------------------------

    def _spill(self, rows: list[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        with self._spill_lock:
            self._append(data, durable=True)
            self._spill_rows += len(rows)
            self.spilled += len(rows)
        self._next_replay = self._clock() + _RETRY_SECONDS

    def _spill_record(self, record: CallRecord) -> None:
        # Runs on the request path, past the queue bound only: one small append, no fsync (the
        # writer's own batches are fsynced; this path exists so that memory stays bounded).
        line = {_RECORD_MARK: True, **{name: getattr(record, name) for name in _RECORD_FIELDS}}
        data = orjson.dumps(line) + b"\n"
        try:
            with self._spill_lock:
                self._append(data, durable=False)
                self._spill_rows += 1
                self.spilled += 1
        except OSError as exc:
            self._overflow.append(record)
            self._failed("spill", exc, "calls past the queue bound stay in memory and are retried")

    def _append(self, data: bytes, durable: bool) -> None:
        """Append whole lines to the spill file, all or nothing (the caller holds the spill lock)."""
        if self._spill_descriptor is None:
            # Opened once and kept while appends work: past the queue bound, one write per call.
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
            try:
                descriptor = os.open(self.spill, flags, 0o600)
            except FileNotFoundError:
                locations.ensure_private_dir(self.spill.parent)
                descriptor = os.open(self.spill, flags, 0o600)
            try:
                size = os.fstat(descriptor).st_size
                if size and os.pread(descriptor, 1, size - 1) != b"\n":
                    os.write(descriptor, b"\n")  # end a line cut short by a crash, so ours stay whole
                    size += 1
            except OSError:
                os.close(descriptor)
                raise
            self._spill_descriptor, self._spill_end = descriptor, size
        descriptor = self._spill_descriptor
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            if durable:
                os.fsync(descriptor)
        except OSError:
            # No half-written rows: they are kept whole in memory and retried, never doubled.
            try:
                os.ftruncate(descriptor, self._spill_end)
            except OSError:
                pass
            self._close_spill()
            raise
        self._spill_end += len(data)

    def _close_spill(self) -> None:
        """Let go of the append descriptor (the caller holds the spill lock), before the file is cut."""
        if self._spill_descriptor is not None:
            try:
                os.close(self._spill_descriptor)
            except OSError:
                pass
            self._spill_descriptor = None

    def _spill_size(self) -> int:
        try:
            status = self.spill.stat()
        except OSError:
            return 0
        return status.st_size if stat.S_ISREG(status.st_mode) else 0

    def _replay(self) -> None:
        """Move the spill file's rows into the database; on failure they stay in the file."""
        self._next_replay = self._clock() + _RETRY_SECONDS
        start = self._spill_offset
        try:
            with self._spill_lock:  # appends hold it too: what is read here is whole lines
                end = self._spill_size()
                if end <= start:
                    if end == 0 and self.spill.is_file():
                        self._close_spill()
                        self.spill.unlink()  # left empty (by a crash, say): nothing waits
                    return
                with open(self.spill, "rb") as handle:
                    handle.seek(start)
                    data = handle.read(end - start)
                lines = data.count(b"\n")
                self._spill_rows = lines
            lines_read = [line for line in data.splitlines() if line.strip()]
            rows = [row for row in map(self._row_from_spill, lines_read) if row is not None]
            if len(rows) < len(lines_read):
                log.warning("skipped %d damaged lines in %s", len(lines_read) - len(rows), self.spill)
            if rows:
                self._insert(rows)
        except Exception as exc:
            self._failed("replay", exc, f"rows wait in {self.spill}")
            self._database_ok = False
            self._drop_connection()
            return
        with self._spill_lock:
            self._spill_rows -= lines
            self._forget(end)
        log.info("replayed %d spilled rows into the ledger", len(rows))

    def _row_from_spill(self, line: bytes) -> dict[str, Any] | None:
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None  # a line cut short by a crash mid-write
        if not isinstance(item, dict):
            return None
        if item.get(_RECORD_MARK) is True:
            try:
                row = self._price(CallRecord(**{name: item[name] for name in _RECORD_FIELDS if name in item}))
            except TypeError:
                row = None
        else:
            row = {column: item.get(column) for column in COLUMNS}
        return row if row is not None and storable(row) else None

    def _forget(self, end: int) -> None:
        """Drop the spill file's first `end` bytes, now in the database (the caller holds the lock)."""
        self._close_spill()
        try:
            if self._spill_size() <= end:
                self.spill.unlink(missing_ok=True)
            else:  # `submit` appended while the rows were replayed: keep only what it added
                with open(self.spill, "rb") as handle:
                    handle.seek(end)
                    tail = handle.read()
                partial = self.spill.with_name(self.spill.name + ".part")
                descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(tail)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(partial, self.spill)
            self._spill_offset = 0
        except OSError as exc:
            # The rows are in the database but stay in the file: skip them from now on.
            self._spill_offset = end
            self._failed("spill", exc, "replayed rows stay in the spill file and are skipped")
