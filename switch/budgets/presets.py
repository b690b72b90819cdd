"""The presets that `[[budgets]]` actions switch to, checked against the preset files.

Kept out of `switch.config_budgets`: config is a leaf that knows no presets, and routing reads config, so the
check that needs both lives here, above them, and runs wherever a config is taken into use (`switch serve`,
`up` and `run` at start, the running proxy on each edit, and `switch doctor`).
"""

from __future__ import annotations

from pathlib import Path

from switch.config import Settings
from switch.errors import ConfigError, PresetError
from switch.routing.presets import load_preset, preset_files


def check_budget_presets(settings: Settings, path: Path) -> None:
    """Raise ConfigError naming the key when a budget action names a preset that is missing or does not load."""
    providers = set(settings.providers)
    available = preset_files()
    for number, budget in enumerate(settings.budgets):
        for index, action in enumerate(budget.actions):
            if action.preset is None:
                continue
            key = f"budgets.{number}.actions.{index}.preset"
            if action.preset not in available:
                known = ", ".join(sorted(available)) or "none"
                raise ConfigError(f"{path}: key '{key}': no preset named '{action.preset}' (available: {known})")
            try:
                load_preset(action.preset, providers, settings.defaults.model)
            except PresetError as exc:
                raise ConfigError(
                    f"{path}: key '{key}': preset '{action.preset}' does not load: {exc.message}"
                ) from exc
