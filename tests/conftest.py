"""Shared fixtures: an isolated SWITCH_HOME, and real loopback servers for the proxy and fakes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from switch.config import load_settings
from switch.ledger.record import CallRecord
from switch.ledger.recorder import Recorder
from switch.proxy.app import create_app
from tests.fake_upstream import FakeChatUpstream
from tests.ledger_seed import pricer_for
from tests.servers import serve, wait_until

# Property tests: `ci` (the default) keeps the suite quick; `HYPOTHESIS_PROFILE=slow` runs 10x the
# examples. No deadline: a loaded 2-core CI machine must not turn slowness into failures.
settings.register_profile(
    "ci", max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "slow", max_examples=1000, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

KEY_VARS = (
    "BASETEN_API_KEY",
    "MOONSHOT_API_KEY",
    "OPENROUTER_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
)
FAKE_BASETEN_KEY = "sk-fake-baseten-0123456789abcdef"
FAKE_CLIENT_KEY = "sk-ant-fake-client-key-0123456789"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own SWITCH_HOME and no provider keys from the environment."""
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "switch-home"
    home.mkdir()
    monkeypatch.setenv("SWITCH_HOME", str(home))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    return home


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of its own with empty `.claude/` and `.codex/` folders, and no harness config dir overrides."""
    home = tmp_path / "user"
    (home / ".claude").mkdir(parents=True)
    (home / ".codex").mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return home


class ListSink:
    """Collects records in memory (thread-safe enough for list.append)."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []
        self.event = threading.Event()

    def submit(self, record: CallRecord) -> None:
        self.records.append(record)
        self.event.set()

    def wait(self, count: int, timeout: float = 5.0) -> list[CallRecord]:
        import time

        deadline = time.monotonic() + timeout
        while len(self.records) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.records


@dataclass
class Proxy:
    url: str
    sink: ListSink
    app: Any
    upstream: FakeChatUpstream | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def fake_chat() -> Iterator[tuple[FakeChatUpstream, str]]:
    """A running fake Kimi-style chat upstream and its base URL (with /v1)."""
    fake = FakeChatUpstream()
    with serve(fake) as url:
        yield fake, url + "/v1"


def write_config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text, encoding="utf-8")


@pytest.fixture
def start_proxy(isolated_home: Path) -> Iterator[Callable[..., Proxy]]:
    """Start the real proxy app on a loopback port with the given config.toml text (on switch's own HTTP
    protocol, as `switch serve` runs it, unless `http` names one of uvicorn's)."""
    stack: list[Any] = []

    def start(config_text: str = "", sink: Any = None, http: str = "switch", **settings_overrides: Any) -> Proxy:
        write_config(isolated_home, config_text)
        settings = load_settings()
        for key, value in settings_overrides.items():
            setattr(settings.server, key, value)
        sink = sink if sink is not None else ListSink()
        app = create_app(settings, sink=sink)
        context = serve(app, http, lifespan_required=True)
        url = context.__enter__()
        stack.append(context)
        return Proxy(url, sink, app)

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


def presets_of(proxy: Proxy) -> Any:
    """The running proxy's preset manager (to wait until it has loaded a preset change)."""
    return proxy.app.app.relay.presets


def kimi_proxy_on(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    http: str,
    config: str = "",
    **server: Any,
) -> Proxy:
    """The proxy routing everything to the fake chat upstream, on the `http` protocol (`config`: more TOML,
    `server`: `[server]` settings over the test defaults)."""
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    proxy = start_proxy(
        f'[providers.baseten]\nbase_url = "{url}"\n{config}',
        http=http,
        **{"ping_interval": 0.2, "read_timeout": 2.0, **server},
    )
    proxy.upstream = fake
    return proxy


@pytest.fixture
def kimi_proxy(
    fake_chat: tuple[FakeChatUpstream, str], start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> Proxy:
    """The proxy routing everything to the fake chat upstream as `baseten/moonshotai/Kimi-K3`."""
    return kimi_proxy_on(fake_chat, start_proxy, monkeypatch, "switch")


@pytest.fixture
def native_proxy(start_proxy: Callable[..., Proxy]) -> Iterator[Proxy]:
    """The proxy passing every call through (native routes) to a fake of all three APIs."""
    from tests.fake_upstream import FakeUpstream

    fake = FakeUpstream()
    with serve(fake) as url:
        proxy = start_proxy(
            f'[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n'
            f'[providers.openai]\nbase_url = "{url}/v1"\n',
            read_timeout=3.0,
        )
        proxy.upstream = fake
        yield proxy


@pytest.fixture
def kimi_proxy_h11(
    fake_chat: tuple[FakeChatUpstream, str], start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> Proxy:
    """`kimi_proxy` on uvicorn's h11 protocol: streams go through plain ASGI `send` and side tasks."""
    return kimi_proxy_on(fake_chat, start_proxy, monkeypatch, "h11")


def load_capture(name: str) -> dict[str, Any]:
    """One captured request (`folder/file.json`) from tests/fixtures/captures."""
    import orjson

    path = Path(__file__).parent / "fixtures" / "captures" / name
    return dict(orjson.loads(path.read_bytes()))


def capture_names(prefix: str) -> list[str]:
    root = Path(__file__).parent / "fixtures" / "captures"
    return sorted(
        f"{folder.name}/{file.name}"
        for folder in root.iterdir()
        if folder.name.startswith(prefix)
        for file in sorted(folder.glob("*.json"))
    )


os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def fake_multi() -> Iterator[tuple[Any, str]]:
    """A fake upstream speaking chat, Anthropic and Responses, and its base URL (no /v1)."""
    from tests.fake_upstream import FakeUpstream

    fake = FakeUpstream()
    with serve(fake) as url:
        yield fake, url


MULTI_CONFIG = """
[defaults]
model = "{model}"
[providers.fakechat]
api = "openai-chat"
base_url = "{url}/v1"
api_key_env = "FAKE_CHAT_KEY"
[providers.fakeanthropic]
api = "anthropic"
base_url = "{url}"
api_key_env = "FAKE_ANTHROPIC_KEY"
[providers.fakeresponses]
api = "openai-responses"
base_url = "{url}/v1"
api_key_env = "FAKE_RESPONSES_KEY"
"""
UPSTREAM_MODELS = {
    "openai-chat": "fakechat/kimi-test",
    "anthropic": "fakeanthropic/claude-test",
    "openai-responses": "fakeresponses/gpt-test",
}


@pytest.fixture
def multi_proxy(
    fake_multi: tuple[Any, str], start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Proxy]:
    """Start the proxy routing everything to one of the fake's three APIs."""
    fake, url = fake_multi
    monkeypatch.setenv("FAKE_CHAT_KEY", "sk-fake-chat-key")
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", "sk-fake-anthropic-key")
    monkeypatch.setenv("FAKE_RESPONSES_KEY", "sk-fake-responses-key")

    def start(upstream_api: str) -> Proxy:
        proxy = start_proxy(MULTI_CONFIG.format(model=UPSTREAM_MODELS[upstream_api], url=url), read_timeout=5.0)
        proxy.upstream = fake
        return proxy

    return start


@pytest.fixture
def ledger_proxy(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    isolated_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Proxy, Recorder]]:
    """The proxy routing to the fake chat upstream and recording into the home's real SQLite ledger."""
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    (isolated_home / "config.toml").write_text(f'[providers.baseten]\nbase_url = "{url}/v1"\n')
    recorder = Recorder(pricer_for(load_settings()))
    recorder.start()
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}/v1"\n', sink=recorder, read_timeout=2.0)
    proxy.upstream = fake
    yield proxy, recorder
    recorder.close()


def drain(recorder: Recorder, expected: int) -> None:
    """Close the recorder once `expected` records reached it (the proxy submits just after responding)."""
    wait_until(lambda: recorder.written + recorder.spilled + recorder._queue.qsize() >= expected)
    recorder.close()
