"""What a benchmark reports: figures, each ours against a baseline over the same interleaved repetitions.

A figure keeps every repetition (JSON-friendly lists), so the printed statistic is always the same one on
both sides: the median, with min and max. `cpu` and `baseline_cpu` hold the same figure measured on CPU
time (CPU seconds, or a rate per CPU second), printed beside the wall-clock one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.measure import Spread


@dataclass(frozen=True)
class Figure:
    name: str
    unit: str
    ours: list[float]
    baseline: list[float] | None = None
    higher_is_better: bool = True  # rates: ours / baseline is the speed-up; seconds: baseline / ours
    cpu: list[float] | None = None
    baseline_cpu: list[float] | None = None
    cpu_unit: str = "CPU s"
    baseline_name: str = "baseline"
    note: str = ""
    tags: list[str] = field(default_factory=list)

    @property
    def spread(self) -> Spread:
        return Spread.of(self.ours)

    @property
    def speedup(self) -> float | None:
        """Ratio of the medians, oriented so that > 1 means ours is better."""
        if not self.baseline:
            return None
        return _oriented(self.spread.median, Spread.of(self.baseline).median, self.higher_is_better)

    @property
    def speedup_spread(self) -> Spread | None:
        """The same ratio per repetition (ours and baseline of one round are paired): its noise."""
        if not self.baseline:
            return None
        return Spread.of([_oriented(a, b, self.higher_is_better) for a, b in zip(self.ours, self.baseline,
                                                                                 strict=True)])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Figure:
        return cls(**data)


def _oriented(ours: float, baseline: float, higher_is_better: bool) -> float:
    top, bottom = (ours, baseline) if higher_is_better else (baseline, ours)
    return top / bottom if bottom > 0 else math.inf


def number(value: float) -> str:
    """Three significant digits with a k/M/G suffix: 27_100_000 -> '27.1M', 0.4567 -> '0.457'."""
    if not math.isfinite(value):
        return str(value)
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def shown(values: list[float] | None) -> str:
    if not values:
        return "—"
    spread = Spread.of(values)
    if spread.count == 1:
        return number(spread.median)
    return f"{number(spread.median)} [{number(spread.low)}–{number(spread.high)}]"


HEAD = ("figure", "unit", "ours: median [min–max]", "baseline: median [min–max]", "ratio of medians (per round)",
        "CPU: ours | baseline")


def table_lines(figures: list[Figure]) -> list[str]:
    """A fixed-width table, one figure a line, its note (and baseline's name) on the next."""
    rows = [HEAD] + [_cells(figure) for figure in figures]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEAD))]
    lines = []
    for index, row in enumerate(rows):
        lines.append("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index:
            figure = figures[index - 1]
            note = "; ".join(part for part in (_baseline_note(figure), figure.note) if part)
            if note:
                lines.append(f"      {note}")
    return lines


def _cells(figure: Figure) -> tuple[str, ...]:
    ratio = figure.speedup
    noise = figure.speedup_spread
    ratio_cell = "" if ratio is None or noise is None else f"{ratio:.2f}x ({noise.low:.2f}–{noise.high:.2f})"
    cpu = "" if figure.cpu is None else f"{shown(figure.cpu)} | {shown(figure.baseline_cpu)} {figure.cpu_unit}"
    return figure.name, figure.unit, shown(figure.ours), shown(figure.baseline), ratio_cell, cpu


def _baseline_note(figure: Figure) -> str:
    return f"baseline: {figure.baseline_name}" if figure.baseline else ""
