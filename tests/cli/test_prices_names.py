"""`switch prices NAME` takes the model names people see (in `switch calls`, the dashboard and the status line),
not only `provider/model`: one priced provider is the answer, several are listed to choose from, none is unpriced."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from switch.config import load_settings
from switch.ledger.pricing import PriceTable
from switch.ledger.recorder import Recorder
from tests.commands import run_switch
from tests.ledger_seed import FROZEN_NOW, kimi_call, pricer_for

CONFIG = """
[providers.acmehost]
api = "openai-chat"
base_url = "http://127.0.0.1:9/v1"

[prices."acmehost/acme/Widget-7"]
input = 1.25
cached_input = 0.125
output = 5
"""
KIMI = {"input": 3.0, "cached_input": 0.3, "cache_write": 3.0, "output": 15.0}


@pytest.fixture
def home(isolated_home: Path) -> Path:
    """A home with a user provider and its price in config.toml, and a ledger the real recorder wrote."""
    (isolated_home / "config.toml").write_text(CONFIG, encoding="utf-8")
    recorder = Recorder(
        pricer_for(load_settings()),
        database=isolated_home / "ledger.db",
        spill=isolated_home / "ledger.spill.jsonl",
    )
    recorder.start()
    recorder.submit(kimi_call(FROZEN_NOW))
    recorder.submit(kimi_call(FROZEN_NOW + 1, provider="acmehost", served_model="acme/Widget-7"))
    recorder.close(timeout=60)
    return isolated_home


def prices(*args: str) -> Any:
    done = run_switch("prices", *args, "--json")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)
    return result


def served_models() -> list[str]:
    done = run_switch("calls", "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["served_model"] for line in done.stdout.splitlines()]


def test_the_name_calls_shows_resolves_to_the_one_provider_that_prices_it(home: Path) -> None:
    models = served_models()
    assert models == ["moonshotai/Kimi-K3", "acme/Widget-7"]
    widget = prices(models[1])
    assert widget["resolved"] == "acmehost/acme/Widget-7"
    assert widget["price"] == {"input": 1.25, "cached_input": 0.125, "cache_write": 1.25, "output": 5.0}
    assert widget["source"] == "config:acmehost/acme/Widget-7"
    # The short name the status line shows works too.
    assert prices("Widget-7")["resolved"] == "acmehost/acme/Widget-7"
    text = run_switch("prices", "acme/Widget-7").stdout
    assert text.startswith("acme/Widget-7 (acmehost/acme/Widget-7): $1.25 input, $0.125 cached input, $5 output")


def test_a_name_several_providers_serve_lists_each_with_its_price_and_source(home: Path) -> None:
    kimi = prices(served_models()[0])
    assert kimi["price"] is None and kimi["resolved"] is None  # not guessed
    candidates = {candidate["model"]: candidate for candidate in kimi["candidates"]}
    assert set(candidates) == {"baseten/moonshotai/Kimi-K3", "openrouter/moonshotai/Kimi-K3"}
    assert candidates["baseten/moonshotai/Kimi-K3"]["price"] == KIMI
    assert candidates["baseten/moonshotai/Kimi-K3"]["source"] == "litellm:baseten/moonshotai/Kimi-K3"
    assert candidates["openrouter/moonshotai/Kimi-K3"]["source"] == "switch:openrouter/moonshotai/kimi-k3"
    short = {candidate["model"] for candidate in prices("Kimi-K3")["candidates"]}
    assert short == {"baseten/moonshotai/Kimi-K3", "moonshot/Kimi-K3", "openrouter/moonshotai/Kimi-K3"}
    lines = run_switch("prices", "moonshotai/Kimi-K3").stdout.splitlines()
    assert lines[0] == "moonshotai/Kimi-K3 is served by 2 providers; name one as provider/model:"
    assert lines[1] == (
        "  baseten/moonshotai/Kimi-K3: $3 input, $0.3 cached input, $15 output per million tokens"
        " (source: LiteLLM cost map, baseten/moonshotai/Kimi-K3)"
    )
    assert "unpriced" not in "\n".join(lines)


def test_provider_model_still_answers_exactly_and_unknown_names_are_unpriced_with_the_hint(home: Path) -> None:
    exact = prices("baseten/moonshotai/Kimi-K3")
    assert (exact["resolved"], exact["price"]) == ("baseten/moonshotai/Kimi-K3", KIMI)
    # A plain name of one provider's model (an OpenAI name is not Anthropic's, though both tables are unprefixed).
    assert prices("gpt-5.5")["resolved"] == "openai/gpt-5.5"
    assert prices("claude-opus-5-5")["resolved"] == "anthropic/claude-opus-5-5"
    for unknown in ("nobody/Model-0", "Model-0", "acmehost/acme/Widget-8"):
        assert prices(unknown)["candidates"] == []
        assert run_switch("prices", unknown).stdout == (
            f'{unknown}: unpriced (add [prices."{unknown}"] to config.toml)\n'
        )


PROVIDERS = ("acmehost", "anthropic", "baseten", "moonshot", "openai", "openrouter")


@functools.cache
def table() -> PriceTable:
    """The price table with one user price (loaded once: it reads litellm's whole table)."""
    return PriceTable({"acmehost/acme/Widget-7": {"input": 1.25, "output": 5}})


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.builds(
            "/".join,
            st.lists(
                st.sampled_from(["", "baseten", "moonshotai", "Kimi-K3", "kimi-k3", "gpt-5.5", "x/y", "é"]), max_size=4
            ),
        ),
    )
)
def test_any_name_resolves_to_priced_references_of_configured_providers_or_to_nothing(name: str) -> None:
    found = table().resolve(name, PROVIDERS)
    references = [candidate.reference for candidate in found]
    assert len(set(references)) == len(references)
    for candidate in found:
        # Each is a configured provider's model, or the name itself when the table knows it unprefixed.
        assert candidate.reference == name or candidate.reference.split("/", 1)[0] in PROVIDERS
        assert candidate.price.output >= 0 and candidate.price.source
    if len(found) == 1 and "/" in name and name.split("/", 1)[0] in PROVIDERS:
        assert references == [name]  # provider/model is taken as written, never re-resolved
