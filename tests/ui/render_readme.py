"""Render the README's dashboard screenshot: `python -m tests.ui.render_readme` writes docs/dashboard.png.

It is the snapshot tests' dashboard (the same seeded ledger, frozen clock and UTC), exported by Textual as
SVG and converted to PNG with cairosvg, so the picture in the README is what the tests check. Run it
again whenever the dashboard's look changes.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "docs" / "dashboard.png"
SIZE = (160, 48)


async def _svg(home: Path) -> str:
    from switch.ui.app import make_app

    from tests.ledger_seed import FROZEN_NOW, seed_ledger

    (home / "config.toml").write_text("[server]\nport = 9\n", encoding="utf-8")
    ledger = home / "ledger.db"
    seed_ledger(ledger, 300, FROZEN_NOW, 3 * 86400)
    app = make_app(ledger, clock=lambda: FROZEN_NOW, poll=3600)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.1)
        await app.workers.wait_for_complete()
        await pilot.pause(0.1)
        return app.export_screenshot()


def render(output: Path = OUTPUT) -> Path:
    """Write the PNG (and return its path)."""
    import cairosvg  # type: ignore[import-untyped]

    with tempfile.TemporaryDirectory() as home:
        os.environ["SWITCH_HOME"] = home
        os.environ["TZ"] = "UTC"
        time.tzset()
        svg = asyncio.run(_svg(Path(home)))
    output.parent.mkdir(parents=True, exist_ok=True)
    cairosvg.svg2png(bytestring=svg.encode("utf-8"), write_to=str(output))
    return output


if __name__ == "__main__":
    print(render(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTPUT))
