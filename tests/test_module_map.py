"""Every module has a job a reader can find: the README's "How it is built" table names each module under
switch/ and ui/ with its job, and names none that is not there; every package sits in one of the layers the
import contracts state (docs/architecture.md says why this replaces a line cap)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("switch", "ui")
ROW = re.compile(r"^\| `(?P<folder>[\w/]+/)`(?P<modules_only> \(modules\))? \| (?P<text>.*) \|$")
# A module named with its job: `name.py` followed by "(the job)" or ": the job".
NAMED_WITH_JOB = re.compile(r"`(?P<path>[\w/]+\.py)`(?= \(|: )")
NAMED = re.compile(r"`(?P<path>[\w/]+\.py)`")


def has_code(path: Path) -> bool:
    """Whether a module holds more than a docstring (an `__init__.py` that only says what its package is does not)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        and not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        for node in body
    )


def modules_needing_a_row() -> set[str]:
    """Every module of switch/ and ui/ a reader may open, as a path from the repository root."""
    return {
        path.relative_to(ROOT).as_posix()
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "__init__.py" or has_code(path)
    }


def map_rows(readme: str) -> list[tuple[str, bool, str]]:
    """(folder, only its own modules, text) for each row of the table in "How it is built"."""
    section = readme.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            rows.append((match["folder"], bool(match["modules_only"]), match["text"]))
    return rows


def mapped(rows: list[tuple[str, bool, str]]) -> tuple[set[str], set[str]]:
    """(modules named with their job in their folder's row, names in the table that resolve to no file)."""
    with_job: set[str] = set()
    dangling: set[str] = set()
    for folder, modules_only, text in rows:
        for match in NAMED_WITH_JOB.finditer(text):
            path = folder + match["path"]
            if not modules_only or "/" not in match["path"]:
                with_job.add(path)
        for match in NAMED.finditer(text):
            # A row may point at a module of another folder (`proxy/failures.py` from protocols' row).
            candidates = (folder + match["path"], "switch/" + match["path"], match["path"])
            if not any((ROOT / candidate).is_file() for candidate in candidates):
                dangling.add(f"{folder}: {match['path']}")
    return with_job, dangling


def test_the_readme_map_names_every_module_with_its_job_and_no_missing_one() -> None:
    rows = map_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(rows) > 10
    with_job, dangling = mapped(rows)
    modules = modules_needing_a_row()
    assert sorted(modules - with_job) == [], "modules the README's map does not name with their job"
    assert sorted(with_job - modules) == [], "modules the README's map names that are not there"
    assert sorted(dangling) == []


def test_the_map_check_sees_a_module_without_a_job_or_one_that_is_gone() -> None:
    rows = [
        ("switch/proxy/", False, "`app.py` (the app), `relay.py`: the loop, `meter.py`, `gone.py` (was here)"),
        ("switch/", True, "`config.py` (settings), `proxy/app.py` (from elsewhere)"),
    ]
    with_job, dangling = mapped(rows)
    assert with_job == {"switch/proxy/app.py", "switch/proxy/relay.py", "switch/proxy/gone.py", "switch/config.py"}
    assert dangling == {"switch/proxy/: gone.py"}


def _layer_names(contract: dict[str, object]) -> list[str]:
    layers = contract["layers"]
    assert isinstance(layers, list)
    return [name.strip() for layer in layers for name in str(layer).split("|")]


def test_every_package_is_in_a_layer_of_the_import_contracts() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {contract["id"]: contract for contract in config["tool"]["importlinter"]["contracts"]}
    switch = ROOT / "switch"
    top = {f"switch.{path.stem}" for path in switch.glob("*.py") if path.name != "__init__.py"}
    top |= {f"switch.{path.parent.name}" for path in switch.glob("*/__init__.py")}
    assert sorted((top | {"ui"}) - set(_layer_names(contracts["layers"]))) == []
    ui = ROOT / "ui"
    dashboard = {f"ui.{path.stem}" for path in ui.glob("*.py") if path.name != "__init__.py"}
    dashboard |= {f"ui.{path.parent.name}" for path in ui.glob("*/__init__.py")}
    assert sorted(dashboard - set(_layer_names(contracts["dashboard-layers"]))) == []
    panes = {f"ui.panes.{path.stem}" for path in (ui / "panes").glob("*.py")} - {"ui.panes.__init__", "ui.panes.base"}
    assert sorted(panes - set(contracts["panes-apart"]["modules"])) == []
