"""Every figure the README states about prices, savings and presets, recomputed from what switch ships (the
bundled price table, the status-line code, the preset files), so the README cannot drift from them."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from switch.config import Settings
from switch.ledger.pricing import PriceTable
from switch.ledger.recorder import Recorder
from switch.routing.presets import SHIPPED_DIR
from switch.statusline import line_for
from tests.ledger_seed import kimi_call, pricer_for

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
KIMI = ("baseten", "moonshotai/Kimi-K3")
GLM = ("baseten", "zai-org/GLM-5.2")
OPUS = ("anthropic", "claude-opus-5-5")
NOW = 1_795_000_000.0

# The session the README's status-line example shows: (role, served model, calls, input, cached, output tokens).
EXAMPLE_SESSION = (
    ("orchestrator", KIMI, 12, 4_000, 36_000, 900),
    ("subagent", GLM, 30, 6_000, 14_000, 1_500),
)


def one_line(text: str) -> str:
    """The README's text with its line breaks undone, so a sentence can be matched whole."""
    return re.sub(r"\s+", " ", text)


def per_million(provider: str, model: str) -> dict[str, float]:
    price = PriceTable({}).lookup(provider, model)
    assert price is not None, f"{provider}/{model} has no bundled price"
    return price.per_million()


def dollars(value: float) -> str:
    """A price as the README writes it: `$3`, `$0.30`, `$15`."""
    return f"${value:.0f}" if value == int(value) else f"${value:.2f}"


def compared(ours: float, theirs: float) -> str:
    """`25 % less` / `50 % more`: our price against theirs, rounded to a whole percent."""
    change = round((ours - theirs) / theirs * 100)
    return f"{abs(change)} % {'more' if change > 0 else 'less'}"


def test_kimi_list_price_is_the_bundled_one() -> None:
    price = per_million(*KIMI)
    stated = (
        f"{dollars(price['input'])} per million input tokens, {dollars(price['cached_input'])} per million cached "
        f"input tokens, {dollars(price['output'])} per million output tokens"
    )
    assert stated in one_line(README)


@pytest.mark.parametrize("model", [KIMI, GLM], ids=["kimi-k3", "glm-5.2"])
def test_the_stated_price_differences_against_claude_are_the_bundled_ones(model: tuple[str, str]) -> None:
    ours, opus = per_million(*model), per_million(*OPUS)
    text = one_line(README)
    name = "Kimi K3" if model == KIMI else "GLM-5.2"
    sentence = (
        f"{name} costs {compared(ours['input'], opus['input'])} than `claude-opus-5-5` per uncached input token, "
        f"{compared(ours['cached_input'], opus['cached_input'])} per cached input token and "
        f"{compared(ours['output'], opus['output'])} per output token"
    )
    assert sentence in text
    # The commands that show those prices are in the same passage.
    assert f"`switch prices {model[0]}/{model[1]}`" in text and "`switch prices claude-opus-5-5`" in text


def example_calls() -> list[Any]:
    calls = []
    offset = 0.0
    for role, (provider, model), count, uncached, cached, output in EXAMPLE_SESSION:
        for _ in range(count):
            offset += 1
            calls.append(
                kimi_call(
                    NOW + offset,
                    session_id="readme-example",
                    role=role,
                    provider=provider,
                    served_model=model,
                    input_tokens=uncached,
                    cache_read_tokens=cached,
                    output_tokens=output,
                    usage_reported=True,
                )
            )
    return calls


def test_the_status_line_example_is_what_switch_prints_for_the_session_described(isolated_home: Path) -> None:
    path = isolated_home / "ledger.db"
    recorder = Recorder(pricer_for(Settings()), database=path, spill=isolated_home / "spill.jsonl")
    recorder.start()
    for record in example_calls():
        recorder.submit(record)
    recorder.close(timeout=60)
    line = line_for("readme-example", path)
    fenced = re.search(r"```\n(switch · orchestrator [^\n]*)\n```", README)
    assert fenced is not None, "the README's status-line example"
    assert fenced.group(1) == line
    text = one_line(README)
    import sqlite3

    saved = dict(
        sqlite3.connect(path).execute(
            "SELECT role, 100.0 * SUM(native_cost_micros - cost_micros) / SUM(native_cost_micros) FROM calls"
            " GROUP BY role"
        )
    )
    assert (
        f"(the orchestrator's calls saved {saved['orchestrator']:.0f} %, the subagents' {saved['subagent']:.0f} %)"
        in text
    )
    for role, (_provider, model), count, uncached, cached, output in EXAMPLE_SESSION:
        described = (
            f"{count} {role} calls on {model.split('/')[-1]} of {uncached:,} input, {cached:,} cached and "
            f"{output:,} output tokens each"
        )
        assert described in text, described


def preset(name: str) -> dict[str, Any]:
    return tomllib.loads((SHIPPED_DIR / f"{name}.toml").read_text(encoding="utf-8"))


def shipped() -> list[str]:
    return sorted(path.stem for path in SHIPPED_DIR.glob("*.toml"))


def test_the_presets_said_to_use_native_are_the_ones_that_do() -> None:
    def targets(data: dict[str, Any]) -> set[str]:
        found = set()
        for table in data.values():
            if isinstance(table, dict):
                for role in ("orchestrator", "subagent", "background", "fallback"):
                    value = table.get(role)
                    found.update(value if isinstance(value, list) else [value] if value else [])
        return found

    using = sorted(name for name in shipped() if "native" in targets(preset(name)))
    text = one_line(README)
    claim = re.search(r"\(the `native` target, used by ([^)]*)\)", text)
    assert claim is not None, "the README names the presets that use `native`"
    assert sorted(re.findall(r"`([a-z0-9-]+)`", claim.group(1))) == using


def test_each_shipped_preset_s_fallback_is_as_the_readme_says() -> None:
    text = one_line(README)
    listing = re.search(r"Shipped: (.*?) Your own go in", text)
    assert listing is not None
    entries = dict(re.findall(r"`([a-z0-9-]+)` \(([^)]*)\)", listing.group(1)))
    assert sorted(entries) == shipped()
    for name in shipped():
        fallback = preset(name).get("default", {}).get("fallback", [])
        said = entries[name]
        if not fallback:
            assert "no fallback" in said, name
        else:
            named = " then ".join(f"`{target}`" for target in fallback)
            assert f"falls back to {named}" in said, name


def test_the_demo_s_kimi_sim_carries_kimi_k3_s_bundled_price() -> None:
    from switch.demo.run import PRICES

    kimi = per_million(*KIMI)
    assert {key: PRICES["demo/kimi-sim"][key] for key in ("input", "cached_input", "output")} == {
        key: kimi[key] for key in ("input", "cached_input", "output")
    }
