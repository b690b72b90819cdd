"""No module reaches into another module's private names (import-linter checks the package lines; this the names)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
# Source folders and the package name each has once installed (ui/ installs as switch.ui).
PACKAGES = {"switch": "switch", "ui": "switch.ui"}


@dataclass(frozen=True)
class Breach:
    """One use of another module's private name."""

    where: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line} uses {self.what}"


def is_private(name: str) -> bool:
    """A leading underscore marks a name private; dunders (`__version__`) are public by convention."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_name(path: Path) -> tuple[str, bool]:
    """The installed dotted name of the source file at `path`, and whether it is a package's `__init__`."""
    relative = path.relative_to(ROOT).with_suffix("")
    folder, *rest = relative.parts
    is_package = rest[-1] == "__init__"
    if is_package:
        rest = rest[:-1]
    return ".".join([PACKAGES[folder], *rest]), is_package


def absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an `ImportFrom` names, resolving leading dots against the importer."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def ours(module: str) -> bool:
    """Whether `module` is part of switch (ui's old top-level name included)."""
    return module.split(".")[0] in {"switch", "ui", "harness_presets"}


def breaches(source: str, importer: str, is_package: bool, modules: frozenset[str]) -> Iterator[Breach]:
    """Private names of other modules that `source` imports or reads off an imported module."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = absolute(importer, is_package, node)
            if not ours(target):
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:
                    aliases[alias.asname or alias.name] = submodule
                # A package may use its own private submodules; nobody else's private names.
                own_submodule = submodule in modules and importer.startswith(target + ".")
                if is_private(alias.name) and target != importer and not own_submodule:
                    yield Breach(importer, node.lineno, f"{target}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if ours(alias.name) and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and is_private(node.attr):
            module = aliases.get(node.value.id)
            if module is not None and module != importer:
                yield Breach(importer, node.lineno, f"{module}.{node.attr}")


def source_files() -> list[Path]:
    """Every Python module of switch and the dashboard."""
    return sorted(path for folder in PACKAGES for path in (ROOT / folder).rglob("*.py"))


def test_no_module_imports_another_modules_private_name() -> None:
    files = source_files()
    modules = frozenset(module_name(path)[0] for path in files)
    found = [
        str(breach)
        for path in files
        for breach in breaches(path.read_text(encoding="utf-8"), *module_name(path), modules)
    ]
    assert found == []


def test_nothing_imports_the_dashboard_or_presets_by_their_folder_names() -> None:
    # Installed, only switch.ui and switch.harness_presets exist: a bare `ui` import works in a checkout only.
    found = []
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                for name in names
                if name.split(".")[0] in {"ui", "harness_presets"}
            ]
    assert found == []


MODULES = frozenset({"switch.proxy.relay", "switch.proxy.app", "switch.proxy", "switch.ui.app", "switch.ui.data"})


@pytest.mark.parametrize(
    ("source", "importer", "expected"),
    [
        ("from switch.proxy.relay import Relay, _parse_json", "switch.proxy.app", ["switch.proxy.relay._parse_json"]),
        ("from .relay import _parse_json", "switch.proxy.app", ["switch.proxy.relay._parse_json"]),
        (
            "from switch.proxy import relay\nrelay._parse_json(b'')",
            "switch.proxy.app",
            ["switch.proxy.relay._parse_json"],
        ),
        ("import switch.proxy.relay as r\nr._cache", "switch.ui.app", ["switch.proxy.relay._cache"]),
        ("from .data import _rows", "switch.ui.app", ["switch.ui.data._rows"]),
        ("from switch.proxy.relay import Relay, __all__", "switch.proxy.app", []),
        ("from collections import _chain", "switch.proxy.app", []),
        ("def f(self):\n    return self._guard", "switch.proxy.app", []),
    ],
)
def test_the_check_sees_private_names_however_they_are_reached(source: str, importer: str, expected: list[str]) -> None:
    assert [breach.what for breach in breaches(source, importer, False, MODULES)] == expected


@given(st.from_regex(r"_[a-z][a-z0-9_]{0,12}", fullmatch=True))
def test_any_private_name_from_another_module_is_a_breach(name: str) -> None:
    source = f"from switch.proxy.relay import Relay, {name}"
    assert [breach.what for breach in breaches(source, "switch.proxy.app", False, MODULES)] == [
        f"switch.proxy.relay.{name}"
    ]
