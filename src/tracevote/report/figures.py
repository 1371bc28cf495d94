"""What every figure of the report stages shares: its title marked SIMULATED, its PNG written whole, and the CSV
`dvc plots` draws from plain columns. Apart from report.plots, which draws from pandas frames, so a stage drawing
from plain arrays (report_grading, report_critiques, compare) loads no pandas (~0.4 CPU s of start-up)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure  # the object API draws to files without a GUI backend

from tracevote.core.csvtext import columns_csv
from tracevote.core.fileio import atomic_path

# A panel title at the top of its axes, where it lands anyway when no tick labels or offset text sit above the
# panel: given, it spares matplotlib measuring every axis's decorations to place it at each draw (~0.1 CPU s).
TITLE_Y = 1.0
# the narrowest figure whose title (with its SIMULATED mark) and three-column legend fit: one panel wide is less
MIN_WIDTH_IN = 8.0


def titled(text: str, simulated: bool) -> str:
    return f"SIMULATED — {text}" if simulated else text


def set_margins(figure: Figure, grid: tuple[int, int], *, left: float, right: float, top: float, bottom: float,
                wspace: float = 0.0, hspace: float = 0.0) -> None:
    """Margins and gaps between panels in inches, set once for a `grid` of (rows, columns) panels. Constrained
    layout finds them by measuring every text's box in an extra draw (~0.3 CPU s a figure); each figure here knows
    what its margins hold (a title, tick labels, an axis label, a legend), so it says it."""
    width, height = figure.get_size_inches()
    rows, columns = grid
    panel_width = (width - left - right - (columns - 1) * wspace) / columns
    panel_height = (height - top - bottom - (rows - 1) * hspace) / rows
    figure.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                           bottom=bottom / height, wspace=wspace / panel_width, hspace=hspace / panel_height)


def save_png(figure: Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=110, format="png")


def plot_csv(columns: Mapping[str, Sequence[Any]], *, simulated: bool, float_format: str) -> str:
    """A table `dvc plots` draws, as CSV, with a last column `simulated` (True or False on every row): DVC titles
    are static text, so our templates (report/templates/) read it and put "SIMULATED: " before the title."""
    rows = len(next(iter(columns.values()), []))
    return columns_csv({**columns, "simulated": [simulated] * rows}, float_format)
