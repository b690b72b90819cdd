"""Abuse the proxy must refuse: oversized bodies, foreign listeners without a token, bad tokens."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import Proxy


def test_body_over_the_limit_is_413_and_the_proxy_keeps_serving(
    kimi_proxy: Proxy, start_proxy: Callable[..., Proxy]
) -> None:
    small = start_proxy("", max_body_bytes=1024)
    body = b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"' + b"x" * 4096 + b'"}]}'
    response = httpx.post(small.url + "/v1/messages", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "request_too_large"
    assert httpx.get(small.url + "/healthz").status_code == 200


def test_non_loopback_listen_is_refused_without_an_access_token() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "switch", "serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0" in result.stderr and "access_token" in result.stderr


def test_access_token_is_required_when_configured(start_proxy: Callable[..., Proxy]) -> None:
    proxy = start_proxy('[server]\naccess_token = "local-secret-token"\n')
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    missing = httpx.post(proxy.url + "/v1/messages", json=body)
    assert missing.status_code == 401
    wrong = httpx.post(proxy.url + "/v1/messages", json=body, headers={"x-switch-token": "nope"})
    assert wrong.status_code == 401
    assert "local-secret-token" not in missing.text + wrong.text
    health = httpx.get(proxy.url + "/healthz", headers={"x-switch-token": "local-secret-token"})
    assert health.status_code == 200


def test_access_token_admits_any_host_name_but_never_a_browser(
    kimi_proxy: Proxy, start_proxy: Callable[..., Proxy]
) -> None:
    # Remote clients of `switch serve --host 0.0.0.0` address the machine by its own name.
    assert kimi_proxy.upstream is not None
    config = kimi_proxy_config(kimi_proxy) + '[server]\naccess_token = "local-secret-token"\n'
    proxy = start_proxy(config)
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    remote = {"host": "build-box.lan:8742", "x-switch-token": "local-secret-token"}
    served = httpx.post(proxy.url + "/v1/messages", json=body, headers=remote)
    assert served.status_code == 200, served.text
    assert served.json()["content"][0]["text"] == "Hello from the fake upstream."
    assert httpx.get(proxy.url + "/healthz", headers={**remote, "host": "10.0.0.7"}).status_code == 200
    no_token = httpx.post(proxy.url + "/v1/messages", json=body, headers={"host": "build-box.lan"})
    assert no_token.status_code == 401
    browser = httpx.post(proxy.url + "/v1/messages", json=body, headers={**remote, "origin": "https://evil.example"})
    assert browser.status_code == 403 and "Origin" in browser.json()["error"]["message"]
    assert len(kimi_proxy.upstream.received) == 1


def test_without_a_token_only_loopback_host_names_are_served(kimi_proxy: Proxy) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    for host in ("build-box.lan:8742", "10.0.0.7", "evil.example.com"):
        refused = httpx.post(kimi_proxy.url + "/v1/messages", json=body, headers={"host": host})
        assert refused.status_code == 403 and "loopback" in refused.json()["error"]["message"]
    for host in ("localhost:1", "127.0.0.1", "[::1]:8742"):
        assert httpx.get(kimi_proxy.url + "/healthz", headers={"host": host}).status_code == 200
    assert kimi_proxy.upstream is not None and kimi_proxy.upstream.received == []


def kimi_proxy_config(proxy: Proxy) -> str:
    """The config.toml text that routes to the same fake upstream as `proxy`."""
    import os

    return (Path(os.environ["SWITCH_HOME"]) / "config.toml").read_text(encoding="utf-8")


def test_deeply_nested_and_unknown_fields(kimi_proxy: Proxy) -> None:
    nested = "[" * 100_000 + "]" * 100_000
    deep = httpx.post(
        kimi_proxy.url + "/v1/messages",
        content=b'{"model":"m","max_tokens":5,"messages":[],"junk":' + nested.encode() + b"}",
        headers={"content-type": "application/json"},
    )
    assert deep.status_code == 400 and deep.json()["error"]["type"] == "invalid_request_error"
    ok = httpx.post(
        kimi_proxy.url + "/v1/messages",
        json={
            "model": "m",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "x"}],
            "brand_new_field": {"a": 1},
        },
    )
    assert ok.status_code == 200


def test_two_hundred_idle_keep_alive_connections_do_not_block_serving(kimi_proxy: Proxy) -> None:
    import socket
    import time

    port = int(kimi_proxy.url.rsplit(":", 1)[1])
    idle: list[socket.socket] = []
    try:
        for _ in range(200):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
            idle.append(sock)
        for sock in idle:
            assert b"200 OK" in sock.recv(4096)
        started = time.monotonic()
        response = httpx.post(
            kimi_proxy.url + "/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
            timeout=10,
        )
        assert response.status_code == 200
        assert time.monotonic() - started < 2
    finally:
        for sock in idle:
            sock.close()
