"""`switch demo`: a real `switch serve` in front of the simulated upstream, under a throwaway home.

The steps: a temporary `SWITCH_HOME` with a `demo` provider (the simulated upstream on a free loopback
port), demo prices and a `demo` preset; `switch serve` as its own process; the scripted workload; then
the dashboard on the result, or the spend summary where stdout is not a terminal. The home is deleted at
the end unless `keep`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from switch.child import serve_argv
from switch.demo.upstream import SimulatedKimi

BANNER = "switch demo: SIMULATED upstream (demo/kimi-sim models, demo prices); no key, nothing leaves 127.0.0.1."
PROVIDER = "demo"
KEY_ENV = "SWITCH_DEMO_KEY"
# Not a secret: the simulated upstream accepts anything; the proxy only needs some key to send.
DEMO_KEY = "demo-key-not-a-secret"
ROUTES = {"orchestrator": "demo/kimi-sim", "subagent": "demo/kimi-sim-fast", "background": "demo/kimi-sim-mini"}
# USD per million tokens. kimi-sim carries Kimi K3's list price on Baseten as switch's bundled table has
# it; the two smaller simulated models are made-up cheaper tiers.
PRICES = {
    "demo/kimi-sim": {"input": 3.0, "cached_input": 0.3, "output": 15.0},
    "demo/kimi-sim-fast": {"input": 1.0, "cached_input": 0.1, "output": 5.0},
    "demo/kimi-sim-mini": {"input": 0.3, "cached_input": 0.03, "output": 1.5},
}
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


class DemoError(Exception):
    """The demo could not run (the proxy did not start, or the workload failed)."""


def config_text(upstream_url: str, port: int) -> str:
    """The demo home's config.toml."""
    lines = [
        "# Written by `switch demo`: a simulated upstream on this machine, demo prices.",
        "[server]",
        f"port = {port}",
        "shutdown_grace = 2",
        "",
        "[defaults]",
        f'model = "{ROUTES["orchestrator"]}"',
        "",
        f"[providers.{PROVIDER}]",
        'api = "openai-chat"',
        f'base_url = "{upstream_url}/v1"',
        f'api_key_env = "{KEY_ENV}"',
        "",
    ]
    for model, prices in PRICES.items():
        lines.append(f'[prices."{model}"]')
        lines.extend(f"{name} = {value}" for name, value in prices.items())
        lines.append("")
    return "\n".join(lines)


def preset_text() -> str:
    """The `demo` preset: each role on its own simulated model, for every harness."""
    lines = ['description = "switch demo: every role on a simulated Kimi-style model (demo prices)"', "", "[default]"]
    lines.extend(f'{role} = "{target}"' for role, target in ROUTES.items())
    return "\n".join(lines) + "\n"


def prepare_home(home: Path, upstream_url: str, port: int) -> None:
    """Write config.toml, the demo preset and the active-preset choice into `home`."""
    from switch.locations import ensure_private_dir

    ensure_private_dir(home)
    ensure_private_dir(home / "presets")
    (home / "config.toml").write_text(config_text(upstream_url, port), encoding="utf-8")
    (home / "presets" / "demo.toml").write_text(preset_text(), encoding="utf-8")
    (home / "active-preset").write_text("demo\n", encoding="utf-8")


@contextmanager
def simulated_upstream() -> Iterator[tuple[SimulatedKimi, str]]:
    """The simulated upstream on 127.0.0.1 (a free port) in a thread; yields it and its base URL."""
    import uvicorn

    app = SimulatedKimi()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="critical", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True, name="switch-demo-upstream")
    thread.start()
    try:
        _wait(lambda: server.started or not thread.is_alive(), 10.0)
        if not server.started:
            raise DemoError("the simulated upstream did not start")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield app, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _wait(condition: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def proxy_process(home: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`switch serve --port PORT` for `home` as its own process, once it answers; always stopped on leaving."""
    env = {**os.environ, "SWITCH_HOME": str(home), KEY_ENV: DEMO_KEY}
    # The demo never reads or writes the user's keyring (a null backend sends switch to the home's own file).
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.null.Keyring"
    log = (home / "logs").resolve()
    log.mkdir(parents=True, exist_ok=True)
    with open(log / "demo-proxy.log", "wb") as output:
        process = subprocess.Popen(
            serve_argv(port),
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            _wait(lambda: process.poll() is not None or _healthy(port), START_TIMEOUT)
            if process.poll() is not None or not _healthy(port):
                detail = (log / "demo-proxy.log").read_text(errors="replace").strip()[-600:]
                raise DemoError(f"`switch serve` did not start on port {port}: {detail or 'no output'}")
            yield process
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the proxy writes its last ledger rows), then SIGKILL if it does not exit in time."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def print_summary(out: IO[str]) -> None:
    """The spend summary of the demo ledger (this process's SWITCH_HOME): by role, by served model, by inbound API."""
    from switch.ledger.queries import connect, micros_to_usd, spend

    connection = connect()
    if connection is None:
        raise DemoError("the demo recorded no calls")
    try:
        sections: list[tuple[str, list[dict[str, Any]]]] = [
            ("role", spend(connection, "role")),
            ("served model", spend(connection, "model")),
            ("harness", spend(connection, "harness")),
        ]
        by_api = []
        for api in ("anthropic", "openai-responses", "openai-chat"):
            for row in spend(connection, None, filters={"inbound_api": api}):
                by_api.append({**row, "grp": api})
        sections.append(("inbound API", by_api))
        for title, rows in sections:
            out.write(
                f"\n{'by ' + title:<22} {'spend':>10} {'native':>10} {'saved':>10} {'calls':>6} {'cache hit':>9}\n"
            )
            for row in rows:
                hit = "-" if row["cache_hit_rate"] is None else f"{row['cache_hit_rate']:.0%}"
                out.write(
                    f"{str(row['grp'])[:22]:<22} {micros_to_usd(row['spend_micros']):>10} "
                    f"{micros_to_usd(row['native_micros']):>10} {micros_to_usd(row['savings_micros']):>10} "
                    f"{row['calls']:>6} {hit:>9}\n"
                )
    finally:
        connection.close()


def open_dashboard() -> None:
    """The dashboard on the demo ledger, titled as simulated."""
    import importlib

    dashboard = importlib.import_module("switch.ui.app").make_app()
    dashboard.title = "switch · demo (simulated upstream, demo prices)"
    dashboard.run()


def run(keep: bool, out: IO[str], interactive: bool) -> int:
    """The whole demo; returns the exit code."""
    home = Path(tempfile.mkdtemp(prefix="switch-demo-"))
    previous_home = os.environ.get("SWITCH_HOME")
    out.write(BANNER + "\n")
    out.flush()
    try:
        os.environ["SWITCH_HOME"] = str(home)
        with simulated_upstream() as (upstream, url):
            port = _free_port()
            prepare_home(home, url, port)
            with proxy_process(home, port) as process:
                out.write(f"A real `switch serve` (pid {process.pid}) on 127.0.0.1:{port}, preset `demo`.\n")
                out.flush()
                sent = _workload(f"http://127.0.0.1:{port}")
                for call in sent:
                    out.write(f"  {call.api:<17} {call.what:<30} {call.status}\n")
                failed = [call for call in sent if call.status != 200]
                if failed:
                    raise DemoError(f"{len(failed)} workload call(s) failed; see {home / 'logs'}")
                if interactive:
                    open_dashboard()
            out.write(f"\nSimulated: {upstream.requests} upstream calls, {upstream.refusals} refused.\n")
            if not interactive:
                print_summary(out)
        return 0
    except DemoError as exc:
        out.flush()
        print(f"switch: demo failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if previous_home is None:
            os.environ.pop("SWITCH_HOME", None)
        else:
            os.environ["SWITCH_HOME"] = previous_home
        if keep:
            out.write(f"\nKept the demo home: {home}\n  SWITCH_HOME={home} switch dash\n")
        else:
            shutil.rmtree(home, ignore_errors=True)
        out.flush()


def _workload(base_url: str) -> list[Any]:
    from switch.demo.workload import Workload

    workload = Workload(base_url)
    try:
        return workload.run()
    finally:
        workload.close()
