"""The proxy stays a set of rooms with one job each: no module grows past what one can read at a sitting."""

from __future__ import annotations

from pathlib import Path

import switch.proxy

MAX_LINES = 400


def test_no_proxy_module_is_over_400_lines() -> None:
    folder = Path(switch.proxy.__file__).parent
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in folder.glob("*.py")}
    assert len(sizes) > 5
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}
