"""switch: a local routing proxy and cost dashboard for AI coding harnesses."""

import os
import sys
from importlib.machinery import PathFinder

TYPE_CHECKING = False  # harness hooks import this package after every message: no `typing` at start-up
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__version__ = "0.1.0"

# The folders ui/ and harness_presets/ sit beside switch/ in the repository; the wheel installs them inside
# this package (see setup.py) so they never take top-level names other distributions use. Run from a source
# checkout, the same names `switch.ui` and `switch.harness_presets` are served from those folders.
_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
"""The folder this package was imported from (a source checkout's root, or site-packages)."""
_BESIDE = {f"{__name__}.{name}": name for name in ("ui", "harness_presets")}


class _CheckoutFinder:
    """Finds `switch.ui` and `switch.harness_presets` in the folders beside a source checkout's switch/."""

    @staticmethod
    def find_spec(
        fullname: "str", path: "Sequence[str] | None" = None, target: "ModuleType | None" = None
    ) -> "ModuleSpec | None":
        if fullname not in _BESIDE:
            return None
        # Looked up by its full name in the checkout root, the folder's package gets the installed name.
        return PathFinder.find_spec(fullname, [ROOT])


def _serve_checkout_folders() -> None:
    """Put the checkout finder first when this switch/ is a source tree (installed, the folders are inside it)."""
    if any(os.path.isdir(os.path.join(_HERE, folder)) for folder in _BESIDE.values()):
        return
    if not all(os.path.isfile(os.path.join(ROOT, folder, "__init__.py")) for folder in _BESIDE.values()):
        return
    if not any(isinstance(finder, _CheckoutFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _CheckoutFinder())


_serve_checkout_folders()
