"""The only writer of the ledger: a queue and one thread, off the request path.

`submit` never blocks: it puts the record on a queue. The writer thread takes records in batches,
prices them (so no price lookup ever runs on the request path), and inserts each batch in one
transaction. When SQLite cannot be written (locked by another process, read-only, full), the rows
go to a spill file (JSON lines, flushed per batch) and are replayed once writing works again, and
at the next start. `close` drains the queue before it returns. Rows never hold prompts or keys.
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
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
from switch.ledger.migrations import ROLLUP_KEYS, ROLLUP_SUMS, SESSION_KEYS
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
    """Per-hour sums of a batch of rows, keyed like the `rollup` table."""
    return _sums(
        rows,
        lambda row: (
            int(row["started_at"] // 3600) * 3600,
            row["harness"],
            row["role"],
            row["preset"],
            row["provider"],
            row["served_model"],
            row["requested_model"],
        ),
    )


def session_deltas(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Per-hour sums of a batch of rows by session, keyed like the `rollup_session` table."""
    return _sums(rows, lambda row: (int(row["started_at"] // 3600) * 3600, row["session_id"] or "", row["harness"]))


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
    """Queue + writer thread + spill file. Use `start()` once and `close()` at shutdown."""

    def __init__(
        self,
        settings: Settings,
        database: Path | None = None,
        spill: Path | None = None,
        batch_size: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        batch_window: float = 0.2,
    ) -> None:
        self.pricer = Pricer(settings)
        self.database = database or locations.ledger_file()
        self.spill = spill or spill_file()
        self.batch_size = batch_size
        self.batch_window = batch_window
        self._clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="switch-ledger-writer", daemon=True)
        self._connection: sqlite3.Connection | None = None
        self._next_replay = 0.0
        self.written = 0
        self.spilled = 0

    def start(self) -> None:
        """Start the writer thread (which first replays any spill file)."""
        self._thread.start()

    def submit(self, record: CallRecord) -> None:
        """Queue one record; never blocks."""
        self._queue.put_nowait(record)

    def close(self, timeout: float = 10.0) -> None:
        """Write everything queued, then stop."""
        self._queue.put_nowait(_STOP)
        self._thread.join(timeout)

    # ---- writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
        self._replay()
        stopping = False
        while not stopping:
            batch: list[CallRecord] = []
            try:
                item = self._queue.get(timeout=1.0)
            except queue.Empty:
                if self.spill_pending():
                    self._replay()
                continue
            if item is not _STOP and self.batch_window and self._queue.qsize() < self.batch_size:
                # Let the calls of the next moment join this one: one transaction for all of them,
                # and no wake-up of this thread (and fight for the GIL) per proxied call. A backlog
                # of a full batch is written at once.
                time.sleep(self.batch_window)
            while True:
                if item is _STOP:
                    stopping = True
                else:
                    batch.append(item)
                if len(batch) >= self.batch_size:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                rows = []
                for record in batch:
                    try:
                        rows.append(self.pricer.row(record))
                    except (ArithmeticError, ValueError, TypeError) as exc:
                        log.error("could not price a call record: %s", exc)
                        rows.append(self._unpriced(record))
                self._write(rows)
        if self._connection is not None:
            self._connection.close()

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

    def _write(self, rows: list[dict[str, Any]]) -> None:
        if self.spill_pending() and self._clock() >= self._next_replay:
            self._replay()
        if not self.spill_pending():
            try:
                self._insert(rows)
                return
            except sqlite3.Error as exc:
                log.warning("ledger not writable (%s); keeping %d rows in %s", exc, len(rows), self.spill)
                self._drop_connection()
        self._spill(rows)

    def _drop_connection(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except sqlite3.Error:
                pass
            self._connection = None

    def _spill(self, rows: list[dict[str, Any]]) -> None:
        locations.ensure_private_dir(self.spill.parent)
        descriptor = os.open(self.spill, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "ab") as handle:
            handle.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
            handle.flush()
            os.fsync(handle.fileno())
        self.spilled += len(rows)
        self._next_replay = self._clock() + 1.0

    def spill_pending(self) -> bool:
        """Whether rows are waiting in the spill file."""
        try:
            return self.spill.stat().st_size > 0
        except FileNotFoundError:
            return False

    def _replay(self) -> None:
        if not self.spill_pending():
            return
        self._next_replay = self._clock() + 1.0
        rows: list[dict[str, Any]] = []
        for line in self.spill.read_bytes().splitlines():
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line cut short by a crash mid-write
            if isinstance(row, dict):
                rows.append({column: row.get(column) for column in COLUMNS})
        try:
            if rows:
                self._insert(rows)
        except sqlite3.Error as exc:
            log.info("ledger still not writable (%s); %d rows wait in %s", exc, len(rows), self.spill)
            self._drop_connection()
            return
        self.spill.unlink(missing_ok=True)
        log.info("replayed %d spilled rows into the ledger", len(rows))
