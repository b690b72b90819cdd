"""Opening the ledger database: WAL, private file modes, migrated schema."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from switch import locations
from switch.errors import LedgerError
from switch.ledger.migrations import LATEST, migrate


def open_for_writing(path: Path | None = None, busy_timeout: float = 0.25) -> sqlite3.Connection:
    """A connection for the single writer; creates and migrates the database as needed."""
    path = path or locations.ledger_file()
    locations.ensure_private_dir(path.parent)
    if not path.exists():
        descriptor = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(descriptor)
    connection = sqlite3.connect(path, timeout=busy_timeout, check_same_thread=False)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        migrate(connection)
    except BaseException:
        connection.close()  # locked or damaged: the caller tries again later with a new one
        raise
    return connection


def open_read_only(path: Path | None = None) -> sqlite3.Connection | None:
    """A read-only connection for reports and the dashboard, or None when there is no ledger yet.

    Raises LedgerError (naming the file, the cause and the fix) when the file is not a ledger this switch reads.
    """
    path = path or locations.ledger_file()
    if not path.exists():
        return None
    connection = _read_only(path)
    if _checked_version(connection, path) < LATEST:
        # A ledger from an older switch that no proxy has opened since: the reports read the
        # latest schema, so migrate it first (atomically; a running writer may do it at once too).
        connection.close()
        try:
            open_for_writing(path, busy_timeout=5.0).close()
        except (sqlite3.Error, OSError):
            pass  # a read-only copy or a locked file: report what can be read
        connection = _read_only(path)
    return connection


def _read_only(path: Path) -> sqlite3.Connection:
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
    except sqlite3.Error as exc:
        raise LedgerUnreadable(unreadable_message(path, exc)) from None
    connection.row_factory = sqlite3.Row
    return connection


class LedgerUnreadable(LedgerError, sqlite3.DatabaseError):
    """The ledger file cannot be read as a switch ledger.

    Also an sqlite3.DatabaseError, so every reader that already survives a failed read (the proxy's budget
    gate, the dashboard's panes) survives this one, now with the real cause and the fix as its text.
    """


MOVE_ASIDE = "move it aside (`mv {path} {path}.old`): switch starts a new ledger there and the old file stays as it is"


def unreadable_message(path: Path, exc: BaseException) -> str:
    """One line for a ledger SQLite refused: the file, what is really wrong with it, and the fix."""
    text = str(exc)
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
        cause = "is not an SQLite database (damaged, or another file in its place)"
    elif isinstance(exc, sqlite3.DatabaseError) and "malformed" in text:
        cause = "is damaged (SQLite: database disk image is malformed)"
    elif not os.access(path, os.R_OK):
        return f"{path}: cannot be read (permission denied); give yourself read access (`chmod u+rw {path}`)"
    elif isinstance(exc, sqlite3.OperationalError) and "locked" in text:
        return f"{path}: is locked by another program ({text}); close it and try again"
    else:
        cause = f"cannot be read as a ledger (SQLite: {text})"
    return f"{path}: {cause}; {MOVE_ASIDE.format(path=path)}"


def _checked_version(connection: sqlite3.Connection, path: Path) -> int:
    """The ledger's schema version; LedgerError when the file is no ledger this switch can read."""
    try:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = _version(connection) if "schema_migrations" in tables else 0
    except sqlite3.Error as exc:
        connection.close()
        raise LedgerUnreadable(unreadable_message(path, exc)) from None
    # No tables at all is a ledger the writer has created but not yet migrated (or an empty file): version 0.
    if tables and not {"schema_migrations", "calls"} <= tables:
        connection.close()
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise LedgerUnreadable(
            f"{path}: is an SQLite database of another program (tables: {shown}), not a switch ledger; "
            + MOVE_ASIDE.format(path=path)
        )
    if version > LATEST:
        connection.close()
        raise LedgerUnreadable(
            f"{path}: was written by a newer switch (ledger schema {version}; this one reads up to {LATEST}); "
            "upgrade switch (`pip install -U switch-proxy`)"
        )
    return version


def _version(connection: sqlite3.Connection) -> int:
    try:
        row = connection.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0] or 0)


def ledger_problem(path: Path | None = None) -> str | None:
    """Why the ledger cannot be read right now, in one line with the fix (None: it reads, or there is none yet)."""
    path = path or locations.ledger_file()
    try:
        connection = open_read_only(path)
        if connection is None:
            return None
        try:
            # The newest row: a damaged page under the calls table shows here, not in the schema alone.
            connection.execute("SELECT * FROM calls ORDER BY id DESC LIMIT 1").fetchall()
        finally:
            connection.close()
    except LedgerError as exc:
        return exc.message
    except sqlite3.Error as exc:
        return unreadable_message(path, exc)
    return None
