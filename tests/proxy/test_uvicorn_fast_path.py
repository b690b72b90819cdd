"""The uvicorn fast path (switch/proxy/uvicorn_fast.py) reads private fields of uvicorn's httptools
request cycle. These tests check those fields exist on the installed uvicorn, that it is a version
pyproject.toml allows, and that a missing field turns the fast path off instead of breaking a stream."""

from __future__ import annotations

import re
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
from tests.conftest import Proxy, kimi_proxy_on
from tests.fake_upstream import FakeChatUpstream, Turn
from tests.servers import serve

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
