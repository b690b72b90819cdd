"""What `switch doctor` checks and the dashboard's health pane shows: config, presets, keys, the proxy, wiring.

Plain functions returning plain values (no typer, no Textual), so the CLI and the UI share one source
of truth. Heavy or side-effecting modules (keys, daemon, wiring) are imported where they are used.
Key values never leave this module: results name where a key comes from, never the key.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from switch.config import Settings

from switch.checks.base import Check, PresetStatus, ProxyState, check
from switch.checks.budgets import budget_checks
from switch.checks.presets import (
    forced_role_checks,
    limit_checks,
    other_preset_checks,
    preset_fix,
    preset_targets,
    target_option_checks,
)
from switch.checks.probes import probe_native, probe_targets
from switch.checks.service import service_check
from switch.checks.websocket import websocket_check
from switch.checks.wiring import codex_login_check, window_checks, wiring_checks


def ledger_summary(ledger: dict[str, Any]) -> tuple[bool, str, str | None]:
    """(ok, one line, the fix) for the `ledger` part of a running proxy's /healthz."""
    cause = f" (last error: {ledger['last_error']})" if ledger.get("last_error") else ""
    if not ledger.get("writer_alive", True):
        return (
            False,
            f"writer stopped{cause}; the next call restarts it",
            "if this repeats, see the proxy log (switch status shows where) and restart: switch down && switch up",
        )
    if ledger.get("unsaved"):
        return (
            False,
            f"{ledger['unsaved']} calls held only in memory: neither ledger.db nor its spill file "
            f"can be written{cause}",
            "free disk space under SWITCH_HOME (they are written once possible; stopping the proxy now loses them)",
        )
    damage = _ledger_damage() if ledger.get("spill_bytes") or ledger.get("unsaved") else None
    if damage is not None:
        # The file itself is the cause (garbage, another program's database): no lock or disk space fixes that.
        cause, fix = damage
        held = f"{ledger.get('spilled_rows', 0)} rows wait in the spill file" if ledger.get("spill_bytes") else ""
        unsaved = f"{ledger['unsaved']} calls held only in memory" if ledger.get("unsaved") else ""
        return (
            False,
            f"{' and '.join(part for part in (held, unsaved) if part)}: {cause}",
            (f"{fix}; the proxy then writes them there on its own"),
        )
    if ledger.get("file_changed"):
        return (
            False,
            f"{ledger['file_changed']}; {ledger.get('spilled_rows', 0)} rows wait in the spill file{cause}",
            "leave a switch ledger or nothing at that path: the proxy writes the waiting rows there on its own",
        )
    if ledger.get("spill_bytes"):
        return (
            False,
            f"{ledger.get('spilled_rows', 0)} rows ({ledger['spill_bytes']} bytes) wait in the spill file: "
            f"ledger.db is not writable{cause}",
            "close what holds ledger.db (another program or a second switch) and check free disk space; "
            "the rows are replayed on their own",
        )
    return True, f"writer alive, {ledger.get('queued', 0)} queued, nothing spilled", None


def _ledger_damage() -> tuple[str, str] | None:
    """(what is wrong with ledger.db, the fix) when the file is not a ledger this switch reads, else None."""
    from switch.ledger.db import ledger_problem

    problem = ledger_problem()
    if problem is None:
        return None
    cause, _, fix = problem.partition("; ")
    return cause, fix


def ledger_file_check() -> Check | None:
    """A failed finding when ledger.db is damaged, foreign or from a newer switch (None: it reads, or none yet)."""
    damage = _ledger_damage()
    return None if damage is None else check("ledger-file", False, *damage)


def config_check() -> tuple[Settings | None, Check]:
    """The loaded settings (None when config.toml cannot be read as settings) and the finding about them."""
    from switch import locations
    from switch.budgets.presets import check_budget_presets
    from switch.config import check_references, load_settings
    from switch.errors import SwitchError

    path = locations.config_file()
    try:
        settings = load_settings(check_default=False)
        check_budget_presets(settings, path)
    except SwitchError as exc:
        return None, check("config", False, exc.message, f"fix the key named above in {path}")
    try:
        check_references(settings, path)
    except SwitchError as exc:
        # The rest still means something (keys, proxy, wiring): keep the settings, fail the check.
        provider = settings.defaults.model.partition("/")[0]
        fix = (
            f'edit {path}: set [defaults] model = "native" or "PROVIDER/MODEL" with one of: '
            f"{', '.join(sorted(settings.providers))} (or add a [providers.{provider}] table)"
        )
        return settings, check("config", False, exc.message, fix)
    if not path.exists():
        return settings, check("config", True, f"no config.toml ({path}): running on the built-in defaults")
    return settings, check("config", True, f"config.toml is valid ({path})")


def fallback_port() -> int:
    """The port this home's proxy most likely uses when config.toml cannot be loaded (for the dashboard, which
    reads the proxy's state only through these checks)."""
    from switch import daemon

    return daemon.fallback_port()


def running_config_check(state: ProxyState) -> Check | None:
    """Whether this home's running proxy runs with config.toml as it is now (None: no proxy says which it runs)."""
    from datetime import datetime

    from switch import locations
    from switch.config import file_digest

    config = state.health.get("config") if state.health is not None and state.ours else None
    if not isinstance(config, dict):
        return None
    # The proxy of this home reads this home's file; what it reports is compared, never opened.
    path = locations.config_file()
    current = file_digest(path)
    loaded_at = config.get("loaded_at")
    try:
        since = datetime.fromtimestamp(float(loaded_at)).strftime("%Y-%m-%d %H:%M:%S")  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        since = "start-up"
    rejected = config.get("rejected")
    if isinstance(rejected, dict) and rejected.get("digest") == current:
        return check(
            "config:running",
            False,
            f"the running proxy rejected {path}: {rejected.get('error')}; it still runs on the config "
            f"it loaded at {since}",
            f"fix the key named above in {path} (the proxy applies the file within a second once it is valid)",
        )
    if config.get("digest") != current:
        return check(
            "config:running",
            False,
            f"running config is older than config.toml: {path} changed after the proxy loaded it at {since}",
            "run `switch doctor` again in a second; if this stays, restart the proxy: switch down && switch up",
        )
    restart = config.get("restart_needed")
    if isinstance(restart, list) and restart:
        keys = ", ".join(str(key) for key in restart)
        return check(
            "config:running",
            False,
            f"{path} changes [server] {keys}; the running proxy applies [server] settings only after a restart",
            "switch down && switch up",
        )
    return check("config:running", True, f"the running proxy uses {path} as it is now")


def fail_open_check(state: ProxyState) -> Check | None:
    """A failed check while this home's proxy fails open (serves natively or refuses: config error), else None."""
    degraded = state.health.get("fail_open") if state.health is not None and state.ours else None
    if not isinstance(degraded, dict):
        return None
    return check(
        "proxy:fail-open",
        False,
        f"{degraded.get('notice')}: the proxy could not use its configuration at start-up: {degraded.get('reason')}",
        "fix the file named above; the running proxy picks the fix up within a second and routes by preset again",
    )


def preset_statuses(settings: Settings) -> list[PresetStatus]:
    """Every preset (shipped and the user's), each loaded and validated, marking the active one."""
    from switch.errors import SwitchError
    from switch.routing.presets import active_name, load_preset, preset_files

    providers = set(settings.providers)
    active = active_name()
    statuses: list[PresetStatus] = []
    for name in preset_files():
        try:
            preset = load_preset(name, providers, settings.defaults.model)
        except SwitchError as exc:
            statuses.append(PresetStatus(name, "", name == active, exc.message, None))
            continue
        statuses.append(PresetStatus(name, preset.description, name == active, None, preset))
    return statuses


def key_sources(settings: Settings) -> dict[str, str | None]:
    """Where each configured provider's usable key comes from (`env:NAME`, `keyring`, `file`), or None."""
    from switch import keys

    return keys.sources({name: provider.api_key_env for name, provider in settings.providers.items()})


def _key_checks(settings: Settings, used: list[str]) -> list[Check]:
    from switch import keys

    results: list[Check] = []
    try:
        keys.read_file()
    except keys.KeysFileError as exc:
        results.append(
            check("keys-file", False, exc.message, f"fix or delete {keys.file_store_path()}, then `switch keys set`")
        )
    found = keys.find_all({p: (settings.providers[p].api_key_env if p in settings.providers else None) for p in used})
    for provider in used:
        configured = settings.providers.get(provider)
        if configured is not None and configured.auth == "none":
            results.append(check(f"key:{provider}", True, f'{provider} needs no key (auth = "none")'))
            continue
        env_var = configured.api_key_env if configured else None
        entry = found[provider]
        fix = f"export {env_var}=... or run `switch keys set {provider}`" if env_var else f"switch keys set {provider}"
        if entry.problem is not None:
            detail = entry.problem
        elif entry.key:
            detail = f"{provider} key from {entry.source}"
        else:
            detail = f"no key for {provider}, which the active routes use"
        results.append(check(f"key:{provider}", bool(entry.key), detail, fix))
    return results


def probe_proxy(port: int, timeout: float = 0.5) -> ProxyState:
    """Ask `/healthz` on 127.0.0.1:`port`."""
    from switch import daemon

    return ProxyState(port, daemon.healthy(port, timeout=timeout))


def proxy_state(settings: Settings, timeout: float = 0.5) -> ProxyState:
    """This home's proxy: the port of its running record, else the configured one, and what answers there."""
    from switch import daemon

    return probe_proxy(daemon.proxy_port(settings.server.port), timeout)


def proxy_check(state: ProxyState) -> Check:
    """Whether this home's proxy answers, and the fix when another home's proxy holds the port."""
    from switch import daemon

    if state.health is not None and not state.ours:
        return check(
            "proxy",
            False,
            f"port {state.port} is held by {state.holder}, not by this home's proxy",
            f"switch up --port {daemon.free_port()} (or set [server] port in config.toml)",
        )
    answering = state.health is not None
    return check(
        "proxy",
        answering,
        f"proxy answers on 127.0.0.1:{state.port}" if answering else f"nothing answers on 127.0.0.1:{state.port}",
        "switch up",
    )


def diagnose(probe: bool = False) -> list[Check]:
    """Run every check; each failed one carries its fix."""
    from switch import wiring
    from switch.config import NATIVE
    from switch.errors import SwitchError
    from switch.routing.presets import PresetManager, active_name, load_preset

    settings, config = config_check()
    if settings is None:
        # The proxy may still run (on the last config it could load): say what it runs with.
        state = probe_proxy(fallback_port())
        running = running_config_check(state)
        degraded = fail_open_check(state)
        return [
            config,
            proxy_check(state),
            *([degraded] if degraded is not None else []),
            *([running] if running is not None else []),
            *wiring_checks(state),
        ]
    results: list[Check] = [config]
    providers = set(settings.providers)
    name = active_name()
    preset = None
    if name is None:
        results.append(check("preset", True, f"no preset chosen: every call goes to {settings.defaults.model}"))
        if config["ok"]:
            preset = PresetManager(providers, settings.defaults.model).active
    else:
        try:
            preset = load_preset(name, providers, settings.defaults.model)
            results.append(check("preset", True, f"active preset '{name}' is valid"))
        except SwitchError as exc:
            results.append(check("preset", False, exc.message, preset_fix(exc.message)))
    if preset is not None:
        results.extend(target_option_checks(preset, providers))
        results.extend(limit_checks(preset, settings))
    results.extend(other_preset_checks(name, providers, settings.defaults.model))
    targets = preset_targets(preset) if preset is not None else set()
    # An unknown provider is reported where it is named (config, preset); no key can fix it.
    used = {t.split("/", 1)[0] for t in targets if t != NATIVE}
    results.extend(_key_checks(settings, sorted(used & providers)))
    state = proxy_state(settings)
    results.append(proxy_check(state))
    degraded = fail_open_check(state)
    if degraded is not None:
        results.append(degraded)
    running = running_config_check(state)
    if running is not None:
        results.append(running)
    if state.health is not None and isinstance(state.health.get("ledger"), dict):
        results.append(check("ledger", *ledger_summary(state.health["ledger"])))
    damaged = ledger_file_check()
    if damaged is not None:
        results.append(damaged)
    if settings.team is not None:
        from switch.checks.team import team_check

        results.append(team_check(settings.team))
    service = service_check(state)
    if service is not None:
        results.append(service)
    results.extend(wiring_checks(state))
    upgrade = websocket_check(settings, state)
    if upgrade is not None:
        results.append(upgrade)
    if preset is not None and wiring.state("codex") != "off":
        from switch.routing.classify import ROLES

        native = any(NATIVE in preset.chain("codex", role) for role in ROLES)
        login = codex_login_check(native)
        if login is not None:
            results.append(login)
    if preset is not None:
        results.extend(window_checks(preset, settings))
    results.extend(budget_checks(settings, state.health))
    if preset is not None:
        results.extend(forced_role_checks(preset))
    for variable in ("ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"):
        if os.environ.get(variable):
            results.append(
                check(
                    f"env:{variable}",
                    False,
                    f"{variable} is set in your shell and overrides the "
                    "model Claude Code asks for (routing by role may not see what you expect)",
                    f"unset {variable}",
                )
            )
    base = os.environ.get("ANTHROPIC_BASE_URL")
    if base and not base.startswith(wiring.proxy_url(state.port)):
        results.append(
            check(
                "env:ANTHROPIC_BASE_URL",
                False,
                f"ANTHROPIC_BASE_URL={base} bypasses switch",
                f"export ANTHROPIC_BASE_URL={wiring.proxy_url(state.port)}",
            )
        )
    if probe:
        results.extend(probe_targets(settings, targets))
        if preset is not None:
            results.extend(probe_native(settings, preset))
    return results


__all__ = [
    "Check",
    "PresetStatus",
    "ProxyState",
    "check",
    "config_check",
    "diagnose",
    "fail_open_check",
    "fallback_port",
    "key_sources",
    "ledger_file_check",
    "ledger_summary",
    "preset_statuses",
    "probe_proxy",
    "proxy_check",
    "proxy_state",
    "running_config_check",
]
