"""`switch spend` on a ledger the real proxy wrote: calls refused before any provider (400, 413) are no model,
provider or mapping row, and are shown as their own labelled count."""

from __future__ import annotations

import json
from pathlib import Path

from switch.ledger.recorder import Recorder
from tests.commands import run_switch
from tests.conftest import Proxy, drain
from tests.ui.test_honest_numbers import refuse_two_calls


def spend(*args: str) -> str:
    done = run_switch("spend", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_spend_by_model_has_no_blank_row_and_counts_refused_calls_apart(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    proxy, recorder = ledger_proxy
    refuse_two_calls(proxy)
    drain(recorder, 3)
    for by, served in (
        ("model", "moonshotai/Kimi-K3"),
        ("provider", "baseten"),
        ("requested", "claude-opus-5-5 → moonshotai/Kimi-K3"),
    ):
        report = json.loads(spend("--by", by, "--json"))
        assert [group["grp"] for group in report["groups"]] == [served], by
        assert report["groups"][0]["unpriced"] == 0
        assert report["rejected_before_provider"] == 2
        lines = spend("--by", by).splitlines()
        assert len(lines) == 3, lines  # header, the one model, the refused count
        assert lines[1].startswith(served[:28])
        assert "unpriced" not in lines[1]
        assert lines[2] == "rejected before any provider: 2 calls (no model, no cost)"
    # Still calls, and errors, of the role and harness that sent them.
    totals = json.loads(spend("--json"))["groups"][0]
    assert (totals["calls"], totals["errors"], totals["unpriced"]) == (3, 2, 0)
    roles = json.loads(spend("--by", "role", "--json"))["groups"]
    assert [(group["grp"], group["calls"]) for group in roles] == [("orchestrator", 3)]
