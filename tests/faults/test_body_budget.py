"""A total budget for the request bodies all calls hold at once (`[server] max_buffered_body_bytes`).

Eight parallel 30 MB bodies, each under `max_body_bytes`, took the proxy to 1 GB. Now a body that would
take the total over the budget gets a 503 with retry-after in the caller's own format, and its ledger row;
the bytes count until the call that holds them ends. Sizes are a few MiB, so the test stays cheap.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream, Reply
from tests.faults.test_client_faults import MiB, big_request
from tests.faults.test_upstream_faults import PATHS, assert_error_shape
from tests.servers import send_post, wait_until

TICK = b'data: {"choices":[{"index":0,"delta":{"content":"tick "}}]}\n\n'


@pytest.mark.parametrize("api", list(PATHS))
def test_a_body_over_the_total_budget_gets_a_503_and_the_budget_comes_back(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    api: str,
) -> None:
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    window = '[models."baseten/moonshotai/Kimi-K3"]\ncontext_window = 10000000\n'
    proxy = start_proxy(
        f'[providers.baseten]\nbase_url = "{url}"\n{window}',
        max_body_bytes=4 * MiB,
        max_buffered_body_bytes=5 * MiB,
        read_timeout=60.0,
    )
    fake.script(Reply(200, [TICK], delay_before=60))  # the first call stays in flight until its client leaves
    body, _ = big_request(api, 3 * MiB)
    holder = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])))
    try:
        send_post(holder, PATHS[api], body)
        wait_until(lambda: len(fake.received) == 1, what="the first call to reach the upstream")

        refused = httpx.post(proxy.url + PATHS[api], content=body, headers={"content-type": "application/json"})
        assert refused.status_code == 503, refused.text[:300]
        assert refused.headers["retry-after"] == "1"
        assert_error_shape(api, refused.json())
        assert "max_buffered_body_bytes" in refused.json()["error"]["message"]
        assert len(fake.received) == 1  # refused before routing: no upstream saw it
        assert [(r.outcome, r.http_status) for r in proxy.sink.wait(1)] == [("rejected", 503)]
    finally:
        holder.close()
    # The first call ends with its client: its bytes go back to the budget, and the same body now fits.
    proxy.sink.wait(2)
    wait_until(lambda: proxy.app.app.budget.held == 0, what="the first call's body to leave the budget")
    answered = httpx.post(
        proxy.url + PATHS[api], content=body, headers={"content-type": "application/json"}, timeout=60
    )
    assert answered.status_code == 200, answered.text[:300]
