"""The plan against the run it predicts: when the pilot is the first traces of a larger score table
(`plan --pilot-traces N`), each prediction at a K the table holds, its interval, and the table's own vote at K."""

from __future__ import annotations

from tabulate import tabulate

from tracevote.core.config_deepconf import MEASURES, EvalConfig
from tracevote.deepconf.evaluate import ProblemScores
from tracevote.deepconf.plan import Projection
from tracevote.deepconf.plan_validation import Validation, check_against


def measured_table(measured: list[ProblemScores], projections: list[Projection], validation: Validation,
                   cfg: EvalConfig) -> str:
    """One row a method and K: predicted, interval, measured (the vote on each problem's first K traces), and
    whether the measured value lies inside."""
    rows = check_against(measured, projections, validation, cfg, MEASURES)
    ks = sorted({row.k for row in rows})
    head = (f"against the score table's own vote on each problem's first K traces ({len(measured)} problems, "
            f"K={', '.join(map(str, ks))}): {sum(row.inside for row in rows)} of {len(rows)} inside their interval")
    cells = [[row.method, str(row.k), f"{100 * row.predicted:.1f}", f"[{100 * row.low:.1f}, {100 * row.high:.1f}]",
              f"{100 * row.measured:.1f}", f"{100 * (row.predicted - row.measured):+.1f}",
              "yes" if row.inside else "NO"] for row in rows]
    table = tabulate(cells, headers=["method", "K", "predicted", "interval", "measured", "error", "inside"],
                     tablefmt="simple", disable_numparse=True)
    return f"{head}\n{table}" if rows else head
