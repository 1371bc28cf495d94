"""The live run's accuracy-vs-tokens figure: its margins, set by hand, hold its title, axis labels and legend."""

from __future__ import annotations

import pytest

from tests.report.test_plots import assert_laid_out
from tracevote.report.live import Comparison, LiveMethod, accuracy_vs_tokens_figure, pool_curves


def live_method(accuracy: float, tokens: float) -> LiveMethod:
    return LiveMethod(accuracy_pct=accuracy, ci_low_pct=accuracy - 12, ci_high_pct=accuracy + 9, answered_pct=95.0,
                      completion_tokens=tokens, received_tokens=tokens * 1.1, kept_tokens=tokens * 0.9,
                      counted_by_client_pct=0.0, prompt_tokens_unknown=0, usd=0.01, traces_started=40,
                      traces_stopped=12, traces_cancelled=3, closed_after_finish=0, closed_unrecorded=0,
                      started_before_decision=2, traces_started_per_problem=10.0)


@pytest.mark.parametrize("beside", [True, False])
def test_the_live_figure_clears_its_legend_with_or_without_the_pool(beside: bool) -> None:
    """With the pool's curves and the comparison, the legend has most rows (three methods: seven, four rows
    below the axis); without them, one short legend and the note inside the axes saying why."""
    live = {name: live_method(60.0 + 5 * i, 3000.0 * (i + 1)) for i, name in enumerate(("low", "high", "mid"))}
    ks = [1, 2, 4, 8, 16]
    curves = pool_curves(([k * 1500.0 for k in ks], [0.5, 0.55, 0.6, 0.62, 0.63]),
                         {name: ([k * 1200.0 for k in ks], [0.5, 0.56, 0.6, 0.61, 0.62]) for name in ("online_low",)},
                         ks) if beside else []
    comparison = Comparison(cons_accuracy_pct=62.0, cons_tokens=24000.0,
                            replay_accuracy_pct={name: 61.0 for name in live},
                            replay_tokens={name: 15000.0 for name in live},
                            saving_vs_cons_pct={name: 30.0 for name in live}) if beside else None
    figure = accuracy_vs_tokens_figure(curves, live, dataset="aime_2025", simulated=True, comparison=comparison,
                                       budget=16, absent=None if beside else "no pool of the same setting was scored")
    assert len(figure.legends[0].get_texts()) == (len(curves) + 1 + 2 * len(live) if beside else len(live))
    assert figure.get_layout_engine() is None  # margins set by hand: no measuring draw before each save
    assert_laid_out(figure, shared_texts=1)
