"""Packaging that pyproject.toml cannot say alone: ui/ and harness_presets/ install under the `switch` package."""

from setuptools import find_namespace_packages, setup

# Folders kept at the top of the repository that install inside `switch`, so the wheel takes no top-level
# name but `switch` (other distributions ship packages called `ui`).
BESIDE = ("ui", "harness_presets")


def packages(include: list[str]) -> list[str]:
    """Packages (data-only folders too) matching `include`, without bytecode caches."""
    return find_namespace_packages(include=include, exclude=["*__pycache__*"])


setup(
    package_dir={f"switch.{name}": name for name in BESIDE},
    packages=packages(["switch", "switch.*"])
    + [f"switch.{package}" for package in packages([*BESIDE, *(f"{name}.*" for name in BESIDE)])],
)
