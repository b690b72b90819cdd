"""`switch doctor --probe` reaches each upstream API exactly as the proxy does: same path, same credentials."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from switch.cli import app
from tests.conftest import UPSTREAM_MODELS, Proxy

AUTH = ("authorization", "x-api-key", "anthropic-version")


def sent(received: Any) -> tuple[str, dict[str, str]]:
    """The path and the credential headers of one request the fake upstream received."""
    return received.path, {name: received.headers[name] for name in AUTH if name in received.headers}


@pytest.mark.parametrize("upstream_api", sorted(UPSTREAM_MODELS))
def test_the_probe_calls_each_api_like_the_proxy(multi_proxy: Callable[[str], Proxy], upstream_api: str) -> None:
    proxy = multi_proxy(upstream_api)
    fake = proxy.upstream
    assert fake is not None
    answer = httpx.post(
        proxy.url + "/v1/chat/completions",
        json={"model": "switch/orchestrator", "messages": [{"role": "user", "content": "hi"}]},
        timeout=20,
    )
    assert answer.status_code == 200, answer.text
    by_proxy = sent(fake.received[-1])

    result = CliRunner().invoke(app, ["doctor", "--probe", "--json"])
    checks = {check["check"]: check for check in json.loads(result.stdout)["checks"]}
    reference = UPSTREAM_MODELS[upstream_api]

    assert checks[f"probe:{reference}"]["ok"], checks[f"probe:{reference}"]
    assert sent(fake.received[-1]) == by_proxy
    assert by_proxy[1]  # a credential was sent at all
