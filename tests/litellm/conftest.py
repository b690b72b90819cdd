"""Fixtures for LiteLLM targets: an Ollama-compatible and a Gemini-compatible server, and a proxy routed to them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Proxy
from tests.fake_upstream import FakeChatUpstream
from tests.litellm.fakes import FakeGemini, FakeOllama
from tests.servers import serve

OLLAMA_KEY = "sk-fake-ollama-key-0123456789"
GEMINI_KEY = "AIza-fake-gemini-key-0123456789"
BACKUP_KEY = "sk-fake-backup-key-0123456789"
TARGETS = {"ollama": "local/llama3", "gemini": "gem/gemini-2.5-pro"}


@dataclass
class Fakes:
    ollama: FakeOllama
    ollama_url: str
    gemini: FakeGemini
    gemini_url: str
    backup: FakeChatUpstream
    backup_url: str


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    """The two LiteLLM stand-ins and a plain chat upstream to fall back to, all on loopback."""
    ollama, gemini, backup = FakeOllama(), FakeGemini(), FakeChatUpstream(require_reasoning_on_tool_turns=False)
    with serve(ollama) as ollama_url, serve(gemini) as gemini_url, serve(backup) as backup_url:
        yield Fakes(ollama, ollama_url, gemini, gemini_url, backup, backup_url)


def litellm_config(fakes: Fakes, model: str, extra: str = "", ttft_timeout: float = 20) -> str:
    """A config with two LiteLLM providers (Ollama and Gemini, each with its own key) and a chat backup."""
    return (
        f'[defaults]\nmodel = "{model}"\n'
        f'[providers.local]\napi = "litellm"\nlitellm_provider = "ollama_chat"\nbase_url = "{fakes.ollama_url}"\n'
        'api_key_env = "LOCAL_OLLAMA_KEY"\n'
        f'[providers.gem]\napi = "litellm"\nlitellm_provider = "gemini"\nbase_url = "{fakes.gemini_url}"\n'
        'api_key_env = "GEM_KEY"\n'
        f'[providers.backup]\nbase_url = "{fakes.backup_url}/v1"\napi_key_env = "BACKUP_KEY"\n'
        f"[routing]\nttft_timeout = {ttft_timeout}\n" + extra
    )


@pytest.fixture
def litellm_proxy(
    fakes: Fakes, start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> Callable[..., Proxy]:
    """Start the proxy with every call routed to `model` (default: the Gemini stand-in)."""
    monkeypatch.setenv("LOCAL_OLLAMA_KEY", OLLAMA_KEY)
    monkeypatch.setenv("GEM_KEY", GEMINI_KEY)
    monkeypatch.setenv("BACKUP_KEY", BACKUP_KEY)

    def start(model: str = TARGETS["gemini"], extra: str = "", ttft_timeout: float = 20) -> Proxy:
        proxy = start_proxy(litellm_config(fakes, model, extra, ttft_timeout), read_timeout=20.0)
        proxy.extra["fakes"] = fakes
        return proxy

    return start
