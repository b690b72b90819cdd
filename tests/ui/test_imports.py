"""The dashboard's import lines: no proxy, keys or daemon; ui-internal imports relative; checks free of typer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

UI = Path(__file__).parents[2] / "ui"
FORBIDDEN = ("switch.proxy", "switch.keys", "switch.daemon")


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """Every absolute module an import in `path` names, with `from switch import keys` as `switch.keys`."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            found.append((module, node.level))
            found.extend((f"{module}.{alias.name}", node.level) for alias in node.names if node.level == 0)
    return found


def test_ui_reads_health_through_the_checks_never_the_proxy_keys_or_daemon() -> None:
    offending = [
        f"{path.relative_to(UI.parent)}: {module}"
        for path in sorted(UI.rglob("*.py"))
        for module, level in imported_modules(path)
        if level == 0 and module.startswith(FORBIDDEN)
    ]
    assert offending == []


def test_ui_imports_its_own_modules_relatively() -> None:
    absolute = [
        f"{path.relative_to(UI.parent)}: {module}"
        for path in sorted(UI.rglob("*.py"))
        for module, level in imported_modules(path)
        if level == 0 and (module == "ui" or module.startswith("ui."))
    ]
    assert absolute == []


def test_doctor_checks_and_the_dashboard_import_without_typer() -> None:
    probe = (
        "import sys, switch.checks, switch.ui.app; print(sorted(m for m in sys.modules if m.split('.')[0] == 'typer'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=UI.parent, timeout=120
    )
    assert result.stdout.strip() == "[]"
