"""What a Codex request is for (its request kind and parent thread) reaches the ledger, `switch calls`, `export`
and the call detail."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import openai
from switch.ui.screens.detail import FIRST, label
from typer.testing import CliRunner

from switch.cli import app
from switch.ledger.recorder import Recorder
from tests.conftest import Proxy, drain
from tests.fake_upstream import Turn


def _codex_headers(kind: str, thread: str, parent: str | None = None) -> dict[str, str]:
    metadata = {"session_id": "s-main", "thread_id": thread, "agent_name": "/root", "request_kind": kind}
    if parent:
        metadata["parent_thread_id"] = parent
    return {
        "originator": "codex_exec",
        "session-id": "s-main",
        "thread-id": thread,
        "x-codex-turn-metadata": json.dumps(metadata),
    }


def test_codex_compaction_and_spawned_thread_are_recorded_listed_and_exported(
    ledger_proxy: tuple[Proxy, Recorder], isolated_home: Path
) -> None:
    proxy, recorder = ledger_proxy
    assert proxy.upstream is not None
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
    for headers in (
        _codex_headers("turn", "s-main"),
        _codex_headers("compaction", "s-main"),
        _codex_headers("turn", "t-child", parent="s-main"),
    ):
        proxy.upstream.script(Turn(text="ok"))
        client.responses.create(model="gpt-5.5", input="hi", extra_headers=headers)
    drain(recorder, 3)
    runner = CliRunner()
    listed = runner.invoke(app, ["calls", "--json"])
    rows = [json.loads(line) for line in listed.output.splitlines() if line.startswith("{")]
    assert [(r["request_kind"], r["parent_agent_id"], r["role"]) for r in rows] == [
        (None, None, "orchestrator"),
        ("compaction", None, "orchestrator"),  # counted as the orchestrator's, on its target
        (None, "s-main", "orchestrator"),
    ]
    text = runner.invoke(app, ["calls"]).output.splitlines()
    assert "[compaction]" in text[-2] and "[compaction]" not in text[-1] and text[-1].endswith("parent s-main")
    exported = runner.invoke(app, ["export", "--format", "csv"]).output
    table = list(csv.DictReader(io.StringIO(exported[exported.index("id,") :])))
    assert [row["request_kind"] for row in table] == ["", "compaction", ""]
    assert table[-1]["parent_agent_id"] == "s-main"
    jsonl = [json.loads(line) for line in runner.invoke(app, ["export"]).output.splitlines() if line.startswith("{")]
    assert jsonl[1]["request_kind"] == "compaction"
    # The call detail shows them beside the role, in words.
    assert FIRST.index("request_kind") == FIRST.index("role") + 1
    assert label("request_kind") == "request kind" and label("parent_agent_id") == "parent agent"
