"""doctor's check of the login service: installed files intact, and its proxy answering."""

from __future__ import annotations

from switch.checks.base import Check, ProxyState, check


def service_check(state: ProxyState) -> Check | None:
    """The login service's finding (None when none is installed for this home)."""
    from switch.errors import SwitchError
    from switch.service import installer

    try:
        record = installer.read_record()
    except SwitchError as exc:
        return check("service", False, exc.message, "switch service install")
    if record is None:
        return None
    status = installer.status()
    name = f"{status['manager']} ({status['name']})"
    damaged = [path for path, found in status["files"].items() if found != "intact"]
    if damaged:
        detail = f"the login service's files changed or are gone: {', '.join(damaged)}"
        return check("service", False, detail, "switch service install")
    if status["answering"]:
        return check("service", True, f"the login service {name} runs this home's proxy")
    start = " && ".join(status["start"])
    if not status["manager_runs"]:
        detail = f"the login service {name} is installed, but no service manager runs here to start it"
        return check("service", False, detail, f"where one runs: {start}; here: switch up")
    return check("service", False, f"the login service {name} does not answer on port {status['port']}", start)
