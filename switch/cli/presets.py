"""`switch use NAME|--none`, `switch presets [--json]`, `switch presets show NAME`."""

from __future__ import annotations

import json
from typing import Any

import typer


def _settings() -> Any:
    from switch.config import load_settings

    return load_settings()


def _routing_settings() -> tuple[set[str], str]:
    """The provider names and `[defaults] model` a preset is validated against."""
    settings = _settings()
    return set(settings.providers), settings.defaults.model


def _refuse_broken_active(active: str | None, rows: list[dict[str, Any]]) -> None:
    """After the list: an active preset that cannot load gets its own `switch: …` line and exit code 2."""
    from switch.errors import PresetError
    from switch.routing.presets import invalid_active, missing_active

    if active is None:
        return
    row = next((row for row in rows if row["name"] == active), None)
    if row is None:
        raise PresetError(missing_active(active))
    if row["error"]:
        raise PresetError(invalid_active(active, row["error"]))


def _describe(preset: Any) -> dict[str, Any]:
    from switch.checks.presets import preset_targets
    from switch.config import litellm_names
    from switch.ledger.limits import limit_table
    from switch.routing.classify import ROLES
    from switch.routing.presets import KINDS

    settings = _settings()
    limits = limit_table(settings.models, litellm_names(settings))
    harnesses: dict[str, Any] = {}
    for harness, routes in preset.sections.items():
        harnesses[harness] = {
            **{role: list(preset.chain(harness, role)) for role in ROLES},
            # Where forks and compaction turns go: their own key when the section names one, else the orchestrator's.
            "kinds": {kind: list(preset.chain(harness, "orchestrator", kind=kind)) for kind in KINDS},
            "kinds_named": sorted(routes.kinds),
            "fallback": list(routes.fallback),
            "families": {family: list(chain) for family, chain in routes.families.items()},
            "long_context": {role: list(chain) for role, chain in routes.long_context.items()},
            "from_defaults": routes.from_defaults,
        }
    return {
        "name": preset.name,
        "description": preset.description,
        "file": str(preset.path) if preset.path else None,
        "routes": harnesses,
        "targets": {
            reference: {"reasoning": options.reasoning, "max_output_tokens": options.max_output_tokens}
            for reference, options in preset.targets.items()
        },
        "limits": {
            reference: limits.of(reference).describe() | {"text": limits.of(reference).summary()}
            for reference in sorted(preset_targets(preset))
            if reference != "native"
        },
    }


def register(app: typer.Typer) -> None:
    """Add the commands to `app`."""
    presets_app = typer.Typer(help="List and inspect routing presets.", invoke_without_command=True)

    @presets_app.callback()
    def presets(
        ctx: typer.Context,
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """List presets, marking the active one."""
        if ctx.invoked_subcommand is not None:
            return
        from switch.errors import SwitchError
        from switch.routing.presets import active_name, load_preset, preset_files

        providers, default_model = _routing_settings()
        active = active_name()
        rows = []
        for name, path in preset_files().items():
            try:
                description = load_preset(name, providers, default_model).description
                problem = None
            except SwitchError as exc:
                description, problem = "", exc.message
            rows.append(
                {
                    "name": name,
                    "active": name == active,
                    "file": str(path),
                    "description": description,
                    "error": problem,
                }
            )
        if as_json:
            typer.echo(json.dumps({"active": active, "presets": rows}, indent=2))
            _refuse_broken_active(active, rows)
            return
        if active is None:
            typer.echo("No preset chosen: every call goes to [defaults] model. Choose one with `switch use NAME`.")
        for row in rows:
            mark = "*" if row["active"] else " "
            text = row["description"] if not row["error"] else f"INVALID: {row['error']}"
            typer.echo(f"{mark} {row['name']:<12} {text}")
        _refuse_broken_active(active, rows)

    @presets_app.command("show")
    def show(name: str, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Show one preset's routes per harness and role."""
        from switch.routing.presets import load_preset

        preset = load_preset(name, *_routing_settings())
        described = _describe(preset)
        if as_json:
            typer.echo(json.dumps(described, indent=2))
            return
        typer.echo(f"{preset.name}: {preset.description}")
        for harness, routes in described["routes"].items():
            if routes["from_defaults"]:
                others = [h for h in ("claude-code", "codex", "langchain") if h not in described["routes"]]
                typer.echo(f"  {', '.join(others) or 'other harnesses'}: not named by this preset, [defaults] model")
            else:
                typer.echo(f"  [{harness}]")
            for role in ("orchestrator", "subagent", "background"):
                typer.echo(f"    {role:<13} {' → '.join(routes[role])}")
            for family, chain in routes["families"].items():
                typer.echo(f"    {family:<13} {' → '.join(chain)}")
            for kind, chain in routes["kinds"].items():
                how = "" if kind in routes["kinds_named"] else "  (as the orchestrator: keeps its cache)"
                typer.echo(f"    {kind:<13} {' → '.join(chain)}{how}")
            for role, chain in routes["long_context"].items():
                typer.echo(f"    {role:<13} long context: {' → '.join(chain)}")
        if described["limits"]:
            typer.echo("  windows:")
            for reference, found in described["limits"].items():
                typer.echo(f"    {reference}: {found['text']}")

    app.add_typer(presets_app, name="presets")

    @app.command()
    def use(
        name: str = typer.Argument(None, help="A preset (`switch presets` lists them)."),
        none: bool = typer.Option(False, "--none", help="Choose no preset: every call goes to [defaults] model."),
    ) -> None:
        """Make NAME the active preset, or with --none go back to [defaults] model (a running proxy follows)."""
        from switch.errors import SwitchError
        from switch.routing.presets import active_file, preset_files, use_preset

        if none == (name is not None):
            known = ", ".join(sorted(preset_files())) or "none"
            raise SwitchError(f"say `switch use NAME` (presets: {known}) or `switch use --none`, not both or neither")
        if none:
            model = _settings().defaults.model
            # Removing the choice is what "no preset" means; a running proxy sees the file go within a second.
            active_file().unlink(missing_ok=True)
            typer.echo(f"No preset: every call goes to {model} ([defaults] model).")
            return
        preset = use_preset(name, *_routing_settings())
        typer.echo(f"Active preset: {preset.name} — {preset.description}")
