"""Metric labels stay bounded whatever model names clients send.

On native routes the served model is the client's choice: 3,000 invented names made 3,000 label sets in
every family (a 20.9 MB `/metrics`). Now only configured, routed or priced models get a label of their
own, at most MAX_MODEL_LABELS of them; the rest count under `PROVIDER/other`.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from switch.config import load_settings
from switch.proxy.metrics import MAX_MODEL_LABELS, Metrics
from switch.routing.presets import load_preset
from tests.ledger_seed import FROZEN_NOW, kimi_call, pricer_for

INVENTED = 3_000


def _served_models(text: bytes) -> dict[str, float]:
    calls: dict[str, float] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == "switch_calls_total":
                model = sample.labels["served_model"]
                calls[model] = calls.get(model, 0.0) + sample.value
    return calls


def test_invented_model_names_fold_into_one_label(isolated_home: Path) -> None:
    """3,000 unknown native model names are one `anthropic/other` label; known ones keep their own."""
    settings = load_settings()
    pricer = pricer_for(settings)
    preset = load_preset("hybrid", set(settings.providers), settings.defaults.model)
    from switch.proxy.app import _configured

    metrics = Metrics(configured=lambda model: _configured(settings, preset, model))
    native = [
        pricer.row(
            kimi_call(FROZEN_NOW, provider="anthropic", served_model=f"made-up-{index}", upstream_api="anthropic")
        )
        for index in range(INVENTED)
    ]
    priced = pricer.row(kimi_call(FROZEN_NOW, provider="anthropic", served_model="claude-opus-5-5"))
    routed = pricer.row(kimi_call(FROZEN_NOW))  # the hybrid preset's Kimi target
    metrics.observe([*native, priced, routed])

    text = metrics.exposition()
    calls = _served_models(text)
    assert calls == {"anthropic/other": INVENTED, "anthropic/claude-opus-5-5": 1, "baseten/moonshotai/Kimi-K3": 1}
    assert b"made-up-" not in text
    assert len(text) < 64 * 1024  # a few families of three label sets, not thousands


def test_the_label_set_has_a_cap_even_for_known_models(isolated_home: Path) -> None:
    """Past MAX_MODEL_LABELS distinct models, even configured ones count under `PROVIDER/other`."""
    pricer = pricer_for(load_settings())
    metrics = Metrics(configured=lambda model: True)
    names = MAX_MODEL_LABELS + 50
    metrics.observe([pricer.row(kimi_call(FROZEN_NOW, served_model=f"known-{index}")) for index in range(names)])
    calls = _served_models(metrics.exposition())
    assert len(calls) == MAX_MODEL_LABELS + 1
    assert calls["baseten/other"] == 50
    assert sum(calls.values()) == names
