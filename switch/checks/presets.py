"""Checks of presets: unknown providers in any route or target option, and role-forcing model names."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from switch.config import Settings
    from switch.routing.presets import Preset

from switch.checks.base import Check, check
from switch.checks.wiring import wired_models


def preset_targets(preset: Preset) -> set[str]:
    """Every target any route of `preset` names: roles, kinds, families and fallbacks."""
    from switch.routing.classify import ROLES
    from switch.routing.presets import KINDS

    targets: set[str] = set()
    for harness, routes in preset.sections.items():
        for role in ROLES:
            targets.update(preset.chain(harness, role))
        for family in routes.families:
            targets.update(preset.chain(harness, "orchestrator", family))
        for kind in KINDS:
            targets.update(preset.chain(harness, "orchestrator", kind=kind))
        for long_targets in routes.long_context.values():
            targets.update(long_targets)
    return targets


def limit_checks(preset: Preset, settings: Settings) -> list[Check]:
    """Each target's context window and output limit, as switch knows them (an unknown window is never enforced)."""
    from switch.config import NATIVE, litellm_names
    from switch.ledger.limits import limit_table

    limits = limit_table(settings.models, litellm_names(settings))
    results: list[Check] = []
    for reference in sorted(preset_targets(preset) - {NATIVE}):
        found = limits.of(reference)
        detail = found.summary()
        if found.context_window is None:
            detail += f'; set [models."{reference}"] context_window in config.toml to route and compact by it'
        results.append(check(f"limits:{reference}", True, detail))
    return results


def preset_fix(message: str) -> str:
    """The fix for a preset that does not load: name the missing provider's table when that is the cause."""
    import re

    found = re.search(r"unknown provider '([^']+)'", message)
    if found:
        return (
            f"add a [providers.{found.group(1)}] table to config.toml or correct the target named above; "
            "or pick another preset: switch use kimi-k3"
        )
    return "fix the key named above in that file, or pick another preset: switch use kimi-k3"


def target_option_checks(preset: Preset, providers: set[str]) -> list[Check]:
    """Per-target options (`[targets."provider/model"]`) naming a provider config.toml lacks."""
    from switch.config import NATIVE

    results: list[Check] = []
    for reference in sorted(preset.targets):
        provider = reference.partition("/")[0]
        if reference != NATIVE and provider not in providers:
            where = preset.path or preset.name
            results.append(
                check(
                    f"preset:{preset.name}",
                    False,
                    f"{where}: key 'targets.\"{reference}\"': unknown provider '{provider}' "
                    f"(known: {', '.join(sorted(providers))})",
                    f"correct the key in {where}, or add a [providers.{provider}] table to config.toml",
                )
            )
    return results


def other_preset_checks(active: str | None, providers: set[str], default_model: str) -> list[Check]:
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
            results.append(check(f"preset:{name}", False, exc.message, preset_fix(exc.message)))
            continue
        results.extend(target_option_checks(preset, providers))
    return results


def forced_role_checks(preset: Preset) -> list[Check]:
    """A harness config naming a role-forcing model while the preset splits that harness's roles."""
    from switch.routing.classify import ROLES, forced_role
    from switch.wiring import DEEPAGENTS_MODEL

    findings: dict[str, list[str]] = {}
    fixes: dict[str, list[str]] = {}
    for harness, section, path, setting, model in wired_models():
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
        results.append(check(f"model:{harness}", False, "; ".join(details), fix))
    return results
