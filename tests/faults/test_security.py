"""Abuse the proxy must refuse: oversized bodies, foreign listeners without a token, bad tokens."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

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
