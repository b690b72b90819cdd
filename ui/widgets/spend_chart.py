"""Spend over time as horizontal bars stacked by group (served model, role), drawn with block characters."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from .. import format as fmt
from ..data import clock_label

PALETTE = ("dodger_blue1", "orange1", "green3", "magenta", "yellow3", "cyan", "red3", "purple")


class SpendChart(Static):
    """A stacked bar per time bucket; the legend names each group's color."""

    def show(self, series: list[tuple[float, str, int]], bucket_seconds: int, width: int, rows: int = 12) -> None:
        """Draw the last `rows` buckets of `series` (bucket, group, micro-USD) in about `width` columns."""
        if not series:
            self.update("No spend in this range.")
            return
        buckets: dict[float, dict[str, int]] = {}
        models: list[str] = []
        for bucket, model, micros in series:
            buckets.setdefault(bucket, {})[model] = micros
            if model not in models:
                models.append(model)
        colors = {model: PALETTE[index % len(PALETTE)] for index, model in enumerate(models)}
        recent = list(buckets.items())[-rows:]
        peak = max(sum(parts.values()) for _, parts in recent) or 1
        bar_width = max(10, width - 22)
        text = Text()
        for bucket, parts in recent:
            text.append(f"{clock_label(bucket, bucket_seconds):>5} ")
            for model in models:
                cells = round(parts.get(model, 0) / peak * bar_width)
                text.append("█" * cells, style=colors[model])
            text.append(f" {fmt.money(sum(parts.values()))}\n")
        for model in models:
            text.append("■ ", style=colors[model])
            text.append(f"{model}  ")
        self.update(text)
