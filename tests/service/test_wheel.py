"""Installed as a tool: a wheel built from the checkout, in a fresh virtual environment, serves a call.

What `pipx install .` and `uv tool install .` do: build the wheel, install it into an environment of its own.
Here the dependencies come from the system's site-packages (`--system-site-packages`) so nothing is fetched;
switch itself comes only from the wheel (checked: never from the checkout or an editable install).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx

from tests.fake_upstream import FakeAnthropicUpstream
from tests.servers import end_process, free_port, serve, wait_until

ROOT = Path(__file__).resolve().parents[2]
# Only what a source distribution carries: no environments, caches or build leftovers.
LEFT_OUT = shutil.ignore_patterns(".git", ".venv", ".cache", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")


def build_wheel(tmp_path: Path) -> Path:
    """`pip wheel` of a copy of the checkout, offline (no index, no isolated build environment)."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=LEFT_OUT)
    out = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + [str(source), "-w", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = out.glob("switch_proxy-*.whl")
    return wheel


def fresh_environment(tmp_path: Path, wheel: Path) -> Path:
    venv = tmp_path / "tool"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return venv


def test_the_wheel_in_a_fresh_environment_has_its_data_and_serves_a_call(tmp_path: Path, isolated_home: Path) -> None:
    venv = fresh_environment(tmp_path, build_wheel(tmp_path))
    switch = str(venv / "bin" / "switch")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["SWITCH_HOME"] = str(isolated_home)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=env, cwd=elsewhere, capture_output=True, text=True, timeout=60)

    probe = run(
        str(venv / "bin" / "python"),
        "-c",
        "import importlib.resources as r, switch; print(switch.__file__); "
        "print(r.files('switch.ui').joinpath('app.tcss').is_file())",
    )
    module, stylesheet = probe.stdout.split()
    assert Path(module).is_relative_to(venv), module  # the wheel's copy, not the checkout's
    assert stylesheet == "True"
    presets = json.loads(run(switch, "presets", "--json").stdout)["presets"]
    shipped = sorted(path.stem for path in (ROOT / "harness_presets").glob("*.toml"))
    assert sorted(entry["name"] for entry in presets) == shipped
    assert all(Path(entry["file"]).is_relative_to(venv) and entry["error"] is None for entry in presets)
    price = run(switch, "prices", "baseten/moonshotai/Kimi-K3")
    assert price.returncode == 0 and "3" in price.stdout, price.stdout + price.stderr
    completion = run(switch, "completion", "bash")
    assert "_SWITCH_COMPLETE=complete_bash" in completion.stdout

    fake = FakeAnthropicUpstream()
    with serve(fake) as url:
        port = free_port()
        (isolated_home / "config.toml").write_text(
            f'[server]\nport = {port}\n[defaults]\nmodel = "native"\n[providers.anthropic]\nbase_url = "{url}"\n'
        )
        process = subprocess.Popen(
            [switch, "serve"], env=env, cwd=elsewhere, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_until(lambda: _answers(port) or process.poll() is not None, timeout=60, what="the tool's proxy")
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/messages",
                json={"model": "claude-opus-5-5", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]},
                headers={"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"},
                timeout=30,
            )
            assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "Native hello"
        finally:
            end_process(process)


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False
