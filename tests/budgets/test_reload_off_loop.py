"""A budget edit rebuilds the budgets off the event loop: a stream in flight never waits for the ledger read,
even when the ledger is locked and that read takes seconds; the new budgets arrive once it is done."""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import httpx
import orjson

from tests.budgets.conftest import CONFIG, PRICE
from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream, Reply, Turn, chat_chunks
from tests.ledger.test_ledger_proxy import DatabaseLock
from tests.servers import free_port, serve, serve_process, wait_until

CAP = '[[budgets]]\nscope = "total"\nperiod = "day"\nlimit_usd = 50.0\n'
CHUNKS = 150
DELAY = 0.02


def _stream_chunks() -> list[bytes]:
    turn = Turn(text="x" * CHUNKS, fragment=1, completion_tokens=CHUNKS)
    events = chat_chunks(turn, "moonshotai/Kimi-K3", itertools.count())
    return [b"data: " + orjson.dumps(event) + b"\n\n" for event in events] + [b"data: [DONE]\n\n"]


def test_a_budget_edit_during_a_stream_does_not_stall_it_on_a_locked_ledger(isolated_home: Path) -> None:
    fake = FakeChatUpstream()
    port = free_port()
    config = isolated_home / "config.toml"
    with serve(fake) as url:

        def configure(budgets: str) -> None:
            text = CONFIG.format(url=url + "/v1", price=PRICE, budgets=budgets)
            config.write_text(f"[server]\nport = {port}\n" + text, encoding="utf-8")

        configure("")
        # Held from before the proxy starts: reading this period's spend waits on SQLite's busy timeout.
        with DatabaseLock(isolated_home / "ledger.db") as lock:
            with serve_process(port, {"BASETEN_API_KEY": FAKE_BASETEN_KEY}):
                fake.script(Reply(200, _stream_chunks(), delay_between=DELAY))
                arrivals: list[float] = []
                first = threading.Event()

                def read() -> None:
                    body = {"model": "gpt-4o", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
                    with httpx.stream(
                        "POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60
                    ) as response:
                        for _piece in response.iter_raw():
                            arrivals.append(time.monotonic())
                            first.set()

                reader = threading.Thread(target=read)
                reader.start()
                assert first.wait(20)
                configure(CAP)
                reader.join(60)
                assert not reader.is_alive()
                gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
                # The stream spans several config polls (every 0.5 s): the reload happened inside it.
                assert arrivals[-1] - arrivals[0] > 1.0
                assert max(gaps) < 0.5, f"the stream stalled {max(gaps):.2f} s during the reload"
                lock.release()

                def budgets() -> list[object]:
                    return list(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json().get("budgets", []))

                wait_until(lambda: len(budgets()) == 1, timeout=30, what="the edited budgets")
