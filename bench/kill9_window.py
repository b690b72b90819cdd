"""Rows a `kill -9` of the proxy loses under load: the ledger writer's batch window.

A `switch serve` over a loopback fake upstream answers short non-streamed calls from `--clients` threads;
after `--seconds` the proxy gets SIGKILL. The figure is the calls whose answer reached a client and whose
row is not in the ledger (they sat in the writer's queue: its 0.2 s batch window plus the write in progress).

    python bench/kill9_window.py [--clients 8] [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fake_upstream import FakeChatUpstream  # noqa: E402
from tests.servers import free_port, serve, start_serve  # noqa: E402

BODY = {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


def main() -> None:
    """Drive load, SIGKILL the proxy, count answered calls without a row."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=3.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory, serve(FakeChatUpstream()) as url:
        home = Path(directory)
        (home / "config.toml").write_text(f'[providers.baseten]\nbase_url = "{url}/v1"\n', encoding="utf-8")
        port = free_port()
        proxy = start_serve(port, {"SWITCH_HOME": str(home), "BASETEN_API_KEY": "sk-bench"})
        answered = 0
        lock = threading.Lock()
        stop = threading.Event()

        def client() -> None:
            nonlocal answered
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                while not stop.is_set():
                    try:
                        response = http.post("/v1/messages", json=BODY)
                    except httpx.HTTPError:
                        return
                    if response.status_code == 200:
                        with lock:
                            answered += 1

        threads = [threading.Thread(target=client) for _ in range(options.clients)]
        for thread in threads:
            thread.start()
        time.sleep(options.seconds)
        with lock:
            # Answers counted up to the kill; a few more may complete in the instant before it lands.
            os.kill(proxy.pid, signal.SIGKILL)
            answered_at_kill = answered
        stop.set()
        for thread in threads:
            thread.join()
        proxy.wait()
        connection = sqlite3.connect(home / "ledger.db")
        rows = connection.execute("SELECT COUNT(*) FROM calls WHERE outcome = 'completed'").fetchone()[0]
        connection.close()
        rate = answered_at_kill / options.seconds
        lost = max(0, answered_at_kill - rows)
        print(
            f"{answered_at_kill} calls answered in {options.seconds:g} s ({rate:.0f}/s), {rows} rows in the ledger: "
            f"{lost} lost to kill -9 ({lost / rate:.2f} s of calls)"
        )


if __name__ == "__main__":
    main()
