"""Which of a problem's traces get a trace page (params.yaml view.trace_pages, view.trace_pages_by).

A trace page carries every token with its confidence and alternatives: at the paper's scale (30 problems x 4,096
traces x ~3,000 tokens) pages for every trace are ~20 GB and half an hour of writing. So by default a problem's
traces are ranked by one confidence measure, as its page shows them (the score table's column, rounded as on the
page), and only the N most and N least confident get a page: the traces a reader compares first. Every trace keeps
its row on the problem page; the rows without a page are not linked, and the page says why (`subset_note`).
A trace without the measure (no token had a confidence: NaN) is at neither end. Ties go to the smaller sample id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracevote.core.config_view import ViewConfig


@dataclass(frozen=True)
class TraceSubset:
    """The sample ids of one problem that get a page; `ids` None: every trace."""

    ids: frozenset[int] | None
    per_end: int | None  # view.trace_pages
    by: str  # view.trace_pages_by

    def has_page(self, sample_id: int) -> bool:
        return self.ids is None or sample_id in self.ids


def chosen_traces(columns: dict[str, list], cfg: ViewConfig) -> TraceSubset:
    """The subset of a problem's traces (its score rows, column by column) that get a page.

    >>> cfg = ViewConfig(trace_pages=1, trace_pages_by="avg")
    >>> sorted(chosen_traces({"sample_id": [0, 1, 2, 3], "avg": [0.5, 0.9, float("nan"), 0.1]}, cfg).ids)
    [1, 3]
    >>> chosen_traces({"sample_id": [0, 1], "avg": [0.5, 0.9]}, cfg).ids is None
    True
    """
    ids = [int(sample_id) for sample_id in columns["sample_id"]]
    n = cfg.trace_pages
    if n is None or len(ids) <= 2 * n:
        return TraceSubset(None, n, cfg.trace_pages_by)
    values = columns[cfg.trace_pages_by]
    ranked = sorted(((value, sample_id) for value, sample_id in zip(values, ids, strict=True)
                     if value is not None and not math.isnan(value)), key=lambda pair: (-pair[0], pair[1]))
    least = sorted(ranked, key=lambda pair: (pair[0], pair[1]))[:n]
    return TraceSubset(frozenset(sample_id for _, sample_id in [*ranked[:n], *least]), n, cfg.trace_pages_by)


def subset_note(subset: TraceSubset, total: int) -> dict[str, Any] | None:
    """What the problem page says of the traces without a page (None when every trace has one)."""
    if subset.ids is None:
        return None
    return {"pages": len(subset.ids), "traces": total, "per_end": subset.per_end, "by": subset.by,
            "ids": sorted(subset.ids)}
