"""`switch doctor` finds what a new user hit: wiring to the wrong port, unknown providers, dead native routes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from switch.cli import app
from tests.conftest import FAKE_BASETEN_KEY
from tests.fake_upstream import FakeChatUpstream
from tests.servers import free_port, serve

HARNESSES = ("claude", "codex", "langchain")


def doctor(*args: str) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(app, ["doctor", "--json", *args])
    assert result.exit_code in (0, 1), result.output
    return {check["check"]: check for check in json.loads(result.stdout)["checks"]}


def switch(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The harnesses' own config files live under a throwaway HOME."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_wiring_to_another_port_than_the_running_proxy_is_a_failed_check_with_its_fix(
    isolated_home: Path, user_home: Path
) -> None:
    configured = free_port()
    (isolated_home / "config.toml").write_text(f"[server]\nport = {configured}\n")
    for harness in HARNESSES:
        switch(harness, "on")  # wired to the configured port, before the proxy moved
    with proxy_up_on_other_port(isolated_home) as running:
        report = doctor()
        assert report["proxy"]["ok"]
        for harness in HARNESSES:
            check = report[f"wiring:{harness}"]
            assert not check["ok"], check
            assert f"127.0.0.1:{configured}" in check["detail"] and f"port {running}" in check["detail"]
            assert check["fix"] == f"switch {harness} on"
        for harness in HARNESSES:
            switch(harness, "on")  # the fix
        fixed = doctor()
        assert all(fixed[f"wiring:{harness}"]["ok"] for harness in HARNESSES), fixed


def proxy_up_on_other_port(isolated_home: Path) -> Any:
    from contextlib import contextmanager

    @contextmanager
    def running() -> Iterator[int]:
        port = free_port()
        command = [sys.executable, "-m", "switch"]
        started = subprocess.run([*command, "up", "--port", str(port)], capture_output=True, text=True, timeout=60)
        try:
            assert started.returncode == 0, started.stderr
            yield port
        finally:
            subprocess.run([*command, "down"], capture_output=True, text=True, timeout=60)

    return running()


def no_key_advice_for(report: dict[str, dict[str, Any]], provider: str) -> None:
    assert f"key:{provider}" not in report
    assert not any(f"switch keys set {provider}" in (check["fix"] or "") for check in report.values())


def test_an_unknown_provider_in_defaults_model_fails_the_config_check_naming_file_and_key(
    isolated_home: Path, user_home: Path
) -> None:
    config = isolated_home / "config.toml"
    config.write_text(f'[server]\nport = {free_port()}\n[defaults]\nmodel = "nosuch/xyz"\n')
    report = doctor()
    check = report["config"]
    assert not check["ok"]
    assert str(config) in check["detail"] and "defaults.model" in check["detail"] and "'nosuch'" in check["detail"]
    assert "[providers.nosuch]" in check["fix"] and "baseten" in check["fix"]
    no_key_advice_for(report, "nosuch")


@pytest.mark.parametrize(
    ("preset", "key"),
    [
        ('[default]\norchestrator = "native"\nsubagent = "nosuch/xyz"\n', "default.subagent"),
        ('[default]\norchestrator = "native"\nfallback = ["nosuch/xyz"]\n', "default.fallback"),
        (
            '[default]\norchestrator = "native"\n[claude-code]\norchestrator = "native"\n'
            '[claude-code.families]\nhaiku = "nosuch/xyz"\n',
            "claude-code.families.haiku",
        ),
        ('[default]\norchestrator = "native"\n[targets."nosuch/xyz"]\nreasoning = "off"\n', 'targets."nosuch/xyz"'),
    ],
)
@pytest.mark.parametrize("active", [True, False])
def test_an_unknown_provider_in_a_preset_is_a_failed_check_naming_file_and_key(
    isolated_home: Path, user_home: Path, preset: str, key: str, active: bool
) -> None:
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    (isolated_home / "presets").mkdir()
    path = isolated_home / "presets" / "mine.toml"
    path.write_text(preset)
    (isolated_home / "active-preset").write_text("mine\n" if active else "kimi-k3\n")
    report = doctor()
    found = [check for check in report.values() if not check["ok"] and "'nosuch'" in check["detail"]]
    assert len(found) == 1, report
    assert str(path) in found[0]["detail"] and key in found[0]["detail"]
    assert "[providers.nosuch]" in found[0]["fix"]
    no_key_advice_for(report, "nosuch")


@pytest.fixture
def hybrid_with_kimi(isolated_home: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The `hybrid` preset with a reachable, keyed Kimi upstream; yields the config's first lines."""
    monkeypatch.setenv("BASETEN_API_KEY", FAKE_BASETEN_KEY)
    (isolated_home / "active-preset").write_text("hybrid\n")
    with serve(FakeChatUpstream()) as url:
        yield f'[server]\nport = {free_port()}\n[providers.baseten]\nbase_url = "{url}/v1"\n'


async def not_found(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A host that answers every request with 404, as a provider does at a path it does not serve."""
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


def test_probe_covers_native_routes_and_fails_on_an_unreachable_one(isolated_home: Path, hybrid_with_kimi: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    (isolated_home / "config.toml").write_text(
        hybrid_with_kimi
        + f'[providers.anthropic]\nbase_url = "{closed}"\n[providers.openai]\nbase_url = "{closed}/v1"\n'
    )
    report = doctor("--probe")
    assert report["probe:baseten/moonshotai/Kimi-K3"]["ok"]
    for provider in ("anthropic", "openai"):
        check = report[f"probe:native ({provider})"]
        assert not check["ok"] and "cannot reach" in check["detail"] and closed in check["detail"]
        assert "switch use kimi-k3" in check["fix"] and f"[providers.{provider}] base_url" in check["fix"]

    # A 404 (or a 401 for want of credentials) means the host answers: the route is reachable.
    with serve(not_found) as url:
        (isolated_home / "config.toml").write_text(
            hybrid_with_kimi + f'[providers.anthropic]\nbase_url = "{url}"\n[providers.openai]\nbase_url = "{url}/v1"\n'
        )
        report = doctor("--probe")
    for provider in ("anthropic", "openai"):
        check = report[f"probe:native ({provider})"]
        assert check["ok"] and "HTTP 404" in check["detail"], check


def test_probe_of_a_keyless_target_still_checks_that_it_answers(
    isolated_home: Path, user_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    (isolated_home / "config.toml").write_text(
        f'[server]\nport = {free_port()}\n[providers.baseten]\nbase_url = "{closed}"\n'
    )
    (isolated_home / "active-preset").write_text("kimi-k3\n")
    report = doctor("--probe")
    assert not report["key:baseten"]["ok"]
    check = report["probe:baseten/moonshotai/Kimi-K3"]
    assert not check["ok"] and "cannot reach" in check["detail"]
