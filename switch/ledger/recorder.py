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

Before each batch the writer checks that the file it has open is still the one at the ledger's path
(one stat, see `_file_moved`): a ledger.db deleted or replaced while the proxy runs would otherwise
take every later row into an unlinked file. It then reopens the path (a fresh file is created and
migrated) or, when that fails, spills; `health()` says `file_changed` until a batch is written again.
The old file's WAL is still at the path (SQLite cannot checkpoint into a moved file): opened with the
new file it would lay the old pages over it, so it is moved aside first (`ORPHANED_SUFFIX`).

What reads the calls afterwards (budgets, metrics) is fed by `committed` (`ledger/stream.py`): each
transaction that inserts calls publishes exactly its rows, with their ids, after its commit.
"""

from __future__ import annotations

import collections
import errno
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from switch import locations
from switch.ledger.columns import COLUMNS, INSERT
from switch.ledger.db import open_for_writing
from switch.ledger.give_way import STRAIGHT, Pace
from switch.ledger.plan_quota import write_snapshots
from switch.ledger.pricer import Pricer, unpriced_row
from switch.ledger.record import CallRecord
from switch.ledger.rollups import UPSERT_ROLLUP, UPSERT_SESSION, rollup_deltas, session_deltas
from switch.ledger.safe import bounded_usage, safe_row
from switch.ledger.spill import SpillFile, decode_line, default_path, encode_record, encode_rows, storable
from switch.ledger.stream import CommittedRows

log = logging.getLogger("switch.recorder")

_STOP = object()
MAX_QUEUED = 10_000
"""Records the queue holds at most; past it `submit` appends to the spill file (about 1 KB a record)."""
_RETRY_SECONDS = 1.0
_STORAGE_STAGES = ("database:", "spill:", "replay:", "writer:")
_SIDECARS = ("-wal", "-shm")
WRITER_CACHE_KIB = 512
"""The writer connection's page cache, in KiB."""
ORPHANED_SUFFIX = ".orphaned"
"""Added to the name of a moved or deleted ledger's WAL left at the path (its last writes, kept for recovery)."""


class Recorder:
    """Queue + supervised writer thread (pricing with `pricer`) + spill file. `start()` once, `close()` at shutdown."""

    def __init__(
        self,
        pricer: Pricer,
        database: Path | None = None,
        spill: Path | None = None,
        batch_size: int = 1000,
        clock: Callable[[], float] = time.monotonic,
        batch_window: float = 0.2,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        self.pricer = pricer
        self.database = database or locations.ledger_file()
        self.spill = spill or default_path()
        self._spill_file = SpillFile(self.spill)
        self.batch_size = batch_size
        self.batch_window = batch_window
        self.max_queued = max_queued
        self._clock = clock
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._supervisor_lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._thread: threading.Thread | None = None
        self._alive = False
        self._started = False
        self._finished = False
        self._connection: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file `_connection` has open
        self._sidecar_identity: dict[str, tuple[int, int]] = {}  # the same for its -wal and -shm files
        self.file_changed: str | None = None
        """What happened to the ledger file under the open connection, until a batch lands in the new one."""
        self.reopened = 0
        self._next_replay = 0.0
        self._database_ok = False  # whether the last attempt to write the database worked
        # Records and rows on their way: attributes, not locals, so that a writer thread that dies
        # leaves them to the one that replaces it.
        self._taken: list[CallRecord] = []
        self._unsaved: list[dict[str, Any]] = []
        self._overflow: collections.deque[CallRecord] = collections.deque()
        self._quotas: dict[tuple[str, str], Any] = {}
        self._reported: set[str] = set()
        self._report_lock = threading.Lock()
        self.last_error: str | None = None
        self.restarts = 0
        self.written = 0
        self.spilled = 0
        self.committed = CommittedRows(self.database, self._failed)
        """The stream of committed rows (budgets and metrics consume it): see `switch.ledger.stream`."""
        self.consumers = self.committed.consumers
        self.catch_up = self.committed.catch_up

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

    def submit_quota(self, snapshot: Any) -> None:
        """Queue a plan's changed quota snapshot; past the bound the newest per account waits in memory."""
        if self._queue.qsize() < self.max_queued:
            self._queue.put_nowait(snapshot)
        else:
            self._quotas[(snapshot.provider, snapshot.account)] = snapshot

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
        spill_bytes = max(0, self._spill_file.size() - self._spill_file.offset)
        unsaved = len(self._unsaved) + len(self._overflow)
        report = {
            "ok": alive and not spill_bytes and not unsaved and not self.file_changed,
            "writer_alive": alive,
            "restarts": self.restarts,
            "queued": self._queue.qsize() + len(self._taken),
            "unsaved": unsaved,
            "spilled_rows": self._spill_file.rows if spill_bytes else 0,
            "spill_bytes": spill_bytes,
            "written": self.written,
            "last_error": self.last_error,
            "file_changed": self.file_changed,
            "reopened": self.reopened,
        }
        if not alive:
            self._supervise()
        return report

    def spill_pending(self) -> bool:
        """Whether rows are waiting in the spill file."""
        return self._spill_file.pending()

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
        self._warm_prices()
        self._open_ledger()
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
        self._spill_file.close()
        left = len(self._taken) + len(self._unsaved) + len(self._overflow)
        if left:
            log.error("%d calls could not be recorded: the ledger and its spill file both failed", left)
        self._finished = True

    def _warm_prices(self) -> None:
        # At start, while no call is waiting: indexing LiteLLM's table (100-300 ms of interpreter time)
        # must not fall in the first batch, mid-traffic, nor on the event loop (the limits share the index).
        try:
            self.pricer.warm()
        except Exception as exc:
            self._failed("pricing", exc, "calls are recorded unpriced until the price table can be read")

    def _open_ledger(self) -> None:
        # Also at start: creating and migrating a new ledger is several milliseconds of SQLite work with
        # no point to give way at; in the first batch it held up the calls of the proxy's first moments.
        try:
            self._connect()
        except Exception as exc:  # the first batch tries again, and spills if it must
            self._failed("database", exc, f"rows go to {self.spill} until it can be written")
            self._drop_connection()

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
            elif type(item) is not CallRecord:  # a plan's quota snapshot (`submit_quota`)
                self._quotas[(item.provider, item.account)] = item
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
        pace = Pace()
        if self._taken:
            rows = []
            for record in self._taken:
                rows.append(self._price(record))
                pace.give_way()  # a call arriving meanwhile waits for one row's pricing, not the batch's
            self._unsaved.extend(rows)
            self._taken.clear()
        if self._unsaved:
            if self._write(self._unsaved, pace):
                self._unsaved = []
        elif self.spill_pending() and self._clock() >= self._next_replay:
            self._replay()
        if self._quotas:  # on failure they wait for the next batch (a newer snapshot replacing its account's)
            try:
                write_snapshots(self._connect(), self._quotas)
            except Exception as exc:
                self._failed("database", exc, "plan quotas are kept in memory and retried")
                self._drop_connection()

    def _price(self, record: CallRecord) -> dict[str, Any]:
        """The record's row, priced, made safe for every store, with the budget hold it releases."""
        record = bounded_usage(record)
        try:
            row = self.pricer.row(record)
        except Exception as exc:
            self._failed("pricing", exc, "the call is recorded unpriced")
            row = unpriced_row(record)
        row["budget_hold"] = record.budget_hold if type(record.budget_hold) is int else 0
        return safe_row(row)

    def _connect(self) -> sqlite3.Connection:
        if self._connection is not None and self._file_moved():
            self._drop_connection()
            self.reopened += 1
        if self._connection is None:
            self._connection = open_for_writing(self.database)
            # The writer appends: a small page cache serves it as well as SQLite's 2 MB default, which
            # filled up under load and stayed (measured: 2 MB less RSS after load, for ~3 % more work a row).
            self._connection.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
            self._identity = _identity(self.database)
            self._sidecar_identity = {}
            for suffix in _SIDECARS:
                found = _identity(self.database.with_name(self.database.name + suffix))
                if found is not None:
                    self._sidecar_identity[suffix] = found
        return self._connection

    def _file_moved(self) -> bool:
        """Whether the file at the ledger's path is no longer the one the connection has open (one stat)."""
        try:
            status = os.stat(self.database)
        except FileNotFoundError:
            change = "was deleted"
        except OSError:
            return False  # unreadable directory and the like: the insert says what is wrong
        else:
            if (status.st_dev, status.st_ino) == self._identity:
                return False
            change = "was replaced by another file"
        self.file_changed = f"{self.database} {change} while the proxy ran; later calls go to the file now at that path"
        log.warning("%s", self.file_changed)
        self._move_old_sidecars()
        return True

    def _move_old_sidecars(self) -> None:
        """Move the old file's -wal and -shm out of the new file's way (they are the old file's, not its)."""
        for suffix, identity in self._sidecar_identity.items():
            sidecar = self.database.with_name(self.database.name + suffix)
            if _identity(sidecar) != identity:
                continue  # gone, or the new file's own
            try:
                if suffix == "-wal":
                    sidecar.replace(sidecar.with_name(sidecar.name + ORPHANED_SUFFIX))
                    log.warning("the old ledger's last writes are in %s%s", sidecar, ORPHANED_SUFFIX)
                else:
                    sidecar.unlink()  # an index SQLite rebuilds from the WAL
            except OSError as exc:
                self._failed("database", exc, f"{sidecar} is the old ledger's; move it aside by hand")

    def _insert(self, rows: list[dict[str, Any]], pace: Pace = STRAIGHT) -> None:
        connection = self._connect()
        numbered: list[tuple[int, Sequence[dict[str, Any]]]] = []  # (first id, piece), ids set once committed
        with connection:
            # In pieces, giving way between them (`switch.ledger.give_way`), in one transaction all the same.
            # Each piece's rows get consecutive ids (an INTEGER PRIMARY KEY without AUTOINCREMENT takes the
            # largest plus one, and the transaction holds the write lock), read before its rollups insert theirs.
            for piece in pace.pieces(rows):
                connection.executemany(INSERT, [tuple(row[c] for c in COLUMNS) for row in piece])
                last_id = int(connection.execute("SELECT last_insert_rowid()").fetchone()[0])
                numbered.append((last_id - len(piece) + 1, piece))
                connection.executemany(UPSERT_ROLLUP, rollup_deltas(piece))
                connection.executemany(UPSERT_SESSION, session_deltas(piece))
        for first_id, piece in numbered:
            for row_id, row in enumerate(piece, first_id):
                row["id"] = row_id
        self.committed.publish(rows, pace)
        self.written += len(rows)
        self._database_ok = True
        self.file_changed = None
        with self._report_lock:
            troubles = {kind for kind in self._reported if kind.startswith(_STORAGE_STAGES)}
            self._reported -= troubles  # a new failure of the same kind is news again
        if troubles:
            log.info("the ledger is written again")

    def _write(self, rows: list[dict[str, Any]], pace: Pace = STRAIGHT) -> bool:
        """Put `rows` in the database, else in the spill file; False when neither took them."""
        # While the database takes rows, spilled ones (past the queue bound) go in first at once;
        # while it does not, it is tried once a second, not once a batch.
        if self.spill_pending() and (self._database_ok or self._clock() >= self._next_replay):
            self._replay()
        if not self.spill_pending():
            try:
                self._insert(rows, pace)
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
        self._spill_file.append(encode_rows(rows), len(rows), durable=True)
        self.spilled += len(rows)
        self._next_replay = self._clock() + _RETRY_SECONDS

    def _spill_record(self, record: CallRecord) -> None:
        # Runs on the request path, past the queue bound only: one small append, no fsync (the
        # writer's own batches are fsynced; this path exists so that memory stays bounded).
        try:
            self._spill_file.append(encode_record(record), 1, durable=False)
            self.spilled += 1
        except OSError as exc:
            self._overflow.append(record)
            self._failed("spill", exc, "calls past the queue bound stay in memory and are retried")

    def _replay(self) -> None:
        """Move the spill file's rows into the database; on failure they stay in the file."""
        self._next_replay = self._clock() + _RETRY_SECONDS
        try:
            pending = self._spill_file.read_pending()
            if pending is None:
                return
            lines_read, end, lines = pending
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
        try:
            self._spill_file.forget(end, lines)
        except OSError as exc:
            self._failed("spill", exc, "replayed rows stay in the spill file and are skipped")
        log.info("replayed %d spilled rows into the ledger", len(rows))

    def _row_from_spill(self, line: bytes) -> dict[str, Any] | None:
        item = decode_line(line)
        # A record spilled before pricing is priced here (each replay again: pricing counts nothing);
        # a row spilled by an older switch is made safe as the writer makes its own.
        row = self._price(item) if isinstance(item, CallRecord) else item
        return safe_row(row) if row is not None and storable(row) else None


def _identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at `path`, None when there is none."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino
