"""`switch use NAME`, `switch presets [--json]`, `switch presets show NAME`."""

from __future__ import annotations

import json
from typing import Any

import typer


def _routing_settings() -> tuple[set[str], str]:
    """The provider names and `[defaults] model` a preset is validated against."""
    from switch.config import load_settings

    settings = load_settings()
    return set(settings.providers), settings.defaults.model


def _describe(preset: Any) -> dict[str, Any]:
    from switch.routing.classify import ROLES

    harnesses: dict[str, Any] = {}
    for harness, routes in preset.sections.items():
        harnesses[harness] = {
            **{role: list(preset.chain(harness, role)) for role in ROLES},
            "fallback": list(routes.fallback),
            "families": {family: list(chain) for family, chain in routes.families.items()},
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
            return
        if active is None:
            typer.echo("No preset chosen: every call goes to [defaults] model. Choose one with `switch use NAME`.")
        for row in rows:
            mark = "*" if row["active"] else " "
            text = row["description"] if not row["error"] else f"INVALID: {row['error']}"
            typer.echo(f"{mark} {row['name']:<12} {text}")

    @presets_app.command("show")
    def show(name: str, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Show one preset's routes per harness and role."""
        from switch.errors import SwitchError
        from switch.routing.presets import load_preset

        try:
            preset = load_preset(name, *_routing_settings())
        except SwitchError as exc:
            typer.echo(f"switch: {exc.message}", err=True)
            raise typer.Exit(2) from exc
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

    app.add_typer(presets_app, name="presets")

    @app.command()
    def use(name: str) -> None:
        """Make NAME the active preset (a running proxy follows within a second)."""
        from switch.errors import SwitchError
        from switch.routing.presets import use_preset

        try:
            preset = use_preset(name, *_routing_settings())
        except SwitchError as exc:
            typer.echo(f"switch: {exc.message}", err=True)
            raise typer.Exit(2) from exc
        typer.echo(f"Active preset: {preset.name} — {preset.description}")
