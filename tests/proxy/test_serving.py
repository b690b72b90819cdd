"""switch's own server (switch.proxy.serving): what `switch serve` does around the calls, without uvicorn.

The date every answer carries, a stop by SIGTERM or Ctrl-C that closes the ledger and says so before the
process ends the way the signal would have ended it, and a `--log-level` that is checked, not a traceback.
"""

from __future__ import annotations

import email.utils
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from switch.proxy.serving import http_date
from tests.commands import run_switch
from tests.conftest import Proxy
from tests.servers import free_port, serve, stopped_serve, wait_until

IMF_FIXDATE = re.compile(
    rb"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    rb"\d\d:\d\d:\d\d GMT$"
)


@given(st.floats(min_value=0, max_value=253_402_300_799, allow_nan=False))
def test_the_date_header_is_what_the_standard_library_writes_in_any_locale(seconds: float) -> None:
    assert http_date(seconds) == email.utils.formatdate(seconds, usegmt=True).encode()


def test_every_answer_carries_the_current_date(start_proxy: Callable[..., Proxy]) -> None:
    proxy = start_proxy()

    def stamped() -> float:
        date = httpx.get(proxy.url + "/healthz", timeout=10).headers["date"]
        assert IMF_FIXDATE.match(date.encode()), date
        return email.utils.parsedate_to_datetime(date).timestamp()

    before = time.time()
    first = stamped()
    assert before - 1.5 <= first <= time.time() + 0.5
    # Refreshed as the clock turns: a later answer carries a later second (a date set once at start would not).
    wait_until(lambda: stamped() > first, timeout=10, what="the date header to move on")


def test_sigterm_closes_the_ledger_says_so_and_ends_the_process_by_the_signal(isolated_home: Path) -> None:
    # A service manager stops the proxy with SIGTERM: the last line tells where the calls went, and the exit
    # status is the signal's, which systemd counts as a clean stop.
    stopped = stopped_serve(signal.SIGTERM)
    assert stopped.returncode == -signal.SIGTERM, stopped.stderr
    assert stopped.stdout.splitlines()[-1] == "switch proxy stopped; 0 calls written to the ledger"
    assert "Traceback" not in stopped.stderr


def test_a_log_level_that_is_not_one_is_refused_in_one_line(isolated_home: Path) -> None:
    result = run_switch("serve", "--port", str(free_port()), "--log-level", "loud")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("switch: ") and "'loud' is not a log level" in lines[0], lines
    assert "debug" in lines[0]


def test_a_debug_log_level_shows_the_proxys_own_messages(isolated_home: Path) -> None:
    # Before, `--log-level` set only uvicorn's loggers: switch's own info and debug lines never showed.
    stopped = stopped_serve(signal.SIGINT, "--log-level", "DEBUG")
    assert stopped.returncode == 130, stopped.stderr
    assert re.search(r"^(DEBUG|INFO) switch\.", stopped.stderr, re.MULTILINE), stopped.stderr


def test_without_uvloop_the_server_runs_on_asyncios_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # pyproject.toml leaves uvloop out on Windows and PyPy: `switch serve` must still serve there.
    import asyncio

    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
    loops: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        loops.append(type(asyncio.get_running_loop()).__module__)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    with serve(app, http="switch") as url:
        answer = httpx.get(url + "/", timeout=10)
    assert answer.status_code == 200 and answer.text == "ok"
    assert loops and not loops[0].startswith("uvloop"), loops


def _raising_lifespan_app(returns: bool = False) -> Any:
    """An app that answers calls but raises on the lifespan scope (or just returns) before its start-up completes."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            if returns:
                return
            raise RuntimeError("the ledger could not be opened")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


@pytest.mark.parametrize("returns", [False, True], ids=["raises", "returns"])
def test_a_required_lifespan_that_ends_before_start_up_completes_refuses_to_serve(
    caplog: pytest.LogCaptureFixture, returns: bool
) -> None:
    # The proxy's start-up opens the ledger: an app that dies there must not be served as if it had no lifespan.
    with caplog.at_level("ERROR", logger="switch"), pytest.raises(RuntimeError, match="did not start"):
        with serve(_raising_lifespan_app(returns), http="switch", lifespan_required=True):
            pass
    assert ("ended without completing" if returns else "the ledger could not be opened") in caplog.text


def test_an_app_without_a_lifespan_is_served_where_none_is_required() -> None:
    with serve(_raising_lifespan_app(), http="switch") as url:
        answer = httpx.get(url + "/", timeout=10)
    assert answer.status_code == 200 and answer.text == "ok"
