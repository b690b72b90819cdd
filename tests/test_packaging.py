"""The built distribution takes no top-level package name but `switch`, and works from that layout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders at the top of the repository that the wheel must carry inside `switch`.
BESIDE = ("ui", "harness_presets")


def build_lib(tmp_path: Path) -> Path:
    """Run setuptools' own build of the pure-Python tree (what the wheel zips) into `tmp_path`."""
    lib = tmp_path / "lib"
    subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(tmp_path)]
        + ["build_py", "--build-lib", str(lib)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return lib


def shipped_files(folder: Path) -> set[str]:
    """Every source or data file under `folder`, relative to it."""
    return {
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.suffix in {".py", ".tcss", ".toml"} and "__pycache__" not in path.parts
    }


def test_the_build_installs_ui_and_presets_inside_switch_only(tmp_path: Path) -> None:
    lib = build_lib(tmp_path)

    assert sorted(entry.name for entry in lib.iterdir()) == ["switch"]
    for name in BESIDE:
        assert shipped_files(ROOT / name) == shipped_files(lib / "switch" / name), name


def test_the_installed_layout_serves_the_dashboard_and_shipped_presets(tmp_path: Path) -> None:
    lib = build_lib(tmp_path)
    probe = (
        "import switch.ui.app, switch.routing.presets as p; "
        "print(switch.ui.app.__file__); print(sorted(f.stem for f in p.SHIPPED_DIR.glob('*.toml')))"
    )
    # Only the built tree on the path, so nothing can come from the checkout.
    env = {**os.environ, "PYTHONPATH": str(lib), "SWITCH_HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True, text=True, timeout=60
    )
    module_file, presets = result.stdout.splitlines()

    assert Path(module_file).is_relative_to(lib / "switch" / "ui")
    assert presets == str(sorted(path.stem for path in (ROOT / "harness_presets").glob("*.toml")))
