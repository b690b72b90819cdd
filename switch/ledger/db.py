"""Opening the ledger database: WAL, private file modes, migrated schema."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from switch import locations
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
    """A read-only connection for reports and the dashboard, or None when there is no ledger yet."""
    path = path or locations.ledger_file()
    if not path.exists():
        return None
    connection = _read_only(path)
    if _version(connection) < LATEST:
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
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0, check_same_thread=False)
    connection.row_factory = sqlite3.Row
    return connection


def _version(connection: sqlite3.Connection) -> int:
    try:
        row = connection.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0] or 0)
