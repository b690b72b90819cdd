"""The uvicorn fast path (switch/proxy/uvicorn_fast.py) reads private fields of uvicorn's httptools
request cycle. These tests check those fields exist on the installed uvicorn, that it is a version
pyproject.toml allows, and that a missing field turns the fast path off instead of breaking a stream."""

from __future__ import annotations

import asyncio
import re
import socket
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
import uvicorn
from packaging.specifiers import SpecifierSet

from switch.proxy import uvicorn_fast
from switch.proxy.exchange import Exchange
from tests.conftest import Proxy, kimi_proxy_on
from tests.fake_upstream import FakeChatUpstream, Turn
from tests.servers import serve, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _allowed_uvicorn() -> SpecifierSet:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [dep for dep in dependencies if re.match(r"uvicorn\b", dep)]
    return SpecifierSet(pin.split("]", 1)[-1] if "]" in pin else pin[len("uvicorn") :])


async def _report_fields(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = orjson.dumps({"missing": uvicorn_fast.missing_fields(send)})
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def test_the_installed_uvicorn_is_one_pyproject_allows() -> None:
    allowed = _allowed_uvicorn()
    assert uvicorn.__version__ in allowed, f"uvicorn {uvicorn.__version__} is outside pyproject's {allowed}"


def test_uvicorns_httptools_cycle_has_every_field_the_fast_path_reads() -> None:
    with serve(_report_fields, http="httptools") as url:
        missing = httpx.get(url + "/", timeout=10).json()["missing"]
    assert missing == [], (
        f"uvicorn {uvicorn.__version__} no longer has {missing} on its httptools request cycle: "
        "update switch/proxy/uvicorn_fast.py (streams fall back to plain ASGI send meanwhile)"
    )


def test_h11_is_not_taken_for_the_httptools_cycle() -> None:
    with serve(_report_fields, http="h11") as url:
        assert httpx.get(url + "/", timeout=10).json()["missing"] == ["send"]


def test_a_missing_field_turns_the_fast_path_off_and_streams_still_complete(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if a uvicorn release had renamed one of the fields.
    monkeypatch.setattr(uvicorn_fast, "CYCLE_FIELDS", (*uvicorn_fast.CYCLE_FIELDS, "renamed_in_a_later_uvicorn"))
    proxy = kimi_proxy_on(fake_chat, start_proxy, monkeypatch, "httptools")
    assert proxy.upstream is not None
    text = "Streamed through plain ASGI send. " * 10
    proxy.upstream.script(Turn(text=text, fragment=7))
    before = uvicorn_fast.direct_streams
    client = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
    with client.messages.stream(model="m", max_tokens=50, messages=[{"role": "user", "content": "x"}]) as stream:
        final = stream.get_final_message()
    assert final.content[-1].text == text  # type: ignore[union-attr]
    assert uvicorn_fast.direct_streams == before
    assert proxy.sink.wait(1)[0].outcome == "completed"


def test_a_client_that_hangs_up_is_heard_even_after_uvicorn_paused_reading_its_socket() -> None:
    # uvicorn pauses reading when a large body's last chunk fills its buffer, and resumes only in
    # `receive`, which the fast path no longer calls: the hang-up went unread, the call held its
    # upstream and its body's bytes for as long as the upstream took (a CI failure, 1 in 3 runs).
    seen: list[str] = []

    async def waits_for_an_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        send.__self__.flow.pause_reading()  # the state uvicorn leaves a large body's socket in
        task = asyncio.current_task()
        assert task is not None
        stop = Exchange(scope, receive, send).watch_client(task)
        try:
            seen.append("waiting")
            await asyncio.Event().wait()  # an upstream that never answers: only the hang-up ends the wait
        except asyncio.CancelledError:
            seen.append("cancelled")
        finally:
            stop()

    with serve(waits_for_an_upstream, http="httptools") as url:
        client = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        client.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        wait_until(lambda: seen == ["waiting"], what="the call to wait on its upstream")
        client.close()
        wait_until(lambda: len(seen) == 2, what="the call to hear its client hang up")
    assert seen == ["waiting", "cancelled"]
