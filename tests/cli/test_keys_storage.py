"""Where `switch keys set` puts a key, what it says about it, and how damaged or unsendable keys are handled."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import keyring
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch import keys
from tests.cli.keyring_backends import BlockingKeychain
from tests.commands import run_switch
from tests.conftest import FAKE_BASETEN_KEY, Proxy
from tests.fake_upstream import FakeChatUpstream
from tests.servers import free_port

SECRET = "sk-fake-stored-key-0123456789"
PLAINTEXT = "keyrings.alt.file.PlaintextKeyring"
FILE_KEYCHAIN = "tests.cli.keyring_backends.FileKeychain"
SECRET_SERVICE = "Secret Service keyring (GNOME Keyring or KWallet)"


def _files_under(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def test_plaintext_keyring_is_not_trusted_the_key_goes_to_switchs_0600_file(
    isolated_home: Path, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    data = user / "data"
    data.mkdir(parents=True)
    env = {"PYTHON_KEYRING_BACKEND": PLAINTEXT, "HOME": str(user), "XDG_DATA_HOME": str(data)}
    chosen = subprocess.run(
        [sys.executable, "-c", "import keyring; print(type(keyring.get_keyring()).__name__)"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert chosen.stdout.strip() == "PlaintextKeyring"  # the keyring library itself would use it

    stored = run_switch("keys", "set", "baseten", env=env, stdin=SECRET + "\n")

    assert stored.returncode == 0, stored.stderr
    key_file = isolated_home / "keys.json"
    assert stored.stdout.strip() == (
        f"No secure OS keyring on this machine: stored the baseten key in {key_file} (readable only by you, mode 0600)."
    )
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(isolated_home.stat().st_mode) == 0o700
    assert json.loads(key_file.read_text()) == {"baseten": SECRET}
    assert _files_under(user) == []  # nothing in the keyring's data directory (or anywhere in HOME)
    listing = run_switch("keys", "list", env=env)
    assert "No secure OS keyring on this machine" in listing.stdout and str(key_file) in listing.stdout
    assert "baseten      file" in listing.stdout and SECRET not in listing.stdout + listing.stderr


def test_a_secure_keyring_gets_the_key_and_is_named(isolated_home: Path, tmp_path: Path) -> None:
    chain = tmp_path / "keychain.json"
    env = {"PYTHON_KEYRING_BACKEND": FILE_KEYCHAIN, "SWITCH_TEST_KEYCHAIN": str(chain)}

    stored = run_switch("keys", "set", "baseten", env=env, stdin="  " + SECRET + " \n")

    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.strip() == f"Stored the baseten key in the {SECRET_SERVICE}."
    assert json.loads(chain.read_text()) == {"switch/baseten": SECRET}  # stripped
    assert not (isolated_home / "keys.json").exists()
    listing = json.loads(run_switch("keys", "list", "--json", env=env).stdout)
    assert listing["backend"] == f"the {SECRET_SERVICE}" and listing["providers"]["baseten"] == "keyring"
    removed = run_switch("keys", "rm", "baseten", env=env)
    assert "Removed" in removed.stdout and json.loads(chain.read_text()) == {}


def test_a_key_with_a_control_character_is_not_stored(isolated_home: Path) -> None:
    result = run_switch("keys", "set", "baseten", stdin="sk-abc\x1bdef\n")
    assert result.returncode == 2
    assert result.stderr.startswith("switch: the key given for baseten contains a control character")
    assert "sk-abc" not in result.stderr and not (isolated_home / "keys.json").exists()


# ---- a damaged key file -------------------------------------------------------------------------

DAMAGED = {
    "not JSON": ("{baseten: sk-abc", "is not valid JSON"),
    "not an object": ('["sk-abc"]', "must hold one JSON object"),
    "value not a string": ('{"baseten": ["sk-abc"]}', "has a list for provider 'baseten'"),
    "not UTF-8": (b'{"baseten": "sk-\xff"}', "is not UTF-8 text"),
}


def _damage(home: Path, content: str | bytes) -> Path:
    path = home / "keys.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_serve_refuses_to_start_on_a_damaged_key_file(isolated_home: Path, case: str) -> None:
    content, reason = DAMAGED[case]
    path = _damage(isolated_home, content)
    result = subprocess.run(
        [sys.executable, "-m", "switch", "serve", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"switch: the key file {path} ") and reason in lines[0]
    assert "switch keys set" in lines[0] and "sk-" not in lines[0]


def test_keys_commands_and_doctor_report_a_damaged_key_file(isolated_home: Path) -> None:
    path = _damage(isolated_home, "{baseten: sk-abc")
    for command in (("keys", "list"), ("keys", "set", "baseten"), ("keys", "rm", "baseten")):
        result = run_switch(*command, stdin=SECRET + "\n")
        assert result.returncode == 2, command
        assert result.stderr.startswith(f"switch: the key file {path} is not valid JSON"), command
        assert "Traceback" not in result.stderr
    assert path.read_text() == "{baseten: sk-abc"  # `set` did not overwrite the other keys in it
    (isolated_home / "config.toml").write_text(f"[server]\nport = {free_port()}\n")
    (isolated_home / "active-preset").write_text("kimi-k3\n")
    doctor = json.loads(run_switch("doctor", "--json").stdout)
    checks = {check["check"]: check for check in doctor["checks"]}
    assert not checks["keys-file"]["ok"] and str(path) in checks["keys-file"]["detail"]
    assert str(path) in checks["keys-file"]["fix"]
    assert not checks["key:baseten"]["ok"] and "is not valid JSON" in checks["key:baseten"]["detail"]


SECRET_PATTERN = r"sk-[A-Za-z0-9]{8}"
_secret = st.from_regex(SECRET_PATTERN, fullmatch=True)
_names = st.from_regex(r"[a-z]{1,8}", fullmatch=True)
_leaf = st.none() | st.booleans() | st.integers() | _secret
_json = st.recursive(
    _leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3), max_leaves=8
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=64),
        _json.map(lambda value: json.dumps(value).encode()),
        st.dictionaries(_names, _secret | _leaf, max_size=4).map(lambda value: json.dumps(value).encode()),
    )
)
def test_any_key_file_is_read_or_refused_with_a_clear_error(isolated_home: Path, content: bytes) -> None:
    path = _damage(isolated_home, content)
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    usable = isinstance(parsed, dict) and all(isinstance(value, str) for value in parsed.values())
    try:
        entries = keys.read_file()
    except keys.KeysFileError as exc:
        assert not usable
        assert exc.message.startswith(f"the key file {path} ") and "switch keys set" in exc.message
        assert re.search(SECRET_PATTERN, exc.message) is None  # never a key from the file
        return
    assert usable and entries == parsed


# ---- the proxy: keys in memory, checked once, a damaged file or a bad key never a 500 -----------


def _chat(url: str, **headers: str) -> Any:
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=10.0)
    try:
        return client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=headers or None
        )
    finally:
        client.close()


def test_a_damaged_key_file_is_a_clear_401_recorded_not_a_500(
    isolated_home: Path, fake_chat: tuple[FakeChatUpstream, str], start_proxy: Callable[..., Proxy]
) -> None:
    fake, url = fake_chat
    path = _damage(isolated_home, '{"baseten": 42}')
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}"\n')
    with pytest.raises(openai.AuthenticationError) as raised:
        _chat(proxy.url)
    assert raised.value.status_code == 401
    assert f"the key file {path} has a number for provider 'baseten'" in raised.value.message
    records = proxy.sink.wait(1)
    assert [(r.outcome, r.http_status) for r in records] == [("rejected", 401)]
    assert fake.received == []


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (FAKE_BASETEN_KEY + "\r\nx-injected: 1", "a line break"),
        (FAKE_BASETEN_KEY + "\nx", "a line break"),
        ("sk-\x07abc", "a control character"),
        ("sk-é-abc", "a non-ASCII character"),
    ],
)
def test_a_key_that_cannot_be_sent_is_refused_in_the_callers_format_and_recorded(
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    reason: str,
) -> None:
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", value)
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}"\n')
    response = httpx.post(
        proxy.url + "/v1/messages",
        json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
        timeout=10,
    )
    assert response.status_code == 401
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    message = body["error"]["message"]
    assert f"environment variable BASETEN_API_KEY contains {reason}" in message
    assert "abc" not in message and FAKE_BASETEN_KEY not in message
    assert [(r.outcome, r.http_status) for r in proxy.sink.wait(1)] == [("rejected", 401)]
    assert fake.received == []  # nothing went upstream


def test_keys_from_the_environment_are_stripped(
    fake_chat: tuple[FakeChatUpstream, str], start_proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = fake_chat
    monkeypatch.setenv("BASETEN_API_KEY", f"  {FAKE_BASETEN_KEY}\n")
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}"\n')
    assert _chat(proxy.url).choices[0].message.content
    assert fake.received[0].headers["authorization"] == f"Bearer {FAKE_BASETEN_KEY}"


@pytest.fixture
def blocking_keychain() -> Iterator[BlockingKeychain]:
    backend = BlockingKeychain({"switch/baseten": FAKE_BASETEN_KEY})
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        backend.release.set()
        keyring.set_keyring(previous)


def test_a_keychain_that_blocks_never_holds_up_a_call(
    isolated_home: Path,
    fake_chat: tuple[FakeChatUpstream, str],
    start_proxy: Callable[..., Proxy],
    blocking_keychain: BlockingKeychain,
) -> None:
    fake, url = fake_chat
    presets = isolated_home / "presets"
    presets.mkdir()
    (presets / "keytest.toml").write_text(
        'description = "baseten for the main thread, moonshot (no key anywhere) for background calls"\n'
        "[default]\n"
        'orchestrator = "baseten/moonshotai/Kimi-K3"\n'
        'subagent = "baseten/moonshotai/Kimi-K3"\n'
        'background = "moonshot/kimi-k2"\n'
    )
    (isolated_home / "active-preset").write_text("keytest\n")
    proxy = start_proxy(f'[providers.baseten]\nbase_url = "{url}"\n[providers.moonshot]\nbase_url = "{url}"\n')
    # From now on the keychain waits for an unlock prompt nobody answers.
    blocking_keychain.armed.set()

    with pytest.raises(openai.AuthenticationError) as raised:
        _chat(proxy.url, **{"x-switch-role": "background"})
    assert "no API key for provider 'moonshot'" in raised.value.message
    # That miss sent the key thread back to the keychain, where it is now stuck.
    assert blocking_keychain.entered.wait(10)

    answer = _chat(proxy.url)

    assert answer.choices[0].message.content
    assert fake.received[-1].headers["authorization"] == f"Bearer {FAKE_BASETEN_KEY}"
    assert not blocking_keychain.release.is_set()  # both calls were served while the keychain was blocked


def test_without_a_session_bus_the_keyring_library_is_never_loaded(tmp_path: Path) -> None:
    # No D-Bus session bus, no chosen backend, not macOS or Windows: no secure keyring can answer, so the
    # proxy must not pay for loading every keyring backend (D-Bus, cryptography) to find none.
    env = {k: v for k, v in os.environ.items() if k not in ("DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND")}
    env |= {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_RUNTIME_DIR": str(tmp_path)}
    probe = "import sys; from switch import keys; print(keys.secure_keyring(), 'keyring' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", "False"]
