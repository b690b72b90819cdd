"""LiteLLM stays out of the way: not imported unless a LiteLLM target exists, and it reaches nothing but loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fake_upstream import Turn
from tests.litellm.fakes import FakeGemini
from tests.servers import serve


def run_python(code: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SWITCH_HOME": str(home)}
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


def test_switch_help_does_not_import_litellm(isolated_home: Path) -> None:
    env = {**os.environ, "SWITCH_HOME": str(isolated_home)}
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "switch", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    imported = [line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if "|" in line]
    assert "switch.config" in imported or "switch" in imported  # the import log is there to read
    assert not [name for name in imported if name.split(".")[0] == "litellm"]


def test_the_proxy_without_a_litellm_target_never_imports_litellm(isolated_home: Path) -> None:
    code = (
        "import sys\n"
        "from switch.config import load_settings\n"
        "from switch.proxy.app import create_app\n"
        "create_app(load_settings())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'litellm'))\n"
    )
    result = run_python(code, isolated_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_litellm_target_in_the_config_warms_litellm_in_the_background(isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text('[providers.gem]\napi = "litellm"\nlitellm_provider = "gemini"\n')
    code = (
        "import sys, time\n"
        "from switch.config import load_settings\n"
        "from switch.proxy.app import create_app\n"
        "from switch.proxy.litellm_upstream import LOADER\n"
        "create_app(load_settings())\n"
        "deadline = time.monotonic() + 100\n"
        "while LOADER.module is None and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        "print(LOADER.module is not None, 'litellm' in sys.modules)\n"
    )
    result = run_python(code, isolated_home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]


GUARDED_CALL = """
import asyncio, json, os, socket, sys
from pathlib import Path

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
attempts = []
real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

def connect(self, address):
    if isinstance(address, tuple) and address[0] not in LOOPBACK:
        attempts.append(str(address[0]))
        raise OSError("blocked by the test: not loopback")
    return real_connect(self, address)

def getaddrinfo(host, *args, **kwargs):
    if host not in LOOPBACK and host is not None:
        attempts.append(str(host))
        raise socket.gaierror("blocked by the test: not loopback")
    return real_getaddrinfo(host, *args, **kwargs)

socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo

import httpx
from switch.config import load_settings
from switch.proxy.app import create_app
from tests.servers import serve

with serve(create_app(load_settings())) as url:
    answer = httpx.post(
        url + "/v1/chat/completions",
        json={"model": "gpt-5.5", "messages": [{"role": "user", "content": "hi"}]},
        timeout=60,
    )
text = answer.json()["choices"][0]["message"]["content"] if answer.status_code == 200 else answer.text
print(json.dumps({"status": answer.status_code, "text": text, "attempts": attempts}))
"""


def test_a_litellm_call_reaches_only_the_configured_server(isolated_home: Path) -> None:
    gemini = FakeGemini()
    gemini.script(Turn(text="offline hello"))
    with serve(gemini) as url:
        (isolated_home / "config.toml").write_text(
            '[defaults]\nmodel = "gem/gemini-2.5-pro"\n'
            f'[providers.gem]\napi = "litellm"\nlitellm_provider = "gemini"\nbase_url = "{url}"\n'
            'api_key_env = "GEM_KEY"\n'
        )
        env_code = "import os; os.environ['GEM_KEY'] = 'gem-key-for-the-test'\n"
        result = run_python(env_code + GUARDED_CALL, isolated_home)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["status"], report["text"]) == (200, "offline hello")
    assert report["attempts"] == []
    assert len(gemini.received) == 1
