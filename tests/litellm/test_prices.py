"""Prices for LiteLLM targets: LiteLLM's cost map under the provider's own LiteLLM name, never another provider's."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from switch.config import load_settings
from switch.ledger.pricing import PriceTable
from tests.ledger_seed import kimi_call, pricer_for

CONFIG = (
    '[providers.google]\napi = "litellm"\nlitellm_provider = "gemini"\n'
    '[providers.aws]\napi = "litellm"\nlitellm_provider = "bedrock"\n'
    '[providers.local]\napi = "litellm"\nlitellm_provider = "ollama_chat"\n'
    '[providers.mist]\napi = "litellm"\nlitellm_provider = "mistral"\n'
)


def names(home: Path, extra: str = "") -> PriceTable:
    (home / "config.toml").write_text(CONFIG + extra)
    settings = load_settings()
    return pricer_for(settings).table


def test_a_litellm_provider_is_priced_under_its_litellm_name_from_litellm_cost_map(isolated_home: Path) -> None:
    table = names(isolated_home)
    google = table.lookup("google", "gemini-2.5-pro")
    assert google is not None and google.source == "litellm:gemini/gemini-2.5-pro"
    assert google.per_million()["input"] == 1.25 and google.per_million()["cached_input"] == 0.125
    # Bedrock's models sit unprefixed in LiteLLM's table, marked as Bedrock's.
    aws = table.lookup("aws", "anthropic.claude-3-5-sonnet-20240620-v1:0")
    assert aws is not None and aws.source == "litellm:anthropic.claude-3-5-sonnet-20240620-v1:0"
    # LiteLLM's `ollama_chat` route is the same local Ollama that its table prices as `ollama/`.
    local = table.lookup("local", "llama3")
    assert local is not None and local.source == "litellm:ollama/llama3"


def test_the_same_model_under_another_provider_is_never_applied_and_unknown_stays_unpriced(
    isolated_home: Path,
) -> None:
    table = names(isolated_home)
    # Mistral does not sell Gemini; Vertex's and Google's prices for it must not be charged to Mistral calls.
    assert table.lookup("mist", "gemini-2.5-pro") is None
    assert table.lookup("google", "no-such-model-anywhere") is None
    assert "gemini/gemini-2.5-pro" in table.suggestions("gemini-2.5-pro")


def test_the_users_prices_come_before_litellms(isolated_home: Path) -> None:
    table = names(isolated_home, '[prices."google/gemini-2.5-pro"]\ninput = 1.0\noutput = 2.0\n')
    price = table.lookup("google", "gemini-2.5-pro")
    assert price is not None and price.source == "config:google/gemini-2.5-pro"
    assert price.per_million()["output"] == 2.0


def test_a_litellm_call_is_costed_in_the_ledger_row(isolated_home: Path) -> None:
    (isolated_home / "config.toml").write_text(CONFIG)
    pricer = pricer_for(load_settings())
    record = kimi_call(
        1_800_000_000.0,
        provider="google",
        served_model="gemini-2.5-pro",
        upstream_api="litellm",
        input_tokens=1_000_000,
        cache_read_tokens=0,
        output_tokens=100_000,
    )
    row = pricer.row(record)
    assert row["price_source"] == "litellm:gemini/gemini-2.5-pro"
    assert row["cost_micros"] == 1_250_000 + 1_000_000  # $1.25 input + 0.1 M output at $10 per million


def test_switch_prices_names_each_source_and_suggests_without_applying(isolated_home: Path) -> None:
    from switch.cli import app

    (isolated_home / "config.toml").write_text(CONFIG + '[prices."mist/mistral-large-latest"]\ninput = 9\noutput = 9\n')
    runner = CliRunner()
    priced = runner.invoke(app, ["prices", "google/gemini-2.5-pro"])
    assert priced.exit_code == 0
    assert "(source: LiteLLM cost map, gemini/gemini-2.5-pro)" in priced.output
    mine = runner.invoke(app, ["prices", "mist/mistral-large-latest"])
    assert "(source: config.toml [prices], mist/mistral-large-latest)" in mine.output
    other = runner.invoke(app, ["prices", "mist/gemini-2.5-pro", "--json"])
    (result,) = json.loads(other.output[other.output.index("[") :])
    assert result["price"] is None and result["source"] is None
    assert "gemini/gemini-2.5-pro" in result["suggestions"]
    text = runner.invoke(app, ["prices", "mist/gemini-2.5-pro"]).output
    assert "mist/gemini-2.5-pro: unpriced" in text and "not applied" in text
