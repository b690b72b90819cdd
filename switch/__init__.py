"""switch: a local routing proxy and cost dashboard for AI coding harnesses."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

__version__ = "0.1.0"

# The folders ui/ and harness_presets/ sit beside switch/ in the repository; the wheel installs them inside
# this package (pyproject's package-dir) so they never take top-level names other distributions use. Run
# from a source checkout, the same names `switch.ui` and `switch.harness_presets` are served from those folders.
_HERE = Path(__file__).resolve().parent
_BESIDE = {f"{__name__}.{name}": _HERE.parent / name for name in ("ui", "harness_presets")}


class _CheckoutFinder:
    """Finds `switch.ui` and `switch.harness_presets` in the folders beside a source checkout's switch/."""

    @staticmethod
    def find_spec(
        fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        folder = _BESIDE.get(fullname)
        if folder is None:
            return None
        return spec_from_file_location(fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def _serve_checkout_folders() -> None:
    """Put the checkout finder first when this switch/ is a source tree (installed, the folders are inside it)."""
    if any((_HERE / name.rpartition(".")[2]).is_dir() for name in _BESIDE):
        return
    if not all((folder / "__init__.py").is_file() for folder in _BESIDE.values()):
        return
    if not any(isinstance(finder, _CheckoutFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder())


_serve_checkout_folders()
