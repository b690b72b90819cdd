"""Presets: who serves which role for each harness. One TOML file per preset.

    description = "Native orchestrator, Kimi K3 for subagents and background calls"

    [default]                          # also [claude-code], [codex], [langchain]; all optional
    orchestrator = "native"            # a target, or a list of targets tried in order
    subagent = "baseten/moonshotai/Kimi-K3"
    background = "baseten/moonshotai/Kimi-K3"
    fallback = ["native"]              # tried after a role's own targets
    # fork = "..."                     # optional: Claude Code forks; unset, they go where the orchestrator goes
    # compaction = "..."               # optional: compaction turns; unset, the orchestrator's target (or a
                                       # compacting subagent's own) keeps them, with its prompt cache
    long_context = "baseten/moonshotai/Kimi-K3"   # optional: for a call its targets cannot hold
                                       # (or a table per role: long_context = { orchestrator = "..." })

    [claude-code.families]             # optional: Claude model family → target
    haiku = "baseten/moonshotai/Kimi-K3"

    [targets."baseten/moonshotai/Kimi-K3"]   # optional per-target options
    reasoning = "follow"               # off | follow | minimal | low | medium | high | xhigh | max
    max_output_tokens = 65536

A harness without its own table follows [default]; when the preset has no [default] either, every
role of that harness goes to `[defaults] model` of config.toml.

Shipped presets live in `harness_presets/`, user presets in `$SWITCH_HOME/presets/` (a user preset
of the same name wins). The active preset's name is kept in `$SWITCH_HOME/active-preset`.
"""

from __future__ import annotations

import importlib
import logging
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from switch import locations
from switch.config import NATIVE
from switch.errors import PresetError
from switch.routing.classify import FAMILIES, HARNESSES, ROLES
from switch.settings_checks import refuse_control_characters

log = logging.getLogger("switch.presets")

# The repository's harness_presets/ folder, installed as switch.harness_presets (see setup.py).
# The package's own folder: `importlib.resources` would find the same one, and bring tempfile, shutil,
# zipfile and random into the proxy (about 1 MB kept, and milliseconds of every start) to do it.
SHIPPED_DIR = Path(next(iter(importlib.import_module("switch.harness_presets").__path__)))
SECTIONS = ("default", "claude-code", "codex", "langchain")
REASONING_MODES = ("off", "follow", "none", "minimal", "low", "medium", "high", "xhigh", "max")
DEFAULTS_PRESET = "defaults"
KINDS = ("fork", "compaction")
"""Call kinds a preset section may route on their own; unrouted, they follow the agent whose history they carry."""


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """Per-target knobs a preset may set."""

    reasoning: str = "follow"
    max_output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class HarnessRoutes:
    """The routes of one harness section."""

    roles: dict[str, tuple[str, ...]]
    fallback: tuple[str, ...] = ()
    families: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Targets for a kind of call (`fork`, `compaction`) the section names explicitly.
    kinds: dict[str, tuple[str, ...]] = field(default_factory=dict)
    long_context: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per role: targets for a call whose prompt its own targets' windows cannot hold."""
    # True for a [default] the preset does not name: every role on config.toml's [defaults] model.
    from_defaults: bool = False


@dataclass(frozen=True, slots=True)
class Preset:
    """A validated preset."""

    name: str
    path: Path | None
    description: str
    sections: dict[str, HarnessRoutes]
    targets: dict[str, TargetOptions]
    _long_chains: dict[tuple[str, str, str | None, str | None], tuple[tuple[str, bool], ...]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def routes_for(self, harness: str) -> HarnessRoutes:
        """The section for `harness`, else `default`."""
        return self.sections.get(harness) or self.sections["default"]

    def chain(self, harness: str, role: str, family: str | None = None, kind: str | None = None) -> tuple[str, ...]:
        """Targets to try, in order, for a call (duplicates removed, order kept).

        A fork or a compaction turn re-reads a history another agent built: unless the section routes its kind,
        it goes where that agent goes (a fork and the main thread's compaction: the orchestrator; a subagent's
        compaction: the subagent), so the upstream's prompt cache of that history is hit."""
        routes = self.routes_for(harness)
        own, _role = _own_targets(routes, role, family, kind)
        return tuple(dict.fromkeys((*own, *routes.fallback)))

    def long_chain(
        self, harness: str, role: str, family: str | None = None, kind: str | None = None
    ) -> tuple[tuple[str, bool], ...]:
        """`chain` with the role's `long_context` targets after its own, each marked True when it is one
        (tried only for a call its own targets cannot hold). Kept once worked out: it is asked for every call."""
        key = (harness, role, family, kind)
        found = self._long_chains.get(key)
        if found is None:
            found = self._long_chains[key] = self._long_chain(harness, role, family, kind)
        return found

    def _long_chain(
        self, harness: str, role: str, family: str | None, kind: str | None
    ) -> tuple[tuple[str, bool], ...]:
        routes = self.routes_for(harness)
        own, role = _own_targets(routes, role, family, kind)
        seen: set[str] = set()
        ordered: list[tuple[str, bool]] = []
        marked = [(reference, False) for reference in own]
        marked += [(reference, True) for reference in routes.long_context.get(role, ())]
        marked += [(reference, False) for reference in routes.fallback]
        for reference, is_long in marked:
            if reference not in seen:
                seen.add(reference)
                ordered.append((reference, is_long))
        return tuple(ordered)

    def options(self, reference: str) -> TargetOptions:
        """The options for one target."""
        return self.targets.get(reference, _DEFAULT_OPTIONS)


_DEFAULT_OPTIONS = TargetOptions()


def _own_targets(routes: HarnessRoutes, role: str, family: str | None, kind: str | None) -> tuple[tuple[str, ...], str]:
    """A call's own targets (before fallbacks) and the role whose routes they are: a kind the section names
    explicitly goes there; otherwise a fork and the main thread's compaction go where the orchestrator goes."""
    explicit = routes.kinds.get(kind) if kind is not None else None
    if explicit is not None:
        return explicit, role
    if kind == "fork" or (kind == "compaction" and role != "subagent"):
        role = "orchestrator"
    return routes.families.get(family or "") or routes.roles.get(role) or routes.roles["orchestrator"], role


def _references(value: Any, where: str, path: Path, providers: set[str]) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise PresetError(f"{path}: key '{where}': expected a target ('native' or 'provider/model') or a list of them")
    for reference in values:
        if reference == NATIVE:
            continue
        provider, sep, model = reference.partition("/")
        if not sep or not model:
            raise PresetError(f"{path}: key '{where}': '{reference}' is not 'native' or 'provider/model'")
        if provider not in providers:
            raise PresetError(
                f"{path}: key '{where}': unknown provider '{provider}' (allowed: {', '.join(sorted(providers))})"
            )
    return tuple(values)


def _long_context(table: dict[str, Any], section: str, path: Path, providers: set[str]) -> dict[str, tuple[str, ...]]:
    """A section's `long_context`: one target (or list) for every role, or a table of them per role."""
    value = table.get("long_context")
    if value is None:
        return {}
    if not isinstance(value, dict):
        every = _references(value, f"{section}.long_context", path, providers)
        return dict.fromkeys(ROLES, every)
    for role in value:
        if role not in ROLES:
            raise PresetError(f"{path}: unknown key '{section}.long_context.{role}' (allowed: {', '.join(ROLES)})")
    return {role: _references(value[role], f"{section}.long_context.{role}", path, providers) for role in value}


def _defaults_routes(model: str) -> HarnessRoutes:
    return HarnessRoutes({role: (model,) for role in ROLES}, from_defaults=True)


def parse_preset(name: str, path: Path | None, raw: dict[str, Any], providers: set[str], default_model: str) -> Preset:
    """Validate a parsed preset table (harnesses it does not name get `default_model`); errors name the file
    and the key."""
    where_file = path or Path(f"<{name}>")
    allowed_top = {"description", "targets", *SECTIONS}
    for key in raw:
        if key not in allowed_top:
            raise PresetError(f"{where_file}: unknown key '{key}' (allowed: {', '.join(sorted(allowed_top))})")
    sections: dict[str, HarnessRoutes] = {}
    for section in SECTIONS:
        table = raw.get(section)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise PresetError(f"{where_file}: key '{section}': expected a table")
        allowed = {*ROLES, *KINDS, "fallback", "families", "long_context"}
        for key in table:
            if key not in allowed:
                raise PresetError(
                    f"{where_file}: unknown key '{section}.{key}' (allowed: {', '.join(sorted(allowed))})"
                )
        if "orchestrator" not in table:
            raise PresetError(f"{where_file}: key '{section}.orchestrator' is required")
        roles: dict[str, tuple[str, ...]] = {
            role: _references(table[role], f"{section}.{role}", where_file, providers)
            for role in ROLES
            if role in table
        }
        for role in ROLES:
            roles.setdefault(role, roles["orchestrator"])
        fallback = (
            _references(table["fallback"], f"{section}.fallback", where_file, providers) if "fallback" in table else ()
        )
        families_raw = table.get("families", {})
        if not isinstance(families_raw, dict):
            raise PresetError(f"{where_file}: key '{section}.families': expected a table")
        families: dict[str, tuple[str, ...]] = {}
        for family, value in families_raw.items():
            if family not in FAMILIES:
                raise PresetError(
                    f"{where_file}: unknown key '{section}.families.{family}' (allowed: {', '.join(FAMILIES)})"
                )
            families[family] = _references(value, f"{section}.families.{family}", where_file, providers)
        kinds = {
            kind: _references(table[kind], f"{section}.{kind}", where_file, providers)
            for kind in KINDS
            if kind in table
        }
        sections[section] = HarnessRoutes(
            roles, fallback, families, kinds, _long_context(table, section, where_file, providers)
        )
    sections.setdefault("default", _defaults_routes(default_model))
    targets: dict[str, TargetOptions] = {}
    raw_targets = raw.get("targets", {})
    if not isinstance(raw_targets, dict):
        raise PresetError(f"{where_file}: key 'targets': expected a table of [targets.\"provider/model\"]")
    for reference, options in raw_targets.items():
        if not isinstance(options, dict):
            raise PresetError(f"{where_file}: key 'targets.{reference}': expected a table")
        reasoning = options.get("reasoning", "follow")
        if reasoning not in REASONING_MODES:
            raise PresetError(
                f"{where_file}: key 'targets.{reference}.reasoning': '{reasoning}' is not allowed "
                f"(allowed: {', '.join(REASONING_MODES)})"
            )
        cap = options.get("max_output_tokens")
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0):
            raise PresetError(f"{where_file}: key 'targets.{reference}.max_output_tokens': expected a positive integer")
        unknown = set(options) - {"reasoning", "max_output_tokens"}
        if unknown:
            raise PresetError(
                f"{where_file}: unknown key 'targets.{reference}.{sorted(unknown)[0]}' "
                "(allowed: max_output_tokens, reasoning)"
            )
        targets[reference] = TargetOptions(str(reasoning), cap)
    description = raw.get("description", "")
    return Preset(name, path, str(description), sections, targets)


def defaults_preset(model: str) -> Preset:
    """The preset used while none is active: every role on `[defaults] model`."""
    return Preset(
        DEFAULTS_PRESET,
        None,
        f"every call to {model} ([defaults] model)",
        {"default": _defaults_routes(model)},
        {},
    )


def preset_files() -> dict[str, Path]:
    """Every preset by name: shipped ones, overridden by user ones of the same name."""
    files: dict[str, Path] = {}
    for directory in (SHIPPED_DIR, locations.presets_dir()):
        if directory.is_dir():
            for path in sorted(directory.glob("*.toml")):
                files[path.stem] = path
    return files


def load_preset(name: str, providers: set[str], default_model: str) -> Preset:
    """Load and validate the preset called `name`; `default_model` serves the harnesses it does not name."""
    path = preset_files().get(name)
    if path is None:
        known = ", ".join(sorted(preset_files())) or "none"
        raise PresetError(f"no preset named '{name}' (available: {known})")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PresetError(f"{path}: not valid TOML: {exc}") from exc
    refuse_control_characters(raw, path, PresetError)
    return parse_preset(name, path, raw, providers, default_model)


def active_file() -> Path:
    """Where the active preset's name is kept."""
    return locations.home() / "active-preset"


def active_name() -> str | None:
    """The active preset's name, or None when none was chosen."""
    try:
        name = active_file().read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return name or None


def missing_active(name: str) -> str:
    """The error line for an active preset whose file is gone."""
    known = ", ".join(sorted(preset_files())) or "none"
    return (
        f"{active_file()}: the active preset '{name}' does not exist (presets: {known}); "
        "choose one with `switch use NAME`, or `switch use --none` for [defaults] model"
    )


def invalid_active(name: str, problem: str) -> str:
    """The error line for an active preset that does not load (`problem` says why)."""
    return f"the active preset '{name}' is invalid: {problem}; fix it, or choose another with `switch use NAME`"


def load_active(providers: set[str], default_model: str) -> Preset | None:
    """The active preset, None when none is chosen; PresetError (file, key, fix) when it cannot load."""
    name = active_name()
    if name is None:
        return None
    if name not in preset_files():
        raise PresetError(missing_active(name))
    try:
        return load_preset(name, providers, default_model)
    except PresetError as exc:
        raise PresetError(invalid_active(name, exc.message)) from None


def set_active(name: str) -> None:
    """Make `name` the active preset (atomically, so a running proxy never reads half a name)."""
    target = active_file()
    locations.ensure_private_dir(target.parent)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(name + "\n", encoding="utf-8")
    os.chmod(temporary, 0o600)
    os.replace(temporary, target)


def use_preset(name: str, providers: set[str], default_model: str) -> Preset:
    """Validate the preset called `name` and make it active (what `switch use` and the dashboard do)."""
    preset = load_preset(name, providers, default_model)
    set_active(preset.name)
    return preset


class PresetManager:
    """Holds the active preset and reloads it when its files change, keeping the last good one."""

    def __init__(self, providers: set[str], fallback_model: str) -> None:
        self.providers = providers
        self.fallback_model = fallback_model
        self.error: str | None = None
        # While set (a proxy failing open), these routes serve every call; files are still watched,
        # so `error` tells when the active preset loads again.
        self.pinned: Preset | None = None
        self._good: Preset | None = None  # the last preset that loaded, kept while the files are broken
        self._signature: tuple[Any, ...] = ()
        self.active = self._load()

    def pin(self, preset: Preset) -> None:
        """Serve every call with `preset` until `unpin`."""
        self.pinned = self.active = preset

    def unpin(self) -> None:
        """Back to the active preset."""
        self.pinned = None
        self.active = self._load()

    def _state(self) -> tuple[Any, ...]:
        entries: list[Any] = []
        for path in (active_file(), *preset_files().values()):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(entries)

    def _load(self) -> Preset:
        preset = self._load_files()
        return self.pinned if self.pinned is not None else preset

    def _load_files(self) -> Preset:
        self._signature = self._state()
        name = active_name()
        if name is None:
            self.error = None
            self._good = defaults_preset(self.fallback_model)
            return self._good
        try:
            preset = load_preset(name, self.providers, self.fallback_model)
        except PresetError as exc:
            self.error = exc.message
            log.error("keeping the previous routes: %s", exc.message)
            return self._good if self._good is not None else defaults_preset(self.fallback_model)
        self.error = None
        self._good = preset
        return preset

    def reconfigure(self, providers: set[str], fallback_model: str) -> None:
        """Validate presets against a new provider set and default model (config.toml changed)."""
        self.providers = providers
        self.fallback_model = fallback_model
        before = self.active
        self.active = self._load()
        if self.active is not before:
            log.info("active preset is now '%s'", self.active.name)

    def refresh(self) -> bool:
        """Reload when any preset file or the active choice changed; True when routes changed."""
        if self._state() == self._signature:
            return False
        before = self.active
        self.active = self._load()
        if self.active is not before:
            log.info("active preset is now '%s'", self.active.name)
        return self.active is not before


__all__ = ["HARNESSES", "KINDS", "Preset", "PresetManager", "TargetOptions", "load_preset", "set_active", "use_preset"]
