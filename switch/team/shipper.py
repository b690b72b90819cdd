"""The shipper: a daemon thread that copies new local ledger rows to the team server, oldest first.

It reads rows after the cursor from the local ledger (read-only), sends a batch with COPY into a
temporary table, inserts what the server does not have yet (ON CONFLICT DO NOTHING on origin + local
id) and adds exactly those rows to the daily rollup, all in one transaction; only after the commit does
the cursor move. The cursor belongs to the server: on each connection it is read from the server
itself (the highest local id it holds from this origin), so a new, changed, emptied or restored
server gets the whole history, and a crash between commit and cursor re-sends a batch that then
inserts nothing. A row the server refuses as data (a value its types do not take) is found by
halving the batch, set aside locally with the reason (`local.set_aside`), and skipped: the rows
after it still ship. While the server is unreachable it waits with exponential backoff (capped),
and catches up when it returns, paced (resting `pace` times as long as each batch took) so a backlog
never crowds the proxy's own threads. Whatever ends a round (the local ledger, the local state
files, the network, the server) is reported as that side's problem and the loop starts again. The
proxy's request path never touches it: the recorder writes SQLite, this thread only reads it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from switch import locations
from switch.config_team import Team
from switch.team import local
from switch.team.config import redact, where
from switch.team.migrations import LATEST, current_version
from switch.team.sql import CALLS_TABLE, LOCAL_COLUMNS, SHIPPED_COLUMNS, daily_upsert

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("switch.team")

_SELECT = f"SELECT id, {', '.join(LOCAL_COLUMNS)} FROM calls WHERE id > ? ORDER BY id LIMIT ?"
_LOCAL = ", ".join(("local_id", *LOCAL_COLUMNS))
_STAGE = f"CREATE TEMP TABLE switch_incoming ON COMMIT DROP AS SELECT {_LOCAL} FROM {CALLS_TABLE} WITH NO DATA"
# The local rows go as they are read (no per-row Python work to add who sent them): origin, member and
# project are parameters of the insert.
_COPY = f"COPY switch_incoming ({_LOCAL}) FROM STDIN"
_INSERT = (
    f"WITH new AS (INSERT INTO {CALLS_TABLE} ({', '.join(SHIPPED_COLUMNS)}) "
    f"SELECT %s, local_id, %s, %s, {', '.join(LOCAL_COLUMNS)} FROM switch_incoming "
    f"ON CONFLICT (origin, local_id) DO NOTHING RETURNING *) " + daily_upsert("new")
)


class SchemaTooOld(Exception):
    """The server's schema is older than this switch writes: `switch team init` migrates it."""


class LocalLedgerError(Exception):
    """The local ledger could not be read (the team server is not at fault)."""


class Shipper:
    """Ships this home's ledger to the team server in a daemon thread. `start()` once, `stop()` at shutdown."""

    def __init__(
        self,
        team: Team,
        database: Path | None = None,
        batch_size: int = 2000,
        poll_seconds: float = 2.0,
        pace: float = 4.0,
        min_backoff: float = 1.0,
        max_backoff: float = 300.0,
        connect: Callable[[Team], psycopg.Connection[tuple[Any, ...]]] | None = None,
    ) -> None:
        self.team = team
        self.database = database or locations.ledger_file()
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        self.pace = pace
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self._connect = connect
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: psycopg.Connection[tuple[Any, ...]] | None = None
        self._ledger: sqlite3.Connection | None = None
        self.failures = 0
        self.shipped = 0
        self.restarts = 0
        self.last_error: str | None = None
        self._after: int | None = None  # the server's cursor, read from it when connected
        self._refused: dict[int, str] | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name="switch-team-shipper", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to finish its batch and stop; close the connections."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        else:
            self._close()  # used without its thread (`ship_some` called directly)

    def alive(self) -> bool:
        """Whether the shipping thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        # The supervisor: whatever ends a round, even a failure while reporting a failure, is logged
        # and the round starts again after a backoff; only `stop` ends the thread.
        try:
            while not self._stop.is_set():
                try:
                    self._rounds()
                except BaseException as exc:  # noqa: BLE001 - the shipper must outlive any failure
                    self.restarts += 1
                    log.error("the team shipper stopped (%s: %s); starting it again", type(exc).__name__, exc)
                    self._close()
                    self._stop.wait(self.min_backoff)
        finally:
            self._close()

    def _rounds(self) -> None:
        while not self._stop.is_set():
            try:
                caught_up = self.ship_some()
            except Exception as exc:  # noqa: BLE001 - any failure waits and retries; the proxy must not notice
                self._failed(exc)
                self._stop.wait(min(self.max_backoff, self.min_backoff * 2 ** (self.failures - 1)))
                continue
            if caught_up:
                self._stop.wait(self.poll_seconds)

    def ship_some(self, max_batches: int = 20) -> bool:
        """Ship up to `max_batches` batches; True when nothing is left to ship."""
        ledger = self._ledger_connection()
        if ledger is None:
            return True
        started, sent = time.monotonic(), 0
        for _ in range(max_batches):
            batch_started = time.monotonic()
            count = self.ship_batch(ledger)
            sent += count
            if count < self.batch_size or self._stop.is_set():
                break
            # Catching up on a backlog: rest `pace` times as long as the batch took, so the proxy's own
            # threads keep most of the interpreter (the batch's Python work holds the GIL).
            self._stop.wait(self.pace * (time.monotonic() - batch_started))
        if sent or self.last_error is not None or self.failures:
            elapsed = time.monotonic() - started
            self.failures, self.last_error = 0, None
            local.write_status(
                {
                    "server": local.server_key(self.team),
                    "last_error": None,
                    "last_ok_at": time.time(),
                    "rows_per_s": sent / elapsed if elapsed else None,
                }
            )
        return sent < self.batch_size * max_batches

    def ship_batch(self, ledger: sqlite3.Connection) -> int:
        """Send the next batch after the cursor and move the cursor; returns how many rows were read."""
        after = self._after if self._after is not None else local.cursor(self.team)
        rows = self._read(ledger, after)
        if not rows:
            self._check_replaced(ledger, after)
            return 0
        server = self._server_connection()
        if self._after != after:  # the server holds more (or less) than the local cursor said
            after = self._after if self._after is not None else after
            rows = self._read(ledger, after)
            if not rows:
                return 0
        refused = self._refused_rows()
        sending = [row for row in rows if row[0] not in refused] if refused else rows
        if sending:
            self._send(server, sending)
        self._after = int(rows[-1][0])
        local.advance(self.team, self._after)
        self.shipped += len(sending)
        return len(rows)

    def _read(self, ledger: sqlite3.Connection, after: int) -> list[tuple[Any, ...]]:
        try:
            return ledger.execute(_SELECT, (after, self.batch_size)).fetchall()
        except sqlite3.Error as exc:
            raise LocalLedgerError(f"could not read the local ledger {self.database}: {exc}") from exc

    def _send(self, server: psycopg.Connection[tuple[Any, ...]], rows: list[tuple[Any, ...]]) -> None:
        """Insert `rows` in one transaction; a batch the server refuses as data is halved until the bad row is found."""
        import psycopg

        origin, member, project = local.origin(), self.team.member, self.team.project
        try:
            with server.transaction():
                server.execute(_STAGE)
                with server.cursor().copy(_COPY) as copy:
                    for row in rows:
                        copy.write_row(row)
                server.execute(_INSERT, (origin, member, project))
        except (psycopg.DataError, psycopg.IntegrityError) as exc:
            if len(rows) > 1:
                middle = len(rows) // 2
                self._send(server, rows[:middle])
                self._send(server, rows[middle:])
                return
            reason = redact(" ".join(str(exc).split()) or type(exc).__name__, self.team)
            local_id = int(rows[0][0])
            local.set_aside(self.team, local_id, reason)
            self._refused_rows()[local_id] = reason
            log.warning("the team server refused local call %d (%s); it stays in the local ledger", local_id, reason)

    def _refused_rows(self) -> dict[int, str]:
        if self._refused is None:
            self._refused = local.refused(self.team)
        return self._refused

    def _check_replaced(self, ledger: sqlite3.Connection, after: int) -> None:
        # A ledger deleted and started again reuses ids the server already holds under this origin:
        # give its rows a new origin, or they would be taken for re-sent ones and dropped.
        try:
            row = ledger.execute("SELECT COALESCE(MAX(id), 0) FROM calls").fetchone()
        except sqlite3.Error as exc:
            raise LocalLedgerError(f"could not read the local ledger {self.database}: {exc}") from exc
        if after and int(row[0]) < after:
            local.origin(renew=True)
            local.advance(self.team, 0)
            self._after = None
            self._close_server()  # the next connection reads the new origin's cursor (0) from the server

    def _ledger_connection(self) -> sqlite3.Connection | None:
        if self._ledger is None:
            if not self.database.exists():
                return None
            self._ledger = sqlite3.connect(
                f"file:{self.database}?mode=ro", uri=True, timeout=5.0, check_same_thread=False
            )
        return self._ledger

    def _server_connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._server is None or self._server.closed:
            if self._connect is not None:
                server = self._connect(self.team)
            else:
                from switch.team.server import connect

                server = connect(self.team)
            version = current_version(server)
            if version < LATEST:
                server.close()
                raise SchemaTooOld(
                    f"the team server's schema is at version {version}, this switch writes version {LATEST}; "
                    "run `switch team init`"
                )
            found = server.execute(
                f"SELECT COALESCE(MAX(local_id), 0) FROM {CALLS_TABLE} WHERE origin = %s", (local.origin(),)
            ).fetchone()
            # What this server holds is the cursor: a new server starts at 0 and gets the whole history.
            self._after = int(found[0]) if found else 0
            local.advance(self.team, self._after)
            self._server = server
        return self._server

    def _failed(self, exc: BaseException) -> None:
        self._close_server()
        self.failures += 1
        message = self._blame(exc)
        if message != self.last_error:
            log.warning("not shipping to the team ledger: %s (retrying)", message)
        self.last_error = message
        try:
            status = local.read_status()
            local.write_status(
                {**status, "server": local.server_key(self.team), "last_error": message, "failed_at": time.time()}
            )
        except OSError as error:  # the status is for reports: the shipper goes on without it
            log.warning("could not write the team shipper's status in %s: %s", local.team_dir(), error)

    def _blame(self, exc: BaseException) -> str:
        """One line naming the side that failed: local ledger, local state, network, or the server."""
        import psycopg

        from switch.team.server import TeamServerError, describe

        detail = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, SchemaTooOld | LocalLedgerError):
            return str(exc)
        if isinstance(exc, TeamServerError):  # could not connect: says where, and what to check
            return exc.message
        if isinstance(exc, sqlite3.Error):
            return f"could not read the local ledger {self.database}: {detail}"
        if isinstance(exc, psycopg.OperationalError):
            return describe(exc, self.team)  # could not reach or log in to the server
        if isinstance(exc, psycopg.Error):
            return redact(f"the team server {where(self.team)} failed the batch: {detail}", self.team)
        if isinstance(exc, OSError):
            return f"could not write the shipper's state in {local.team_dir()}: {detail}"
        return redact(f"{type(exc).__name__}: {detail}", self.team)

    def _close_server(self) -> None:
        server, self._server = self._server, None
        self._after = None  # read again from the server on the next connection
        if server is not None:
            try:
                server.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is dropped either way
                pass

    def _close(self) -> None:
        self._close_server()
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None


def start_shipper(settings: Any) -> Shipper | None:
    """Start shipping when config.toml has a [team] table; None (and no psycopg import) otherwise."""
    team = getattr(settings, "team", None)
    if team is None:
        return None
    shipper = Shipper(team)
    shipper.start()
    return shipper
