"""`switch service install | uninstall | status`: write, start, stop and remove this home's login service.

`install` records in `$SWITCH_HOME/service.json` every file it wrote with its digest; `uninstall` removes
exactly those files (a file changed since is left, and named), so nothing else is ever touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from switch import daemon, locations
from switch.errors import SwitchError
from switch.files import atomic_write, digest
from switch.service import launchd, systemd
from switch.service.spec import ServiceSpec, this_home_spec

MANAGERS: dict[str, ModuleType] = {"systemd": systemd, "launchd": launchd}
START_WAIT_S = 20.0


def default_manager() -> str:
    """This system's service manager."""
    return "launchd" if sys.platform == "darwin" else "systemd"


def record_path() -> Path:
    """What `install` wrote, for `uninstall` and `status`."""
    return locations.home() / "service.json"


def read_record() -> dict[str, Any] | None:
    """The installed service's record, or None when none is installed (or the record is unreadable)."""
    try:
        record = json.loads(record_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SwitchError(
            f"{record_path()} cannot be read ({exc}); remove it, then `switch service install` again"
        ) from None
    if (
        not isinstance(record, dict)
        or record.get("manager") not in MANAGERS
        or not isinstance(record.get("files"), dict)
    ):
        raise SwitchError(f"{record_path()} is not a service record; remove it, then `switch service install` again")
    return record


def _configured() -> tuple[str, int, int, str | None]:
    """(host, port, shutdown_grace, the config's problem) from config.toml; the defaults (and the file's port,
    if it reads) when it is broken: the service fails open on it, on the port the harnesses are wired to."""
    from switch.config import Server, load_settings

    try:
        server = load_settings().server
    except SwitchError as exc:
        from switch.daemon import fallback_port

        fallback = Server()
        return fallback.host, fallback_port(), fallback.shutdown_grace, exc.message
    return server.host, server.port, server.shutdown_grace, None


def _run(commands: list[list[str]]) -> list[str]:
    """Run each command; the failures, as lines naming the command and its message."""
    failures = []
    for command in commands:
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failures.append(f"`{' '.join(command)}` failed: {exc}")
            continue
        if result.returncode != 0:
            message = (result.stderr or result.stdout).strip().splitlines()
            failures.append(f"`{' '.join(command)}` failed: {message[-1] if message else result.returncode}")
    return failures


def install(manager: str | None = None, python: str | None = None) -> dict[str, Any]:
    """Write this home's service files, and start them where the service manager runs; what happened."""
    kind = manager or default_manager()
    module = MANAGERS[kind]
    host, port, grace, problem = _configured()
    spec = this_home_spec(python or sys.executable, host, port, grace)
    record = read_record()
    if record is not None and record["manager"] != kind:
        raise SwitchError(
            f"a {record['manager']} service is installed for this home; `switch service uninstall` it first"
        )
    ours = (record or {}).get("files", {})
    directory: Path = module.unit_directory()
    files = {directory / name: text.encode() for name, text in module.render(spec).items()}
    for path in files:
        if path.exists() and str(path) not in ours:
            raise SwitchError(
                f"{path} exists and switch did not write it; move it away (or remove it), then run "
                "`switch service install` again"
            )
    report: dict[str, Any] = {"manager": kind, "name": spec.name, "port": port, "files": [str(p) for p in files]}
    if problem is not None:
        report["config_error"] = problem
    locations.ensure_private_dir(spec.log.parent)
    for path, data in files.items():
        atomic_write(path, data, default_mode=0o644)
    atomic_write(
        record_path(),
        json.dumps(
            {
                "manager": kind,
                "name": spec.name,
                "port": port,
                "python": spec.python,
                "files": {str(path): digest(data) for path, data in files.items()},
            },
            indent=2,
        ).encode(),
    )
    commands = module.start_commands(spec.name)
    if not module.manager_runs():
        report["started"] = False
        report["commands"] = [" ".join(command) for command in commands]
        return report
    # The socket unit needs the port: this home's `switch up` proxy hands it over (only where the service
    # will really start, so a machine without a user manager keeps its running proxy).
    stopped = daemon.stop(port=port) if daemon.read_record() is not None else None
    if stopped is not None and stopped.get("stopped"):
        report["stopped_background"] = stopped["pid"]
    failures = _run(commands)
    report["failures"] = failures
    deadline = time.monotonic() + START_WAIT_S
    while not failures and time.monotonic() < deadline and daemon.healthy(port) is None:
        time.sleep(0.2)
    report["started"] = not failures and daemon.healthy(port) is not None
    return report


def uninstall() -> dict[str, Any]:
    """Stop this home's service and remove exactly the files `install` wrote; what happened."""
    record = read_record()
    if record is None:
        return {"installed": False}
    module = MANAGERS[record["manager"]]
    report: dict[str, Any] = {"installed": True, "manager": record["manager"], "removed": [], "kept": []}
    running = module.manager_runs()
    if running:
        report["failures"] = _run(module.stop_commands(record["name"]))
    for name, written in record["files"].items():
        path = Path(name)
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            continue
        if digest(current) == written:
            path.unlink()
            report["removed"].append(name)
        else:
            report["kept"].append(name)
    if running:
        report.setdefault("failures", []).extend(_run(module.after_removal_commands()))
    record_path().unlink(missing_ok=True)
    return report


def status() -> dict[str, Any]:
    """Whether a service is installed for this home, its files intact, its manager running, its proxy answering."""
    record = read_record()
    if record is None:
        return {"installed": False}
    module = MANAGERS[record["manager"]]
    files = {}
    for name, written in record["files"].items():
        try:
            files[name] = "intact" if digest(Path(name).read_bytes()) == written else "changed"
        except FileNotFoundError:
            files[name] = "missing"
    result: dict[str, Any] = {
        "installed": True,
        "manager": record["manager"],
        "name": record["name"],
        "port": record["port"],
        "files": files,
        "manager_runs": module.manager_runs(),
        "start": [" ".join(command) for command in module.start_commands(record["name"])],
    }
    health = daemon.healthy(int(record["port"]))
    result["answering"] = health is not None and daemon.is_ours(health)
    result["by_service"] = bool(result["answering"] and health and health.get("service"))
    if result["manager_runs"]:
        try:
            state = subprocess.run(module.state_command(record["name"]), capture_output=True, text=True, timeout=10)
            result["state"] = " ".join(state.stdout.split())[:200]
        except (OSError, subprocess.TimeoutExpired):
            result["state"] = "unknown"
    return result


def spec_preview(manager: str | None = None) -> tuple[ServiceSpec, dict[str, str]]:
    """The spec and files `install` would write now (for `--print`)."""
    kind = manager or default_manager()
    host, port, grace, _problem = _configured()
    spec = this_home_spec(sys.executable, host, port, grace)
    return spec, MANAGERS[kind].render(spec)
