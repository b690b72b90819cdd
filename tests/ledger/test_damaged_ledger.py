"""A ledger.db that is not a ledger this switch can read: every read names the file, the real cause and the fix.

Garbage bytes, another program's SQLite database, a ledger from a newer switch and a ledger with damaged
pages are each met with one `switch: …` line (or doctor's and status's finding) that says what is wrong and
to move the file aside; the file is never touched; and moving it aside as told gets a new ledger that
takes the calls the proxy spilled meanwhile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.config import load_settings
from switch.errors import LedgerError
from switch.ledger.db import ledger_problem, open_read_only
from switch.ledger.migrations import LATEST
from switch.ledger.recorder import Recorder
from tests.commands import run_switch
from tests.ledger_seed import kimi_call, pricer_for, seed_ledger
from tests.servers import wait_until

TRACEBACK = "Traceback (most recent call last)"


def garbage(path: Path) -> None:
    path.write_text("garbage\n")


def foreign(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    connection.commit()
    connection.close()


def newer(path: Path) -> None:
    seed_ledger(path, 3)
    connection = sqlite3.connect(path)
    connection.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)", (LATEST + 7,))
    connection.commit()
    connection.close()


def damaged_pages(path: Path) -> None:
    """A real ledger whose pages after the first (the schema's) are overwritten: its tables cannot be read."""
    seed_ledger(path, 400)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    data[page:] = b"\xa5" * (len(data) - page)
    path.write_bytes(bytes(data))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "garbage": (garbage, "is not an SQLite database"),
    "foreign database": (foreign, "is an SQLite database of another program (tables: photos)"),
    "newer switch": (newer, f"was written by a newer switch (ledger schema {LATEST + 7}"),
    "damaged pages": (damaged_pages, "is damaged"),
}
READS = [["spend"], ["spend", "--by", "model"], ["calls"], ["export"], ["export", "--output", "{out}"]]


@pytest.mark.parametrize("case", list(DAMAGE))
def test_every_ledger_report_names_the_file_the_cause_and_the_fix(
    isolated_home: Path, tmp_path: Path, case: str
) -> None:
    make, cause = DAMAGE[case]
    path = isolated_home / "ledger.db"
    make(path)
    before = path.read_bytes()
    for template in READS:
        args = [part.replace("{out}", str(tmp_path / "out.csv")) for part in template]
        result = run_switch(*args)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and result.stdout == "", (args, result.stdout, result.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"switch: {path}: {cause}"), (args, result.stderr)
        fix = "upgrade switch" if case == "newer switch" else f"move it aside (`mv {path} {path}.old`)"
        assert fix in lines[0]
    assert not (tmp_path / "out.csv").exists()
    assert path.read_bytes() == before


@pytest.mark.parametrize("case", list(DAMAGE))
def test_status_and_doctor_name_the_real_cause_not_a_lock_or_disk_space(isolated_home: Path, case: str) -> None:
    make, cause = DAMAGE[case]
    path = isolated_home / "ledger.db"
    (isolated_home / "config.toml").write_text("[server]\nport = 9\n")  # nothing listens on port 9
    make(path)
    before = path.read_bytes()
    for command in ("status", "doctor"):
        result = run_switch(command)
        shown = result.stdout + result.stderr
        assert result.returncode == 1 and TRACEBACK not in shown, shown
        assert f"{path}: {cause}" in shown, shown
        assert "free disk space" not in shown and "close what holds" not in shown
    assert path.read_bytes() == before


def test_the_statusline_stays_one_neutral_line_on_a_damaged_ledger(isolated_home: Path) -> None:
    garbage(isolated_home / "ledger.db")
    result = run_switch("statusline", stdin='{"session_id": "s-1"}')
    assert (result.returncode, result.stdout, result.stderr) == (0, "switch · ledger unavailable\n", "")


def test_moving_a_damaged_ledger_aside_as_told_starts_a_new_one_with_the_spilled_calls(isolated_home: Path) -> None:
    path = isolated_home / "ledger.db"
    garbage(path)
    recorder = Recorder(pricer_for(load_settings()), database=path)
    recorder.start()
    try:
        recorder.submit(kimi_call(1_780_000_000.0))
        wait_until(lambda: recorder.health()["spill_bytes"] > 0, 30)
        message = ledger_problem(path)
        assert message is not None and "move it aside" in message
        path.rename(path.with_name("ledger.db.old"))  # the fix, as the message gives it
        recorder.submit(kimi_call(1_780_000_001.0))
        wait_until(lambda: path.exists() and ledger_problem(path) is None and _count(path) == 2, 30)
    finally:
        recorder.close()
    assert path.with_name("ledger.db.old").read_text() == "garbage\n"


def _count(path: Path) -> int:
    connection = open_read_only(path)
    assert connection is not None
    try:
        return int(connection.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
    finally:
        connection.close()


@given(content=st.binary(max_size=4096))
def test_any_bytes_in_place_of_the_ledger_are_read_or_refused_with_the_file_named(content: bytes) -> None:
    import os

    path = Path(os.environ["SWITCH_HOME"]) / "ledger.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    path.write_bytes(content)
    try:
        connection = open_read_only(path)
    except LedgerError as exc:
        assert exc.message.startswith(f"{path}: ")
    else:
        if connection is not None:
            connection.close()
    problem = ledger_problem(path)
    assert problem is None or problem.startswith(f"{path}: ")


def test_a_running_proxy_on_a_damaged_ledger_spills_and_status_names_the_cause_then_the_fix_works(
    isolated_home: Path,
) -> None:
    import httpx

    from tests.servers import free_port, serve_process

    path = isolated_home / "ledger.db"
    garbage(path)
    port = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {port}\n")
    with serve_process(port, {}):
        # A call refused for its body still gets its row: into the spill file, as the database takes none.
        refused = httpx.post(f"http://127.0.0.1:{port}/v1/messages", content=b"{not json", timeout=30)
        assert refused.status_code == 400
        health = lambda: httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["ledger"]  # noqa: E731
        wait_until(lambda: health()["spill_bytes"] > 0, 30, "the row to be spilled")
        status = run_switch("status")
        assert status.returncode == 0, status.stderr
        assert f"rows wait in the spill file: {path}: is not an SQLite database" in status.stdout, status.stdout
        assert f"mv {path} {path}.old" in status.stdout and "free disk space" not in status.stdout
        path.rename(path.with_name("ledger.db.old"))  # the fix, as status gives it
        wait_until(lambda: health()["spill_bytes"] == 0 and path.exists() and _count(path) == 1, 30, "the replay")
        assert "warning" not in run_switch("status").stdout
    assert path.with_name("ledger.db.old").read_text() == "garbage\n"
