"""What `switch doctor` checks and the dashboard's health pane shows: config, presets, keys, the proxy, wiring.

Plain functions returning plain values (no typer, no Textual), so the CLI and the UI share one source
of truth. Heavy or side-effecting modules (keys, daemon, wiring) are imported where they are used.
Key values never leave this module: results name where a key comes from, never the key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from switch.config import Settings
    from switch.routing.presets import Preset


class Check(TypedDict):
    """One finding: `fix` names the command or edit that resolves a failed check."""

    check: str
    ok: bool
    detail: str
    fix: str | None


@dataclass(frozen=True)
class PresetStatus:
    """One preset as the dashboard lists it: loaded, or the reason it cannot be."""

    name: str
    description: str
    active: bool
    problem: str | None
    preset: Preset | None


@dataclass(frozen=True)
class ProxyState:
    """What answers `/healthz` on this home's proxy port (None: nothing does)."""

    port: int
    health: dict[str, Any] | None

    @property
    def ours(self) -> bool:
        """Whether the answering proxy serves this SWITCH_HOME."""
        from switch import daemon

        return self.health is not None and daemon.is_ours(self.health)

    @property
    def holder(self) -> str:
        """Who holds the port when it is another home's proxy, in words."""
        from switch import daemon

        return daemon.describe_other(self.health or {})

    @property
    def uptime_s(self) -> float:
        """How long the proxy has been up, as it reports."""
        return float((self.health or {}).get("uptime_s") or 0)


def _check(name: str, ok: bool, detail: str, fix: str | None = None) -> Check:
    return {"check": name, "ok": ok, "detail": detail, "fix": None if ok else fix}


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
    if ledger.get("spill_bytes"):
        return (
            False,
            f"{ledger.get('spilled_rows', 0)} rows ({ledger['spill_bytes']} bytes) wait in the spill file: "
            f"ledger.db is not writable{cause}",
            "close what holds ledger.db (another program or a second switch) and check free disk space; "
            "the rows are replayed on their own",
        )
    return True, f"writer alive, {ledger.get('queued', 0)} queued, nothing spilled", None


def config_check() -> tuple[Settings | None, Check]:
    """The loaded settings (None when config.toml cannot be read as settings) and the finding about them."""
    from switch import locations
    from switch.config import check_references, load_settings
    from switch.errors import SwitchError

    path = locations.config_file()
    try:
        settings = load_settings()
    except SwitchError as exc:
        return None, _check("config", False, exc.message, f"fix the key named above in {path}")
    try:
        check_references(settings, path)
    except SwitchError as exc:
        # The rest still means something (keys, proxy, wiring): keep the settings, fail the check.
        provider = settings.defaults.model.partition("/")[0]
        fix = (
            f'edit {path}: set [defaults] model = "native" or "PROVIDER/MODEL" with one of: '
            f"{', '.join(sorted(settings.providers))} (or add a [providers.{provider}] table)"
        )
        return settings, _check("config", False, exc.message, fix)
    return settings, _check("config", True, "config.toml is valid")


def _fallback_port() -> int:
    """The port a proxy of this home most likely uses when config.toml cannot be loaded."""
    from switch import daemon, locations
    from switch.config import Server

    port = _toml_table(locations.config_file()).get("server", {}).get("port")
    return daemon.proxy_port(port if isinstance(port, int) and not isinstance(port, bool) else Server().port)


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
        return _check(
            "config:running",
            False,
            f"the running proxy rejected {path}: {rejected.get('error')}; it still runs on the config "
            f"it loaded at {since}",
            f"fix the key named above in {path} (the proxy applies the file within a second once it is valid)",
        )
    if config.get("digest") != current:
        return _check(
            "config:running",
            False,
            f"running config is older than config.toml: {path} changed after the proxy loaded it at {since}",
            "run `switch doctor` again in a second; if this stays, restart the proxy: switch down && switch up",
        )
    restart = config.get("restart_needed")
    if isinstance(restart, list) and restart:
        keys = ", ".join(str(key) for key in restart)
        return _check(
            "config:running",
            False,
            f"{path} changes [server] {keys}; the running proxy applies [server] settings only after a restart",
            "switch down && switch up",
        )
    return _check("config:running", True, f"the running proxy uses {path} as it is now")


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
            _check("keys-file", False, exc.message, f"fix or delete {keys.file_store_path()}, then `switch keys set`")
        )
    found = keys.find_all({p: (settings.providers[p].api_key_env if p in settings.providers else None) for p in used})
    for provider in used:
        configured = settings.providers.get(provider)
        env_var = configured.api_key_env if configured else None
        entry = found[provider]
        fix = f"export {env_var}=... or run `switch keys set {provider}`" if env_var else f"switch keys set {provider}"
        if entry.problem is not None:
            detail = entry.problem
        elif entry.key:
            detail = f"{provider} key from {entry.source}"
        else:
            detail = f"no key for {provider}, which the active routes use"
        results.append(_check(f"key:{provider}", bool(entry.key), detail, fix))
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
        return _check(
            "proxy",
            False,
            f"port {state.port} is held by {state.holder}, not by this home's proxy",
            f"switch up --port {daemon.free_port()} (or set [server] port in config.toml)",
        )
    answering = state.health is not None
    return _check(
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
        state = probe_proxy(_fallback_port())
        running = running_config_check(state)
        return [config, proxy_check(state), *([running] if running is not None else [])]
    results: list[Check] = [config]
    providers = set(settings.providers)
    name = active_name()
    preset = None
    if name is None:
        results.append(_check("preset", True, f"no preset chosen: every call goes to {settings.defaults.model}"))
        if config["ok"]:
            preset = PresetManager(providers, settings.defaults.model).active
    else:
        try:
            preset = load_preset(name, providers, settings.defaults.model)
            results.append(_check("preset", True, f"active preset '{name}' is valid"))
        except SwitchError as exc:
            results.append(_check("preset", False, exc.message, _preset_fix(exc.message)))
    if preset is not None:
        results.extend(_target_option_checks(preset, providers))
    results.extend(_other_preset_checks(name, providers, settings.defaults.model))
    targets = _preset_targets(preset) if preset is not None else set()
    # An unknown provider is reported where it is named (config, preset); no key can fix it.
    used = {t.split("/", 1)[0] for t in targets if t != NATIVE}
    results.extend(_key_checks(settings, sorted(used & providers)))
    state = proxy_state(settings)
    results.append(proxy_check(state))
    running = running_config_check(state)
    if running is not None:
        results.append(running)
    if state.health is not None and isinstance(state.health.get("ledger"), dict):
        results.append(_check("ledger", *ledger_summary(state.health["ledger"])))
    results.extend(_wiring_checks(state))
    if preset is not None:
        results.extend(_forced_role_checks(preset))
    for variable in ("ANTHROPIC_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"):
        if os.environ.get(variable):
            results.append(
                _check(
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
            _check(
                "env:ANTHROPIC_BASE_URL",
                False,
                f"ANTHROPIC_BASE_URL={base} bypasses switch",
                f"export ANTHROPIC_BASE_URL={wiring.proxy_url(state.port)}",
            )
        )
    if probe:
        results.extend(_probe(settings, targets))
        if preset is not None:
            results.extend(_probe_native(settings, preset))
    return results


def _preset_targets(preset: Preset) -> set[str]:
    """Every target any route of `preset` names: roles, families and fallbacks."""
    from switch.routing.classify import ROLES

    targets: set[str] = set()
    for harness, routes in preset.sections.items():
        for role in ROLES:
            targets.update(preset.chain(harness, role))
        for family in routes.families:
            targets.update(preset.chain(harness, "orchestrator", family))
    return targets


def _preset_fix(message: str) -> str:
    """The fix for a preset that does not load: name the missing provider's table when that is the cause."""
    import re

    found = re.search(r"unknown provider '([^']+)'", message)
    if found:
        return (
            f"add a [providers.{found.group(1)}] table to config.toml or correct the target named above; "
            "or pick another preset: switch use kimi-k3"
        )
    return "fix the key named above in that file, or pick another preset: switch use kimi-k3"


def _target_option_checks(preset: Preset, providers: set[str]) -> list[Check]:
    """Per-target options (`[targets."provider/model"]`) naming a provider config.toml lacks."""
    from switch.config import NATIVE

    results: list[Check] = []
    for reference in sorted(preset.targets):
        provider = reference.partition("/")[0]
        if reference != NATIVE and provider not in providers:
            where = preset.path or preset.name
            results.append(
                _check(
                    f"preset:{preset.name}",
                    False,
                    f"{where}: key 'targets.\"{reference}\"': unknown provider '{provider}' "
                    f"(known: {', '.join(sorted(providers))})",
                    f"correct the key in {where}, or add a [providers.{provider}] table to config.toml",
                )
            )
    return results


def _other_preset_checks(active: str | None, providers: set[str], default_model: str) -> list[Check]:
    """The user's own presets that `switch use` would refuse (the shipped ones are tested)."""
    from switch import locations
    from switch.errors import SwitchError
    from switch.routing.presets import load_preset, preset_files

    results: list[Check] = []
    user_dir = locations.presets_dir().resolve()
    for name, path in preset_files().items():
        if name == active or path.resolve().parent != user_dir:
            continue
        try:
            preset = load_preset(name, providers, default_model)
        except SwitchError as exc:
            results.append(_check(f"preset:{name}", False, exc.message, _preset_fix(exc.message)))
            continue
        results.extend(_target_option_checks(preset, providers))
    return results


def _wired_url(harness: str) -> tuple[Path, str, str | None]:
    """(file, setting, URL) of where switch's wiring sends `harness` (URL None: not found in the file)."""
    from switch import wiring

    if harness == "claude":
        path = wiring.claude_settings_path()
        env = _json_object(path).get("env")
        url = env.get("ANTHROPIC_BASE_URL") if isinstance(env, dict) else None
        return path, "env.ANTHROPIC_BASE_URL", url if isinstance(url, str) else None
    keys: tuple[str, ...]
    if harness == "codex":
        path, keys = wiring.codex_config_path(), ("model_providers", "switch", "base_url")
    else:
        path, keys = wiring.deepagents_config_path(), ("models", "providers", "switch", "base_url")
    value: Any = _toml_table(path)
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return path, "[" + ".".join(keys[:-1]) + "] " + keys[-1], value if isinstance(value, str) else None


def _wiring_checks(state: ProxyState) -> list[Check]:
    """Each harness switch wired: still wired, and to the port this home's proxy runs on."""
    from urllib.parse import urlsplit

    from switch import wiring

    results: list[Check] = []
    for harness in ("claude", "codex", "langchain"):
        wired = wiring.state(harness)
        name = f"wiring:{harness}"
        if wired == "stale":
            fix = f"switch {harness} off && switch {harness} on"
            results.append(_check(name, False, f"{harness} wiring is stale", fix))
            continue
        if wired == "on":
            path, setting, url = _wired_url(harness)
            try:
                port = urlsplit(url).port if url else None
            except ValueError:
                port = None
            if port != state.port:
                runs = "runs" if state.health is not None else "is configured to run"
                results.append(
                    _check(
                        name,
                        False,
                        f"{path} sets {setting} = {url}, but this home's proxy {runs} on port {state.port}: "
                        f"{harness} calls miss the proxy",
                        f"switch {harness} on",
                    )
                )
                continue
        results.append(_check(name, True, f"{harness} wiring is {wired}"))
    return results


def _wired_models() -> list[tuple[str, str, Path, str, str]]:
    """(harness, preset section, file, setting, model) for each model name a harness config file sets."""
    from switch import wiring

    found: list[tuple[str, str, Path, str, str]] = []
    path = wiring.deepagents_config_path()
    models = _toml_table(path).get("models")
    if isinstance(models, dict):
        for key in ("default", "recent"):
            if isinstance(models.get(key), str):
                found.append(("langchain", "langchain", path, f"[models] {key}", models[key]))
    path = wiring.codex_config_path()
    codex = _toml_table(path)
    if isinstance(codex.get("model"), str):
        found.append(("codex", "codex", path, "model", codex["model"]))
    profiles = codex.get("profiles")
    for name, profile in profiles.items() if isinstance(profiles, dict) else []:
        if isinstance(profile, dict) and isinstance(profile.get("model"), str):
            found.append(("codex", "codex", path, f"[profiles.{name}] model", profile["model"]))
    path = wiring.claude_settings_path()
    claude = _json_object(path)
    env = claude.get("env")
    for key, value in (("model", claude.get("model")), ("env.ANTHROPIC_MODEL", (env or {}).get("ANTHROPIC_MODEL"))):
        if isinstance(value, str):
            found.append(("claude", "claude-code", path, key, value))
    return found


def _toml_table(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}  # missing or broken: the wiring check speaks for a broken file switch wrote


def _json_object(path: Path) -> dict[str, Any]:
    try:
        parsed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _forced_role_checks(preset: Preset) -> list[Check]:
    """A harness config naming a role-forcing model while the preset splits that harness's roles."""
    from switch.routing.classify import ROLES, forced_role
    from switch.wiring import DEEPAGENTS_MODEL

    findings: dict[str, list[str]] = {}
    fixes: dict[str, list[str]] = {}
    for harness, section, path, setting, model in _wired_models():
        # deepagents names models `provider:model`; the proxy sees only the part after the colon.
        role = forced_role(model.split(":", 1)[-1] if harness == "langchain" else model)
        chains = {other: preset.chain(section, other) for other in ROLES}
        if role is None or len(set(chains.values())) == 1:
            continue
        missed = " and ".join(other for other in ROLES if chains[other] != chains[role])
        findings.setdefault(harness, []).append(
            f'{path} sets {setting} = "{model}": every {harness} call goes to the {role} route '
            f"({chains[role][0]}), though preset '{preset.name}' sends {missed} calls elsewhere"
        )
        fixes.setdefault(harness, []).append(
            {
                "langchain": f'set {setting} = "{DEEPAGENTS_MODEL}" in {path}',
                "codex": f'set {setting} = "gpt-5.5" (any Codex model name but switch/<role>) in {path}',
                "claude": f'set "{setting}" to a Claude model name such as "sonnet" (or remove it) in {path}',
            }[harness]
        )
    results: list[Check] = []
    for harness, details in findings.items():
        fix = "; ".join(fixes[harness])
        if harness == "langchain":
            fix = f"start `dcode -M {DEEPAGENTS_MODEL}`, or {fix}"
        results.append(_check(f"model:{harness}", False, "; ".join(details), fix))
    return results


PROBE_TIMEOUT_S = 20.0
REACH_TIMEOUT_S = 5.0


def _probe(settings: Settings, targets: set[str]) -> list[Check]:
    """A 1-token call to each routed target, sent exactly as the proxy sends it (path and credentials)."""
    import httpx

    from switch import keys
    from switch.config import NATIVE
    from switch.errors import SwitchError
    from switch.routing.resolve import resolve_target
    from switch.upstream_api import auth_headers, endpoint

    results: list[Check] = []
    for reference in sorted(targets - {NATIVE}):
        if reference.partition("/")[0] not in settings.providers:
            continue  # reported where it is named
        target = resolve_target(settings, reference)
        try:
            key, _source = keys.lookup(target.provider, target.api_key_env)
        except SwitchError:
            key = None  # the key checks say why
        if key is None:
            # No call can be made without a key (the key check says so); whether it answers still matters.
            results.append(_reach(f"probe:{reference}", target.api, target.base_url, f"[providers.{target.provider}]"))
            continue
        if target.api == "anthropic":
            body: dict[str, Any] = {
                "model": target.model,
                "max_tokens": 1,
                "messages": [{"role": "user", "content": "ping"}],
            }
        elif target.api == "openai-responses":
            body = {"model": target.model, "input": "ping", "max_output_tokens": 16}
        else:
            body = {
                "model": target.model,
                "messages": [{"role": "user", "content": "ping"}],
                "max_completion_tokens": 1,
            }
        url, headers = endpoint(target.api, target.base_url), dict(auth_headers(target.api, key))
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=PROBE_TIMEOUT_S, trust_env=False)
            ok = response.status_code < 400
            detail = f"{reference}: HTTP {response.status_code}"
            if not ok:
                detail += " " + response.text[:160].replace(key, "***")
        except httpx.HTTPError as exc:
            ok, detail = False, f"{reference}: cannot reach {url} ({type(exc).__name__})"
        results.append(
            _check(
                f"probe:{reference}",
                ok,
                detail,
                f"check the key (switch keys set {target.provider}), the model name and [providers.{target.provider}] "
                "base_url in config.toml",
            )
        )
    return results


def _native_apis(preset: Preset) -> set[str]:
    """The native upstream APIs some route of `preset` sends calls to (each harness has its own)."""
    from switch.config import NATIVE
    from switch.routing.classify import ROLES

    own = {"claude-code": ("anthropic",), "codex": ("openai-responses",), "langchain": ("openai-responses",)}
    apis: set[str] = set()
    for section, routes in preset.sections.items():
        chains = [preset.chain(section, role) for role in ROLES]
        chains += [preset.chain(section, "orchestrator", family) for family in routes.families]
        if any(NATIVE in chain for chain in chains):
            # [default] serves every harness without its own table: Claude Code's API or OpenAI's.
            apis.update(own.get(section, ("anthropic", "openai-responses")))
    return apis


def _probe_native(settings: Settings, preset: Preset) -> list[Check]:
    """Whether each native provider the active preset routes to answers at all (no credentials needed)."""
    from switch.config import NATIVE
    from switch.routing.resolve import resolve_target

    results: list[Check] = []
    for api in sorted(_native_apis(preset)):
        target = resolve_target(settings, NATIVE, api)  # type: ignore[arg-type]
        table = f"[providers.{target.provider}]"
        results.append(_reach(f"probe:native ({target.provider})", api, target.base_url, table))
    return results


def _reach(name: str, api: str, base_url: str, table: str) -> Check:
    """Whether `base_url` answers HTTP at `api`'s endpoint; any answer below 500 (401, 404 included) counts.

    Native calls carry the harness's own credentials, which doctor does not have: reaching the host is
    what can be checked, and what a dead route gets wrong (a harness retries for minutes)."""
    import httpx

    from switch.upstream_api import endpoint

    url = endpoint(api, base_url)
    fix = (
        f"make {base_url} reachable (network, VPN, firewall) or correct {table} base_url in config.toml; "
        "meanwhile route around it: switch use kimi-k3"
    )
    try:
        response = httpx.post(url, json={}, timeout=REACH_TIMEOUT_S, trust_env=False)
    except httpx.TimeoutException as exc:
        return _check(name, False, f"{url} did not answer within {REACH_TIMEOUT_S:g} s ({type(exc).__name__})", fix)
    except httpx.HTTPError as exc:
        return _check(name, False, f"cannot reach {url} ({type(exc).__name__}: {exc})", fix)
    if response.status_code >= 500:
        return _check(name, False, f"{url} answers HTTP {response.status_code}: the provider is failing", fix)
    return _check(name, True, f"{url} is reachable (HTTP {response.status_code} without credentials)")
